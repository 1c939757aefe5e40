#!/usr/bin/env bash
# Keep the working tree that is copied to the offline GPU node under the copy step's 64 MiB (tracked
# and untracked-not-ignored files plus the copied .whl/, .data/, .ckpt/):
#   bash scripts/offline_gpu/stash.sh out    # called by prepare.sh
#   bash scripts/offline_gpu/stash.sh back   # called by unpack.sh; does nothing without .stash/
# `out` moves into .stash/ (git-ignored, so it stays here) every file under results/ that the job
# does not read: other results roots (calibration, earlier protocols), analyses and logs under
# results/paper, the kept weights (model.pt, ~20 KB a Nguyen run), and every training curve (metrics.csv: ~22 KB a run at 10,000 epochs, 40 MB for
# Nguyen's seeds 3-9 alone; a finished run's metrics.csv.gz, about a third of that). The rest stays, among it each run's record.json and done marker under
# results/paper, by which the job skips finished runs. A run the job resumes without its
# curve writes rows from its checkpoint on, and unpack.sh splices those onto the rows here.
# While files are set aside, `git status` shows them deleted: run `back` before committing results.
# `out` refuses to run while .stash/ exists (a second `out` would stash over the first).
# `back` moves every set-aside file back; where the run has a curve again (either form), the curves are
# spliced (the set-aside rows, then the rows written since: scripts/offline_gpu/curves.py), and where the tree
# has any other file of that name again it stays in .stash/, named, with exit status 1: nothing set
# aside is deleted.
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH=.stash
LIMIT=$((64 * 1024 * 1024))

travelling_bytes() {  # what the copy step sends: tree files git does not ignore, plus .whl/, .data/, .ckpt/
  { git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
    find .whl .data .ckpt -type f -print0 2>/dev/null || true; } | du -cb --files0-from=- | tail -1 | cut -f1
}

case "${1:-}" in
  out)
    if [ -e "$STASH" ]; then
      echo "stash.sh: $STASH/ exists (files set aside earlier): run 'bash scripts/offline_gpu/stash.sh back' first" >&2; exit 1
    fi
    list=$(mktemp)
    # NUL-separated from git to tar: any file name survives; only files present (tracked ones may be gone).
    git ls-files -co --exclude-standard -z results | awk -v RS='\0' -v ORS='\0' '
      $0 !~ /^results\/paper\// { print; next }                                   # another results root
      $0 ~ /\/(metrics\.csv|metrics\.csv\.gz|model\.pt)$/ || $0 ~ /^results\/paper\/([^\/]+\/)?(analysis|logs)\// { print }' |
      while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done >"$list"
    n=$(tr -cd '\0' <"$list" | wc -c)
    if [ "$n" -gt 0 ]; then
      mkdir -p "$STASH"
      tar -cf - --null -T "$list" | tar -C "$STASH" -xf -
      xargs -0 rm -f <"$list"
    fi
    echo "set aside $n files in $STASH/ (bash scripts/offline_gpu/stash.sh back restores them)"
    rm -f "$list"
    bytes=$(travelling_bytes)
    echo "copied to the GPU node: $((bytes / 1024 / 1024)) MiB of 64 (tree + .whl + .data + .ckpt)"
    if [ "$bytes" -gt "$LIMIT" ]; then echo "stash.sh: over the copy step's 64 MiB: copy less" >&2; exit 1; fi
    ;;
  back)
    [ -d "$STASH" ] || exit 0
    ${PYTHON:-.venv/bin/python} scripts/offline_gpu/curves.py back "$STASH"
    ;;
  *) echo "usage: scripts/offline_gpu/stash.sh out|back" >&2; exit 2 ;;
esac
