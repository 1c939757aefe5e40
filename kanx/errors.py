"""Errors that kanx raises for bad input, before any compute is spent, and the one-line
report with which every command line stops on them: `COMMAND: error: MESSAGE`, the command as
typed (kanx.cli.prog), exit 2 for bad input and 1 for results that cannot be written."""

import errno
import sys
from typing import NoReturn

from kanx.cli import one_line, prog


class ConfigError(ValueError):
    """A config value, file or dataset option that kanx cannot use.

    The message is one line that names the bad value and what is allowed.
    """


class DataError(ConfigError):
    """A data file that is missing, malformed or fails its checks."""


class StorageError(OSError):
    """A results file that cannot be written (the disk is full, the file system read-only):
    training stops, since nothing after it could be written either. The message is one line
    that names the file and the cause."""

    CAUSES = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
              errno.EROFS: "the file system is read-only",
              errno.EACCES: "permission denied", errno.EPERM: "permission denied"}

    def __str__(self) -> str:
        cause = self.CAUSES.get(self.errno) if self.errno is not None else None
        return f"cannot write {self.filename}: " + (f"{cause} ({self.strerror})" if cause else str(self.strerror))


def error_line(error: Exception | str, module: str | None = None) -> str:
    """The one line a command stops with: `COMMAND: error: MESSAGE`, COMMAND as typed
    (kanx.cli.prog: of ``module``, else of the module this process runs)."""
    return f"{prog(module)}: error: {one_line(error)}"


def fail(error: Exception | str, code: int = 2, module: str | None = None) -> NoReturn:
    """Stop with one line on stderr (error_line): exit 2 for bad input (nothing trained), 1
    for runs that failed (their records say why) or results that cannot be written."""
    print(error_line(error, module), file=sys.stderr)
    sys.exit(code)


def report(module: str, error: Exception | str, code: int = 2) -> int:
    """fail() for a command whose main() returns its exit status (kanx.draw, kanx.formula,
    kanx.analyze, kanx.status): one line on stderr, and ``code``."""
    print(error_line(error, module), file=sys.stderr)
    return code
