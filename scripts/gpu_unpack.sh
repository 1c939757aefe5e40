#!/usr/bin/env bash
# Unpack what scripts/gpu_window.sh packed on a GPU machine into this checkout:
#   bash scripts/gpu_unpack.sh DIR      (DIR: the device tool's files_at folder)
# Records (record.json + done) land under the results root they were written to (e.g.
# results/paper/<dataset>/...), next to the checkpoints of runs the window did not finish,
# so `make reproduce-tables` here (or the next window) skips the finished runs and resumes
# the others. A record that already exists here is kept (tar --skip-old-files); checkpoints and
# training curves (metrics.csv) replace older ones; the checkpoints are packed into .ckpt/ for the
# next window to carry (the curves, not ignored by git, travel with the working tree).
set -euo pipefail
DIR=${1:?usage: scripts/gpu_unpack.sh DIR}
cd "$(dirname "$0")/.."
unpack() {  # unpack NAME TAR-OPTION: the archive, whole or in parts
  if compgen -G "$DIR/$1.tgz.part*" >/dev/null; then cat "$DIR/$1.tgz.part"* | tar xzf - "$2"
  elif [ -f "$DIR/$1.tgz" ]; then tar xzf "$DIR/$1.tgz" "$2"; fi
}
unpack records --skip-old-files   # a record already here is kept
unpack checkpoints --overwrite    # a later window's checkpoint replaces an earlier one
unpack curves --overwrite         # metrics.csv: a resumed run keeps its earlier rows, so the window's is the whole curve
bash scripts/gpu_checkpoints.sh   # every unfinished run's checkpoint -> .ckpt/ for the next window
[ -f "$DIR/window.log" ] && grep '^\[window' "$DIR/window.log"
echo "unpacked; python -m kanx.status results/paper shows what is done"
