#!/usr/bin/env bash
# Unpack what scripts/gpu_window.sh packed on a GPU machine into this checkout:
#   bash scripts/gpu_unpack.sh DIR      (DIR: the device tool's files_at folder)
# Records (record.json + done) land under the results root they were written to (e.g.
# results/paper/<dataset>/...), next to the checkpoints of runs the window did not finish,
# so `make reproduce-tables` here (or the next window) skips the finished runs and resumes
# the others. What gpu_prepare.sh set aside to keep the travelling tree small comes back first
# (scripts/gpu_stash.sh back). A record that already exists here is kept (tar --skip-old-files);
# the window's checkpoints replace the ones here and are packed into .ckpt/ for the next window; the
# window's training curves start where it resumed each run, so they are spliced onto the rows
# here (python -m kanx.curves splice).
set -euo pipefail
DIR=$(cd "${1:?usage: scripts/gpu_unpack.sh DIR}" && pwd)
cd "$(dirname "$0")/.."
unpack() {  # unpack NAME TAR-OPTION [INTO]: the archive, whole or in parts, into INTO (default .)
  if compgen -G "$DIR/$1.tgz.part*" >/dev/null; then cat "$DIR/$1.tgz.part"* | tar xzf - -C "${3:-.}" "$2"
  elif [ -f "$DIR/$1.tgz" ]; then tar xzf "$DIR/$1.tgz" -C "${3:-.}" "$2"; fi
}
PY=${PYTHON:-.venv/bin/python}
PYTHON=$PY bash scripts/gpu_stash.sh back   # what gpu_prepare.sh set aside
unpack records --skip-old-files   # a record already here is kept
unpack checkpoints --overwrite    # a later window's checkpoint replaces an earlier one
returned=$(mktemp -d)
unpack curves --overwrite "$returned"
$PY -m kanx.curves splice "$returned" .   # the window's rows after the earlier rows here
rm -rf "$returned"
bash scripts/gpu_checkpoints.sh   # every unfinished run's checkpoint -> .ckpt/ for the next window
[ -f "$DIR/window.log" ] && { grep '^\[window' "$DIR/window.log" || true; }
echo "unpacked; python -m kanx.status results/paper shows what is done"
