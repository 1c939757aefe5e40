#!/usr/bin/env bash
# Unpack what scripts/gpu_window.sh packed on a GPU machine into this checkout:
#   bash scripts/gpu_unpack.sh DIR      (DIR: the device tool's files_at folder)
# Records (record.json + done) land under the results root they were written to (e.g.
# results/paper/<dataset>/...), next to the checkpoints of runs the window did not finish,
# so `make reproduce-tables` here (or the next window) skips the finished runs and resumes
# the others. A record that already exists here is kept (tar --skip-old-files).
set -euo pipefail
DIR=${1:?usage: scripts/gpu_unpack.sh DIR}
cd "$(dirname "$0")/.."
for name in records checkpoints; do
  if compgen -G "$DIR/$name.tgz.part*" >/dev/null; then
    cat "$DIR/$name.tgz.part"* | tar xzf - --skip-old-files
  elif [ -f "$DIR/$name.tgz" ]; then
    tar xzf "$DIR/$name.tgz" --skip-old-files
  fi
done
[ -f "$DIR/window.log" ] && grep '^\[window' "$DIR/window.log"
echo "unpacked; python -m kanx.status results/paper shows what is done"
