"""``python -m kanx.draw RUN_DIR`` and the ``kanx-draw`` console script."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from kanx.cli import ArgumentParser, prog
from kanx.diagram import FORMATS, save
from kanx.errors import ConfigError, report
from kanx.load import load_finished_run

from .runs import draw_run


def main(argv: Sequence[str] | None = None) -> int:
    p = ArgumentParser(prog=prog("kanx.draw"), description="Draw a trained gated KAN (the paper's Fig. 1 style).")
    p.add_argument("run_dir", help="a finished run's directory (record.json, done, model.pt)")
    p.add_argument("--out", help="output file stem (default: RUN_DIR/drawing)")
    p.add_argument("--formats", default=",".join(FORMATS),
                   help="comma-separated, from png,pdf,svg (default: all three)")
    p.add_argument("--show-closed", action="store_true", help="also draw closed and non-contributing edges, faintly")
    p.add_argument("--dpi", type=int, default=150, help="PNG resolution (default 150)")
    args = p.parse_args(argv)
    formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        p.error(f"--formats {args.formats!r}: choose from {','.join(FORMATS)}")
    try:
        run = load_finished_run(args.run_dir)
    except ConfigError as e:  # no run there, or a corrupt or truncated file: one line naming it
        return report("kanx.draw", e)
    fig, drawing = draw_run(run, show_closed=args.show_closed)
    for note in drawing.notes:
        print(f"{prog('kanx.draw')}: warning: {note}", file=sys.stderr)
    for path in save(fig, args.out or Path(args.run_dir) / "drawing", formats, args.dpi):
        print(path)
    return 0
