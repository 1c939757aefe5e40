#!/usr/bin/env bash
# Pack every unfinished run's checkpoint under results/paper and results/studies into .ckpt/ (git-ignored), which is
# copied to the offline GPU node beside the tree (with .whl/ and .data/) and which
# scripts/offline_gpu/run.sh restores first.
# Run by unpack.sh after a job and by prepare.sh before one (runs resumed on this CPU
# in between have newer checkpoints than the last job left).
# A checkpoint beside a `done` marker and its record is stale (the run finished elsewhere, e.g. in a GPU job, while
# this CPU still held an earlier stretch's state); the runner removes a finished run's checkpoint,
# so it is removed here too rather than carried (624 such files once made .ckpt/ 56 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .ckpt && mkdir -p .ckpt
stale=0
list=$(mktemp)
while IFS= read -r -d '' ckpt; do
  if [ -f "$(dirname "$ckpt")/done" ] && [ -f "$(dirname "$ckpt")/record.json" ]; then rm -f "$ckpt"; stale=$((stale + 1))
  else printf '%s\0' "$ckpt" >>"$list"; fi
done < <(find results/paper results/studies -name checkpoint.pt -print0 2>/dev/null)
tar czf .ckpt/checkpoints.tgz --null -T "$list"
echo "$(tr -cd '\0' <"$list" | wc -c) unfinished runs' checkpoints in .ckpt/ ($(du -h .ckpt/checkpoints.tgz | cut -f1)) for the next job; $stale stale ones (run finished) removed"
rm -f "$list"
