"""Errors a user can act on. Each message names the problem and the fix."""


class WanjaxError(Exception):
    """Base of every error wanjax raises on purpose."""


class InvalidRequestError(WanjaxError, ValueError):
    """A generation request or config value is out of range or of the wrong kind."""


class ConfigError(WanjaxError, ValueError):
    """A preset or a `--set key=value` override is unknown or malformed."""


class CheckpointError(WanjaxError):
    """A checkpoint folder, shard or tensor is missing, corrupt or does not fit the model."""


class UnsupportedModelError(WanjaxError):
    """A checkpoint describes a model variant this version cannot run yet."""


class OutputError(WanjaxError):
    """The result cannot be written where it was asked to go."""


class NumericalError(WanjaxError):
    """A run produced NaN or infinite values; nothing was written."""


class StoreError(WanjaxError):
    """The server's job store (or its output folder) cannot be read or written; the message names
    the file and the remedy."""
