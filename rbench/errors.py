"""Errors rbench raises for bad input: each message names the value, what was expected and the fix."""


class RbenchError(Exception):
    """Base class for errors caused by the user's input or environment."""


class ConfigError(RbenchError, ValueError):
    """The experiment configuration is invalid."""


class DataError(RbenchError):
    """An input data file is missing, malformed or inconsistent."""


class ChecksumError(DataError):
    """A downloaded or mirrored file does not match its registered sha256."""


class MissingExtraError(RbenchError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the package '{package}', which is not installed. "
            f"Install it with: pip install 'rbench[{extra}]'"
        )
