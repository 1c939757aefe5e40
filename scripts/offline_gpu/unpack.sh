#!/usr/bin/env bash
# Unpack what scripts/offline_gpu/run.sh packed on an offline GPU node into this checkout:
#   bash scripts/offline_gpu/unpack.sh DIR      (DIR: the folder the job's $OUT was copied back into)
# Records (record.json + done) land under the results root they were written to (e.g.
# results/paper/<dataset>/...), next to the checkpoints of runs the job did not finish,
# so `make reproduce-tables` here (or the next job) skips the finished runs and resumes
# the others. What prepare.sh set aside to keep the copied tree small comes back first
# (scripts/offline_gpu/stash.sh back). A record that already exists here is kept (tar --skip-old-files);
# the job's checkpoints replace the ones here and are packed into .ckpt/ for the next job; the
# job's training curves start where it resumed each run, so they are spliced onto the rows
# here (python scripts/offline_gpu/curves.py splice).
set -euo pipefail
DIR=$(cd "${1:?usage: scripts/offline_gpu/unpack.sh DIR}" && pwd)
cd "$(dirname "$0")/../.."
unpack() {  # unpack NAME TAR-OPTION [INTO]: the archive, whole or in parts, into INTO (default .)
  if compgen -G "$DIR/$1.tgz.part*" >/dev/null; then cat "$DIR/$1.tgz.part"* | tar xzf - -C "${3:-.}" "$2"
  elif [ -f "$DIR/$1.tgz" ]; then tar xzf "$DIR/$1.tgz" -C "${3:-.}" "$2"; fi
}
PY=${PYTHON:-.venv/bin/python}
PYTHON=$PY bash scripts/offline_gpu/stash.sh back   # what prepare.sh set aside
unpack records --skip-old-files   # a record already here is kept
unpack checkpoints --overwrite    # a later job's checkpoint replaces an earlier one
returned=$(mktemp -d)
unpack curves --overwrite "$returned"
$PY scripts/offline_gpu/curves.py splice "$returned" .   # the job's rows after the earlier rows here
rm -rf "$returned"
bash scripts/offline_gpu/checkpoints.sh   # every unfinished run's checkpoint -> .ckpt/ for the next job
[ -f "$DIR/window.log" ] && { grep '^\[window' "$DIR/window.log" || true; }
echo "unpacked; python -m kanx.status results/paper shows what is done"
