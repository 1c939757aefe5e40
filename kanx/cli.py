"""What kanx's command lines share: the name a usage line and an error line give the command,
argparse's errors in one line, and output that a reader closing the pipe early does not turn
into a traceback. Stdlib only (argparse users, torch-free ones included, read it)."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def _script() -> str | None:
    """`python PATH` where this process runs a script (a study's, scripts/studies/distractors.py),
    as typed; None for a module run with -m, a console script, or Python run otherwise."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if not sys.argv or not sys.argv[0].endswith(".py") or getattr(main, "__spec__", None) is not None or not file:
        return None
    return f"python {sys.argv[0]}" if Path(file).resolve() == Path(sys.argv[0]).resolve() else None


def prog(module: str | None = None) -> str:
    """The command as it was typed, for argparse's usage line and every error line: a console
    script by its name (`kanx-status`), a script as `python scripts/studies/distractors.py`, anything else
    as `python -m MODULE`, which is what runs there too (a test calling main() gets that).
    Without ``module`` (a launcher or the runner, deep below a command), the module this process
    runs with -m, else plain `kanx` (kanx used as a library)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    name = name.removesuffix(".exe")  # console scripts on Windows
    if name.startswith("kanx-"):
        return name
    script = _script()
    if script:
        return script
    if module is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        running = spec.name.removesuffix(".__main__") if spec is not None else ""
        return f"python -m {running}" if running.startswith("kanx.") else "kanx"
    return f"python {module}" if module.endswith(".py") else f"python -m {module}"


def one_line(text: object) -> str:
    """``text`` on one line: its lines joined by a space (a message that spans lines, torch's own)."""
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def version_line() -> str:
    """What `--version` prints on every kanx command: `kanx 0.1.devN+g<commit>` (kanx.__version__)."""
    from kanx import __version__

    return f"kanx {__version__}"


def _stdout_gone() -> None:
    """The reader closed stdout: point it at /dev/null so that the flush at exit has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, as kanx's own: `PROG: error: MESSAGE` and
    exit 2, without the usage block above it (`--help` prints that); with `--version`; and whose
    `--help` and `--version` into a pipe closed early (`kanx-analyze --help | head -1`) exit 0
    without a BrokenPipeError traceback."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=version_line(),
                          help="print kanx's version and exit")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")

    def _print_message(self, message: str, file=None) -> None:
        # Every argparse path to stdout (help, usage, version) goes through here; argparse exits
        # right after, where the flush of a closed pipe would print its own traceback.
        try:
            super()._print_message(message, file)
            if file is None or file is sys.stdout:
                sys.stdout.flush()
        except BrokenPipeError:
            _stdout_gone()


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low``, else an error that says so."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= {low}")
        return value

    return whole


def pipe_safe(main: Callable[..., int]) -> Callable[..., int]:
    """``main`` with a closed stdout treated as the reader's choice, not an error:
    `kanx-status --json | head -1` prints its line and exits 0, without a BrokenPipeError
    traceback. stdout is pointed at /dev/null so that the flush at exit has nowhere to fail;
    a main that ends in sys.exit (Hydra's --help) gets its output flushed first too."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            try:
                code = main(*args, **kwargs)
            except SystemExit:
                sys.stdout.flush()
                raise
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            _stdout_gone()
            return 0

    return wrapper
