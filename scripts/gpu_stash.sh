#!/usr/bin/env bash
# Keep the working tree that travels to a GPU window under the device tool's 64 MiB (tracked and
# untracked-not-ignored files plus the carried .whl/, .data/, .ckpt/):
#   bash scripts/gpu_stash.sh out    # called by gpu_prepare.sh
#   bash scripts/gpu_stash.sh back   # called by gpu_unpack.sh; safe to run at any time
# `out` moves into .stash/ (git-ignored, so it stays here) every file under results/ that a window
# does not read: other results roots (calibration, earlier protocols), analyses and logs under
# results/paper, and every training curve (metrics.csv: ~22 KB a run at 10,000 epochs, 40 MB for Nguyen's
# seeds 3-9 alone). What stays: each run's record.json and done marker under results/paper, by which
# the window skips finished runs. A run the window resumes without its curve writes rows from its
# checkpoint on, and gpu_unpack.sh splices those onto the rows here (python -m kanx.curves splice).
# `back` restores the set-aside files, keeping any the window returned meanwhile (--skip-old-files).
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=.stash
LIMIT=$((64 * 1024 * 1024))

travelling_bytes() {  # what the device tool would send: tree files git does not ignore, plus the carry
  { git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
    find .whl .data .ckpt -type f -print0 2>/dev/null || true; } | du -cb --files0-from=- | tail -1 | cut -f1
}

case "${1:-}" in
  out)
    list=$(mktemp)
    git ls-files -co --exclude-standard results | awk '
      $0 !~ /^results\/paper\// { print; next }                                   # another results root
      $0 ~ /\/metrics\.csv$/ || $0 ~ /^results\/paper\/([^\/]+\/)?(analysis|logs)\// { print }' >"$list"
    if [ -s "$list" ]; then
      mkdir -p "$STASH"
      tar -cf - -T "$list" | tar -C "$STASH" -xf -
      tr '\n' '\0' <"$list" | xargs -0 rm -f
    fi
    echo "set aside $(wc -l <"$list") files in $STASH/ (bash scripts/gpu_stash.sh back restores them)"
    rm -f "$list"
    bytes=$(travelling_bytes)
    echo "travels to the window: $((bytes / 1024 / 1024)) MiB of 64 (tree + .whl + .data + .ckpt)"
    if [ "$bytes" -gt "$LIMIT" ]; then echo "gpu_stash.sh: over the device tool's 64 MiB: carry less" >&2; exit 1; fi
    ;;
  back)
    if [ -d "$STASH" ]; then
      n=$(find "$STASH" -type f | wc -l)
      tar -C "$STASH" -cf - . | tar -xf - --skip-old-files
      rm -rf "$STASH"
      echo "restored $n files from $STASH/"
    fi
    ;;
  *) echo "usage: scripts/gpu_stash.sh out|back" >&2; exit 2 ;;
esac
