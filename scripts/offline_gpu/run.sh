#!/usr/bin/env bash
# A time-boxed job on an offline GPU node, as one command: within a wall-clock budget (the job's
# time window, hence the KANX_WINDOW_* settings) the CUDA tests, the full-scale reproduction of the
# paper's families (KANX_WINDOW_PHASES: Nguyen seeds 3 to 9 by default) until the
# time runs out, then `make bench-paper` if time is left; then the finished
# records (JSON, no weights) and the checkpoints of unfinished runs are packed into $OUT for
# `scripts/offline_gpu/unpack.sh` on the machine the results are committed from.
#
#   bash scripts/offline_gpu/run.sh [SECONDS]        # SECONDS: the whole budget (default 540)
#
# Prepare here first (docs/OFFLINE_GPU.md): `bash scripts/offline_gpu/prepare.sh` puts the wheels
# kanx needs and the node's image lacks into .whl/ and the real data into .data/; copy the tree with
# .whl/, .data/ and .ckpt/ to the node, then run there
#   bash scripts/offline_gpu/run.sh 540
# A dry run on a CPU at toy scale (what CI-less checking of this script looks like):
#   PYTHON=.venv/bin/python KANX_WINDOW_WHEELS=0 KANX_WINDOW_DEVICE=cpu KANX_WINDOW_SCALE=smoke \
#     KANX_WINDOW_RESULTS=/tmp/window/results OUT=/tmp/window/out bash scripts/offline_gpu/run.sh 600
#
# Environment (all optional):
#   KANX_WINDOW_DEVICE    cuda (default) | cpu
#   KANX_WINDOW_SCALE     full (default) | smoke
#   KANX_WINDOW_PHASES    what to reproduce, in order, as space-separated DATASETS@SEEDS phases (both
#                         comma-separated); finished runs are skipped, so a phase already done costs
#                         only its composition. Default: what the paper still needs from a GPU,
#                         Nguyen seeds 3 to 9 (seeds 0 to 2 and the Concrete rerun are committed):
#                         "nguyen_f1,...,nguyen_f10@3,...,9". A phase study:NAME (inputs, nodes or
#                         distractors) trains that study beyond the paper (docs/STUDIES.md) into
#                         KANX_WINDOW_STUDIES/<its folder>, e.g. "ikeda@4,5 study:inputs study:nodes"
#   KANX_WINDOW_DATASETS  with KANX_WINDOW_SEEDS, the older form: the same datasets in every phase, one
#   KANX_WINDOW_SEEDS     phase per space-separated seed list (e.g. "0,1,2 3,4,5,6,7,8,9"); ignored
#                         when KANX_WINDOW_PHASES is set
#   KANX_WINDOW_RESULTS   results root (default results/paper)
#   KANX_WINDOW_STUDIES   the studies' root (default: studies beside the results root, results/studies)
#   KANX_WINDOW_JOBS      training processes sharing the device (default 5)
#   KANX_WINDOW_PACK_SIZE most runs per pack (default 160: five packs of 160 kept an H100 as busy as
#                         two of 624 and 156 did, and every pack advances; docs/journal/benchmark-runs.md)
#   KANX_WINDOW_BENCH_MIN bench-paper runs only if this many seconds are left (default 120)
#   KANX_WINDOW_RESERVE   seconds kept for stopping and packing (default 45)
#   KANX_WINDOW_GRAPH     auto (default: on if the CUDA tests pass) | true | false
#   KANX_WINDOW_TESTS     1 (default): run tests/test_cuda.py first | 0: skip them
#   KANX_WINDOW_BENCH     1 (default): after the tests, measure before training: the draws (bench_draws.py),
#                         `make bench` at M = 1, 70, 160, 624 against pykan (needs its wheels in .whl/) and
#                         the whole-paper estimate (bench_paper.py) | 0: skip (bench-paper still runs at the
#                         end if time is left) | a comma-separated subset of draws,bench,paper
#   KANX_WINDOW_WHEELS    1 (default): install .whl/ (Python 3.12 wheels) | 0: use the environment as it is
#   KANX_WINDOW_KEEP      where each run keeps a copy of what it packed, for a later run on the same
#                         node (default .window, git-ignored)
#   PYTHON                the interpreter (default python3)
set -uo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
BUDGET=${1:-540}
DEVICE=${KANX_WINDOW_DEVICE:-cuda}
SCALE=${KANX_WINDOW_SCALE:-full}
RESULTS=${KANX_WINDOW_RESULTS:-results/paper}
STUDIES=${KANX_WINDOW_STUDIES:-$(dirname "$RESULTS")/studies}  # results/studies beside results/paper
ROOTS=("$RESULTS" "$STUDIES")  # what this job reads, restores and packs
JOBS=${KANX_WINDOW_JOBS:-5}
PACK=${KANX_WINDOW_PACK_SIZE:-160}
NGUYEN=$(a=(nguyen_f{1..10}); IFS=,; echo "${a[*]}")  # kanx.vocab.NGUYEN_PROBLEMS (not imported: this line runs before the wheels are in)
if [ -n "${KANX_WINDOW_PHASES:-}" ]; then PHASES=$KANX_WINDOW_PHASES
elif [ -n "${KANX_WINDOW_DATASETS:-}${KANX_WINDOW_SEEDS:-}" ]; then
  DS=$(echo ${KANX_WINDOW_DATASETS:-${NGUYEN//,/ }} | tr ' ' ,)
  PHASES=$(for s in ${KANX_WINDOW_SEEDS:-0,1,2 3,4,5,6,7,8,9}; do printf '%s@%s ' "$DS" "$s"; done)
else PHASES="$NGUYEN@3,4,5,6,7,8,9"
fi
for phase in $PHASES; do  # bad input fails here, before any compute: DATASETS@SEEDS or study:NAME
  [[ $phase =~ ^[a-z0-9_,]+@[0-9,]+$ || $phase =~ ^study:(inputs|nodes|distractors)$ ]] \
    || { echo "run.sh: phase '$phase' is not DATASETS@SEEDS (e.g. concrete,ikeda@0,1,2) or study:NAME (inputs, nodes, distractors)" >&2; exit 2; }
done
BENCH_MIN=${KANX_WINDOW_BENCH_MIN:-120}
RESERVE=${KANX_WINDOW_RESERVE:-45}
OUT=${OUT:-$PWD/window-out}
KEEP=${KANX_WINDOW_KEEP:-.window}  # what a later run on this node restores (git-ignored)
mkdir -p "$OUT"
LOG="$OUT/window.log"
MARK=$(mktemp)  # files newer than this are this job's
export PYTHONUNBUFFERED=1
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
say() { echo "[window +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

# 1. Packages: the GPU image has torch, numpy, pandas, matplotlib, pytest; the rest comes as wheels.
if [ "${KANX_WINDOW_WHEELS:-1}" = 1 ] && compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 \
    || say "wheel install failed (see above)"
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KANX_DATA_DIR=${KANX_DATA_DIR:-$PWD/.data}
PY=${PYTHON:-python3}
say "budget ${BUDGET}s; device $DEVICE; scale $SCALE; $(nproc) CPUs; $($PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")' 2>&1)"
$PY -c "import kanx.plan, hydra, omegaconf" >>"$LOG" 2>&1 || { say "kanx or its dependencies do not import: see $LOG"; exit 2; }

# Records an earlier run on this same node finished: where the copy step syncs the working tree
# before every run, it removes files git does not ignore that the tree being copied lacks, records
# included, so each run keeps a copy of what it packed in $KEEP (.window/, git-ignored, so kept).
TAR_ROOT=.; [[ $RESULTS = /* ]] && TAR_ROOT=/  # tar stores an absolute RESULTS without its leading /
restore_kept() {  # restore_kept NAME TAR-OPTION: every earlier run's NAME archive, oldest first; false if none
  compgen -G "$KEEP/$1-*.tgz" >/dev/null || return 1
  for f in "$KEEP/$1"-*.tgz; do tar xzf "$f" -C "$TAR_ROOT" "$2" 2>>"$LOG"; done
}
restore_kept records --skip-old-files && say "restored $(find "${ROOTS[@]}" -name done 2>/dev/null | wc -l) finished runs (an earlier run's in $KEEP, and the tree's)"
restore_kept curves --overwrite  # an earlier run's curves extend the tree's: they win
# A run one job left checkpointed (metrics.csv) and a later one finished (metrics.csv.gz): the plain
# file is the older, shorter curve, and readers take a plain file first (kanx.records.curve_path).
find "${ROOTS[@]}" -name metrics.csv.gz -print0 2>/dev/null | while IFS= read -r -d '' gz; do
  [ -f "${gz%.gz}" ] && [ "${gz%.gz}" -ot "$gz" ] && rm -f "${gz%.gz}"; done || true

# Checkpoints of unfinished runs from an earlier job (scripts/offline_gpu/unpack.sh puts them in .ckpt/),
# stored relative to this checkout: only for a results root inside it (not a dry run's /tmp root).
if [ "$TAR_ROOT" = . ] && compgen -G ".ckpt/checkpoints.tgz*" >/dev/null; then
  # --keep-newer-files: on a node that keeps its files between runs, the last run's checkpoints are newer
  # than the carried ones and must not be rolled back.
  cat .ckpt/checkpoints.tgz* | tar xzf - --keep-newer-files 2>>"$LOG"
  say "restored $(find "${ROOTS[@]}" -name checkpoint.pt 2>/dev/null | wc -l) checkpoints from .ckpt/ (an earlier job's unfinished runs; newer ones kept)"
fi

# 2. The CUDA tests (skipped without CUDA); the graph path is used only if its tests pass.
GRAPH=${KANX_WINDOW_GRAPH:-auto}
if [ "${KANX_WINDOW_TESTS:-1}" = 1 ]; then
  timeout 150 $PY -m pytest -p no:cacheprovider tests/test_cuda.py -rs >"$OUT/cuda-tests.txt" 2>&1
  tests_rc=$?  # 0: every test ran and passed (pytest -q here prints no count line to grep)
  say "CUDA tests: exit $tests_rc, $(grep -E '[0-9]+ (passed|failed|skipped)' "$OUT/cuda-tests.txt" | tail -1)"
else
  tests_rc=skipped; say "CUDA tests skipped (KANX_WINDOW_TESTS=0)"
fi
if [ "$GRAPH" = auto ]; then
  if [ "$DEVICE" = cuda ] && [ "$tests_rc" = 0 ]; then GRAPH=true; else GRAPH=false; fi
fi
say "train.cuda_graph=$GRAPH"

# 2b. Measurements before training (KANX_WINDOW_BENCH=1): each bounded, each written to $OUT.
bench_paper() {  # bench_paper SECONDS: the whole-paper estimate (100 steps per pack make-up, the mixed plan) -> $OUT/bench-paper.txt
  local graph_flag=--no-cuda-graph; [ "$GRAPH" = true ] && graph_flag=--cuda-graph
  timeout "$1" $PY scripts/benchmarks/bench_paper.py --device "$DEVICE" --steps 100 --no-compile $graph_flag --group all --pack-size "$PACK" --no-per-sweep \
    "${BENCH_SETS[@]}" >"$OUT/bench-paper.txt" 2>&1
}
BENCH_SETS=(); [ "$SCALE" = full ] || BENCH_SETS=(--datasets nguyen_f1)  # full: bench_paper.py's default, the whole paper
PAPER_DONE=0
BENCH=${KANX_WINDOW_BENCH:-1}; [ "$BENCH" = 1 ] && BENCH=draws,bench,paper; [ "$BENCH" = 0 ] && BENCH=
wants() { [[ ",$BENCH," == *",$1,"* ]]; }
if wants draws; then
  timeout 60 $PY scripts/benchmarks/bench_draws.py --device "$DEVICE" --repeats 10 >"$OUT/bench-draws.txt" 2>&1
  say "bench-draws (exit $?): $(tail -1 "$OUT/bench-draws.txt")"
fi
if wants bench; then
  bench_graph=(); [ "$GRAPH" = true ] && bench_graph=(--cuda-graph)
  # --no-compile: torch.compile's warm-up took 88 s for one cell on an H100 (2026-11-27), the job's training runs without it
  timeout 170 $PY scripts/benchmarks/bench.py --device "$DEVICE" --quick --no-compile --no-eager-row --threads "$(nproc)" --pack-sizes 1 70 160 624 "${bench_graph[@]}" >"$OUT/bench.txt" 2>&1
  say "bench (exit $?): $(grep -E '^\| kanx' "$OUT/bench.txt" | tr '\n' ' ')"
fi
if wants paper; then
  bench_paper 200
  rc=$?; [ "$rc" = 0 ] && PAPER_DONE=1
  say "bench-paper (exit $rc): $(tail -1 "$OUT/bench-paper.txt")"
fi

# 3. The reproduction, phase by phase (DATASETS@SEEDS, in the order given: what a table needs
#    first goes first). A phase is stopped (SIGTERM: every worker checkpoints its pack) when only
#    the packing reserve is left. If a phase fails on the graph path, it is run again eagerly.
TRAINING=("device=$DEVICE" train.compile=false train.checkpoint_every=250)  # every phase's overrides
REPRO=(--results "$RESULTS" --group all --pack-size "$PACK" --jobs "$JOBS" --no-analysis "${TRAINING[@]}")
[ "$SCALE" = smoke ] && REPRO+=(--scale smoke)
phase_command() {  # phase_command PHASE GRAPH: the command line of a phase, in CMD
  local graph="train.cuda_graph=$2"
  case $1 in
    study:inputs|study:nodes)
      local name=${1#study:}; local dir=input-gates; [ "$name" = nodes ] && dir=node-gates
      CMD=(scripts/studies/factor_study.py run "$name" --root "$STUDIES/$dir" --no-table --group all --pack-size "$PACK" --jobs "$JOBS"
           ${SMOKE:+--scale smoke} "${TRAINING[@]}" "$graph");;
    study:distractors)
      CMD=(scripts/studies/distractors.py run --root "$STUDIES/distractors" --no-table ${SMOKE:+--quick} "${TRAINING[@]}" "$graph");;
    *) local datasets=${1%@*}; CMD=(-m kanx.reproduce --datasets ${datasets//,/ } "${REPRO[@]}" "$graph" "seed=${1#*@}");;
  esac
}
SMOKE=; [ "$SCALE" = smoke ] && SMOKE=1
for phase in $PHASES; do
  phase_command "$phase" "$GRAPH"
  T=$(( $(left) - RESERVE ))
  [ "$T" -gt 30 ] || { say "no time left for $phase"; break; }
  say "$phase for at most ${T}s: ${CMD[*]}"
  P0=$(date +%s)
  timeout --signal=TERM --kill-after=30 "$T" $PY "${CMD[@]}" >>"$OUT/reproduce.txt" 2>&1
  rc=$?
  say "$phase: exit $rc after $(( $(date +%s) - P0 ))s; $(find "${ROOTS[@]}" -newer "$MARK" -name done 2>/dev/null | wc -l) runs finished in this job so far"
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$GRAPH" = true ]; then
    GRAPH=false; T=$(( $(left) - RESERVE ))
    phase_command "$phase" false
    say "$phase failed with the graph path: again eagerly for at most ${T}s"
    [ "$T" -gt 30 ] && timeout --signal=TERM --kill-after=30 "$T" $PY "${CMD[@]}" >>"$OUT/reproduce.txt" 2>&1
    say "$phase eagerly: exit $?"
  fi
done
# No stragglers to stop: timeout signals its whole process group, the training workers
# (python -m kanx.plan) included, and KILLs it 30 s later.

# 4. The whole-paper estimate on this device (100 steps per pack make-up), if time is left.
T=$(( $(left) - 45 ))
if [ "$PAPER_DONE" = 1 ]; then :
elif [ "$T" -ge "$BENCH_MIN" ]; then
  bench_paper "$T"
  say "bench-paper (exit $?): $(tail -1 "$OUT/bench-paper.txt")"
else
  say "bench-paper skipped: ${T}s left, it needs ${BENCH_MIN}s"
fi

# 5. Pack what this job wrote: records first, then checkpoints, then the training curves
#    (metrics.csv, or metrics.csv.gz for a run finished here: a resumed run keeps the rows it had, so
#    the newest file is the whole curve of this job)
#    while they fit what the copy step brings back (8 files, 64 MiB).
pack() {  # pack NAME COUNTED FIND-TESTS...: this job's files that match -> $OUT/NAME.tgz; prints how many are named COUNTED
  local list; list=$(mktemp)
  find "${ROOTS[@]}" -newer "$MARK" -type f \( "${@:3}" \) -print0 2>/dev/null >"$list"
  tar czf "$OUT/$1.tgz" --null -T "$list"
  grep -zcE "/($2)\$" "$list"; rm -f "$list"
}
n_rec=$(pack records record.json -name record.json -o -name done -o -name model.pt -o -path "*/logs/*")
n_ckpt=$(pack checkpoints checkpoint.pt -name checkpoint.pt)
n_curves=$(pack curves 'metrics\.csv(\.gz)?' -name metrics.csv -o -name metrics.csv.gz)
room=$(( 60 * 1024 * 1024 - $(stat -c %s "$OUT/records.tgz") ))  # the copy back takes 64 MiB: the log and bench beside
if [ "$(stat -c %s "$OUT/checkpoints.tgz")" -gt "$room" ]; then
  say "checkpoints.tgz is over the $(( room / 1024 / 1024 )) MiB left: left out ($n_ckpt unfinished runs start over)"; rm "$OUT/checkpoints.tgz"
else room=$(( room - $(stat -c %s "$OUT/checkpoints.tgz") )); fi
if [ "$(stat -c %s "$OUT/curves.tgz")" -gt "$room" ]; then
  say "curves.tgz is over the $(( room / 1024 / 1024 )) MiB left: left out (these runs' curves miss this job's rows)"; rm "$OUT/curves.tgz"
fi
mkdir -p "$KEEP"
for name in records curves; do  # for a later run here (restore_kept)
  [ -f "$OUT/$name.tgz" ] && cp "$OUT/$name.tgz" "$KEEP/$name-$START.tgz"
done
for f in records.tgz checkpoints.tgz curves.tgz; do
  [ -f "$OUT/$f" ] && [ "$(stat -c %s "$OUT/$f")" -gt $(( 15 * 1024 * 1024 )) ] && split -b 15m -d "$OUT/$f" "$OUT/$f.part" && rm "$OUT/$f"
done
cat "$OUT/cuda-tests.txt" "$OUT/bench-draws.txt" "$OUT/reproduce.txt" >>"$LOG" 2>/dev/null; rm -f "$OUT/cuda-tests.txt" "$OUT/bench-draws.txt" "$OUT/reproduce.txt"
say "packed $n_rec records, $n_ckpt checkpoints and $n_curves training curves into $OUT: $(ls "$OUT" | tr '\n' ' ')"
rm -f "$MARK"
