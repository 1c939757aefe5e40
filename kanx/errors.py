"""Errors that kanx raises for bad input, before any compute is spent."""


class ConfigError(ValueError):
    """A config value, file or dataset option that kanx cannot use.

    The message is one line that names the bad value and what is allowed.
    """


class DataError(ConfigError):
    """A data file that is missing, malformed or fails its checks."""
