#!/usr/bin/env bash
# Pack every unfinished run's checkpoint under results/paper into .ckpt/ (git-ignored), which a
# GPU window carries (carry [".whl", ".data", ".ckpt"]) and scripts/gpu_window.sh restores first.
# Run by gpu_unpack.sh after a window and by gpu_prepare.sh before one (runs resumed on this CPU
# in between have newer checkpoints than the last window left).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .ckpt && mkdir -p .ckpt
find results/paper -name checkpoint.pt -print0 | tar czf .ckpt/checkpoints.tgz --null -T -
echo "$(find results/paper -name checkpoint.pt | wc -l) unfinished runs' checkpoints in .ckpt/ ($(du -h .ckpt/checkpoints.tgz | cut -f1)) for the next window"
