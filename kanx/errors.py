"""Errors that kanx raises for bad input, before any compute is spent, and the one-line
report with which every command line stops on them."""

import errno
import sys


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

    CAUSES = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up", errno.EROFS: "the file system is read-only",
              errno.EACCES: "permission denied", errno.EPERM: "permission denied"}

    def __str__(self) -> str:
        cause = self.CAUSES.get(self.errno) if self.errno is not None else None
        return f"cannot write {self.filename}: " + (f"{cause} ({self.strerror})" if cause else str(self.strerror))


def fail(error: Exception | str, code: int = 2) -> None:
    """Stop with one line on stderr: exit 2 for bad input (nothing trained), 1 for runs that
    failed (their records say why)."""
    print(f"kanx: error: {error}", file=sys.stderr)
    sys.exit(code)


def report(prog: str, error: Exception | str) -> int:
    """fail() for a command whose main() returns its exit status (kanx.draw, kanx.formula):
    one line on stderr, and 2. A message that spans lines (torch's own) is joined into one."""
    print(f"{prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2

