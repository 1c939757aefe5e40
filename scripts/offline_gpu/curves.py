"""The offline GPU job's training curves put back together with the rows here (docs/OFFLINE_GPU.md).

    python scripts/offline_gpu/curves.py splice LATER_ROOT [ROOT]   # unpack.sh: the job's rows after the rows here
    python scripts/offline_gpu/curves.py back STASH                 # stash.sh back: every set-aside file returns

The job resumes runs in a copied tree that leaves their curves behind (stash.sh out), so a curve
it returns starts where it resumed the run: ``splice`` puts those rows after the earlier ones
here. ``back`` returns what stash.sh set aside, splicing a set-aside curve onto the one a run
wrote again meanwhile (``put_back``). Only this job rewrites a curve after training: a finished
run's done marker that vouched for a curve it was made from vouches for the result
(kanx.history.vouch_for_rewritten_curve), so the curve does not read as damaged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kanx.cli import ArgumentParser, prog
from kanx.curves import read_rows, write_rows
from kanx.hashing import sha256_of
from kanx.history import vouch_for_rewritten_curve
from kanx.records import curve_path
from kanx.vocab import CURVES


def _put(run_dir: Path, name: str, rows: list[dict]) -> None:
    """Make ``rows`` the run's curve, as ``name`` (metrics.csv or metrics.csv.gz): written first,
    then the other form removed, so the run never holds neither."""
    write_rows(Path(run_dir) / name, rows)
    for other in CURVES:
        if other != name:
            (Path(run_dir) / other).unlink(missing_ok=True)


def splice(earlier: Path, later: Path) -> int:
    """Extend the curve at ``earlier`` by the curve at ``later`` of the same run, written by a
    process that resumed it without ``earlier`` at hand (a time-boxed run on an offline GPU node,
    whose copied tree leaves the curves behind): ``earlier``'s rows before ``later``'s first epoch,
    then all of ``later``'s, as a resume with both present would have written them. Where
    ``earlier`` already reaches ``later``'s last epoch (the run went further here meanwhile, or
    finished), it is left as it is. A finished run's done marker that vouched for either curve
    vouches for the spliced one. Returns the number of rows written (0: left as it is).

    Either may be plain or gzipped (metrics.csv.gz: the run finished there). The spliced curve
    takes ``later``'s form, the newer state of the run, in ``earlier``'s folder, and the other form
    there goes (a checkpointed run's metrics.csv here, finished there: metrics.csv.gz)."""
    earlier, later = Path(earlier), Path(later)
    spliced = _joined(read_rows(earlier), read_rows(later))
    if spliced is None:
        return 0
    was = {sha256_of(p) for p in (earlier, later) if p.is_file()}
    _put(earlier.parent, later.name, spliced)
    # A run the window finished was sealed with the curve of its last stretch only: the whole
    # curve replaces it on purpose, so its done marker must vouch for it, or the curve reads as damaged.
    vouch_for_rewritten_curve(earlier.parent, was)
    return len(spliced)


def _joined(have: list[dict], rows: list[dict]) -> list[dict] | None:
    """A run's earlier rows (``have``) followed by the rows a later stretch wrote (``rows``); None
    where the later rows add nothing (there are none, or ``have`` already goes as far)."""
    if not rows or (have and have[-1]["epoch"] >= rows[-1]["epoch"]):
        return None
    return [r for r in have if r["epoch"] < rows[0]["epoch"]] + rows


def put_back(stashed: Path, run_dir: Path) -> bool:
    """stash.sh back: a curve set aside (``stashed``, plain or .gz) returns to its run
    folder. Where the run has a curve again (it resumed meanwhile without the set-aside rows),
    the two are spliced (``splice``: the set-aside rows, then those written since; where the
    set-aside curve goes as far, it is the whole curve) and the run's done marker vouches for
    the result where it vouched for either. Returns whether it spliced."""
    stashed, run_dir = Path(stashed), Path(run_dir)
    here = curve_path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if here is None:
        os.replace(stashed, run_dir / stashed.name)
        return False
    was = {sha256_of(stashed), sha256_of(here)}
    spliced = _joined(read_rows(stashed), read_rows(here))
    if spliced is not None:
        _put(run_dir, here.name, spliced)
        stashed.unlink()
    else:
        os.replace(stashed, run_dir / stashed.name)
        for other in CURVES:
            if other != stashed.name:
                (run_dir / other).unlink(missing_ok=True)
    vouch_for_rewritten_curve(run_dir, was)  # a run that finished meanwhile sealed the rows written since only
    return True


def splice_tree(later_root: Path, root: Path) -> int:
    """Splice every curve under ``later_root`` (metrics.csv or metrics.csv.gz) onto the curve of
    the same run folder under ``root``; see ``splice``."""
    n = kept = 0
    folders = sorted({p.parent for name in CURVES for p in later_root.rglob(name) if p.is_file()})
    for folder in folders:
        later = curve_path(folder)
        target_dir = root / folder.relative_to(later_root)
        target_dir.mkdir(parents=True, exist_ok=True)
        if splice(curve_path(target_dir) or target_dir / later.name, later):
            n += 1
        else:
            kept += 1
    print(f"spliced {n} training curves from {later_root} into {root}; {kept} here already went as far, kept")
    return 0


def stash_back(stash: Path) -> int:
    """Every file under ``stash`` back to the same path here (stash.sh back); a curve is put back
    (``put_back``), any other file that the tree has again stays in ``stash``, named, exit 1:
    nothing set aside is deleted."""
    restored, spliced, clashes = 0, 0, []
    for src in sorted(p for p in stash.rglob("*") if p.is_file()):
        dst = src.relative_to(stash)
        # plain or .gz; spliced where the run wrote a curve again meanwhile (resumed here without it)
        if src.name in CURVES:
            if put_back(src, dst.parent):
                spliced += 1
            else:
                restored += 1
        elif not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            restored += 1
        else:
            clashes.append(dst)
    for folder in sorted((p for p in stash.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    if not any(stash.iterdir()):
        stash.rmdir()
    print(f"restored {restored} files from {stash}/, spliced {spliced} training curves written since")
    if clashes:
        print(f"stash.sh: {len(clashes)} set-aside files left in {stash}/: "
              f"the tree has a file of that name again, e.g. {clashes[0]}",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    p = ArgumentParser(prog=prog("scripts/offline_gpu/curves.py"), description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    s = commands.add_parser("splice",
                            help="splice every curve under LATER_ROOT onto the "
                                 "same run's curve under ROOT (default: .)")
    s.add_argument("later_root", type=Path)
    s.add_argument("root", type=Path, nargs="?", default=Path("."))
    b = commands.add_parser("back", help="return every file set aside under STASH (run from the checkout's root)")
    b.add_argument("stash", type=Path)
    a = p.parse_args(argv)
    if a.command == "splice":
        if not a.later_root.is_dir():
            p.error(f"later_root {a.later_root} is not a folder")
        return splice_tree(a.later_root, a.root)
    if not a.stash.is_dir():
        p.error(f"stash {a.stash} is not a folder")
    return stash_back(a.stash)


if __name__ == "__main__":
    raise SystemExit(main())
