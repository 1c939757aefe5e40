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
        cause = self.CAUSES.get(self.errno)
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


def load_finished_run(run_dir):
    """kanx.load.load_run for the commands that read a finished run: every way a run folder
    can be unusable (nothing there, unfinished, weights absent, a file corrupt, truncated or
    not what kanx writes) is a ConfigError whose one line names the folder or the file."""
    from kanx.load import load_run

    try:
        return load_run(run_dir)
    except (OSError, ValueError) as e:  # load_run's own messages, naming the file
        raise ConfigError(str(e)) from None
    except (RuntimeError, KeyError, TypeError, AttributeError) as e:  # a model.pt or record of another shape (another network's weights)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ConfigError(f"{run_dir}: its record.json and model.pt do not load as a kanx run ({type(e).__name__}: {first}); "
                          "re-run the run with overwrite=true") from None
