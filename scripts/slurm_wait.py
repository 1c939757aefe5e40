"""Wait until the SLURM tasks of kanx runs below results roots have left the queue, then say
which submitted runs have no record (for sweeps submitted with hydra.launcher.wait=false).

    python scripts/slurm_wait.py outputs/paper [more roots] [--poll 30] [--timeout SECONDS]

The SLURM launcher writes the array task that trains a run into `<run dir>/.slurm_job`. This
waits while any such run without a record still has its task queued or running (a requeued
task counts as queued), then prints the counts and exits 0 if every submitted run has a
record, 1 if some do not (re-run their sweep command: runs with records are skipped), or 2
on a timeout. Then: python -m kanx.analyze ROOT.
"""

import argparse
import sys
import time
from pathlib import Path

from hydra_plugins.kanx_launcher.slurm_launcher import JOB_MARKER, queued_ids
from kanx.records import read_state


def submitted_runs(roots: list[Path]) -> dict[Path, str]:
    """{run dir: SLURM task id} for every run the SLURM launcher submitted below ``roots``."""
    return {m.parent: m.read_text().strip() for root in roots for m in sorted(root.rglob(JOB_MARKER))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("roots", nargs="+", type=Path, metavar="RESULTS_ROOT")
    p.add_argument("--poll", type=float, default=30.0, help="seconds between squeue calls (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (default: never)")
    a = p.parse_args(argv)
    start, note = time.monotonic(), ""
    while True:
        runs = submitted_runs(a.roots)
        todo = {d: t for d, t in runs.items() if read_state(d).status not in ("done", "failed")}
        queued = queued_ids()
        if queued is None:
            print("slurm_wait: squeue failed; is this a SLURM login node?", file=sys.stderr)
            return 2
        waiting = {d: t for d, t in todo.items() if t in queued}
        if not waiting:
            break
        tasks = sorted(set(waiting.values()))
        line = (f"waiting for {len(waiting)} run(s) in {len(tasks)} SLURM task(s): "
                f"{' '.join(tasks[:6])}{' ...' if len(tasks) > 6 else ''}")
        if line != note:
            print(line, flush=True)
            note = line
        if a.timeout is not None and time.monotonic() - start > a.timeout:
            print(f"slurm_wait: still queued after {a.timeout:.0f} s", file=sys.stderr)
            return 2
        time.sleep(a.poll)
    # read again: tasks just ended
    missing = {d: t for d, t in runs.items() if read_state(d).status not in ("done", "failed")}
    print(f"{len(runs) - len(missing)} of {len(runs)} runs submitted "
          f"through SLURM below {' '.join(map(str, a.roots))} have records")
    for d, t in sorted(missing.items())[:20]:
        print(f"  no record: {d} (SLURM task {t}; its log is under .submitit/{t}/ in the sweep folder)")
    if missing:
        print("Re-run the sweep command(s) to train only these runs.")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
