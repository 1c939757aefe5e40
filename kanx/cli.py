"""What kanx's command lines share: the name a usage line gives the command, and output
that a reader closing the pipe early does not turn into a traceback. Import-free (argparse
users only): every CLI, torch-free ones included, reads it."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path


def prog(module: str) -> str:
    """The command as it was typed, for argparse's usage line: a console script by its name
    (`kanx-status`), anything else (`python -m kanx.status`, a test calling main()) as
    `python -m MODULE`, which is what runs there too."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    name = name.removesuffix(".exe")  # console scripts on Windows
    return name if name.startswith("kanx-") else f"python -m {module}"


def pipe_safe(main: Callable[..., int]) -> Callable[..., int]:
    """``main`` with a closed stdout treated as the reader's choice, not an error:
    `kanx-status --json | head -1` prints its line and exits 0, without a BrokenPipeError
    traceback. stdout is pointed at /dev/null so that the flush at exit has nowhere to fail."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0

    return wrapper
