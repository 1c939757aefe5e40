"""Errors that kanx raises for bad input, before any compute is spent, and the one-line
report with which every command line stops on them."""

import sys


class ConfigError(ValueError):
    """A config value, file or dataset option that kanx cannot use.

    The message is one line that names the bad value and what is allowed.
    """


class DataError(ConfigError):
    """A data file that is missing, malformed or fails its checks."""


def fail(error: Exception | str, code: int = 2) -> None:
    """Stop with one line on stderr: exit 2 for bad input (nothing trained), 1 for runs that
    failed (their records say why)."""
    print(f"kanx: error: {error}", file=sys.stderr)
    sys.exit(code)
