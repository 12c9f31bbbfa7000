"""karu's statuses and exceptions.

Every failure raises a ``karu.Error`` carrying ``.status`` (a :class:`Status`). Where a builtin
exception means the same thing, the subclass derives from it too, so ``except
FileNotFoundError`` catches a missing object.
"""

from __future__ import annotations

import builtins
import enum
from typing import Dict, Optional, Type


class Status(enum.IntEnum):
    """The outcome codes of karu, equal to the C ABI's ``karu_status`` values."""

    OK = 0
    END = 1
    TIMEOUT = 2
    URI = -1
    UNSUPPORTED = -2
    INVALID = -3
    NO_MEM = -4
    IO = -5
    NETWORK = -6
    HTTP = -7
    RANGE = -8
    AUTH = -9
    CANCELLED = -10
    CONFIG = -11
    CREDENTIALS = -12
    NOT_FOUND = -13
    PRECONDITION = -14


class Error(Exception):
    """A karu failure: ``status`` says which, ``message`` says what (the object, redacted)."""

    status: Status
    message: str

    def __init__(self, message: str, status: int = Status.IO) -> None:
        # One argument for the base classes: OSError subclasses then keep the message as
        # their text instead of reading it as an errno.
        super().__init__(message)
        self.message = message
        self.status = Status(status)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.message, int(self.status)))


class NotFoundError(Error, FileNotFoundError):
    """The object does not exist (``Status.NOT_FOUND``)."""


class AuthError(Error, PermissionError):
    """The server refused the credentials (``Status.AUTH``, HTTP 401 or 403)."""


class CredentialsError(Error, PermissionError):
    """Credentials could not be obtained (``Status.CREDENTIALS``)."""


class TimeoutError(Error, builtins.TimeoutError):
    """A read or a wait ran out of time (``Status.TIMEOUT``)."""


class InvalidError(Error, ValueError):
    """A bad argument (``Status.INVALID``)."""


class MalformedUriError(Error, ValueError):
    """The URI or ``/vsi*/`` path could not be parsed (``Status.URI``)."""


class ConfigError(Error, ValueError):
    """An invalid option value (``Status.CONFIG``)."""


class FileMissingError(Error, FileNotFoundError):
    """A local file that does not exist (``Status.IO``, the status of every local file error)."""


class FilePermissionError(Error, PermissionError):
    """A local file this process may not read (``Status.IO``)."""


_CLASSES: Dict[int, Type[Error]] = {
    Status.NOT_FOUND: NotFoundError,
    Status.AUTH: AuthError,
    Status.CREDENTIALS: CredentialsError,
    Status.TIMEOUT: TimeoutError,
    Status.INVALID: InvalidError,
    Status.URI: MalformedUriError,
    Status.CONFIG: ConfigError,
}


_OS_CLASSES: Dict[str, Type[Error]] = {
    "not_found": FileMissingError,
    "permission": FilePermissionError,
}


def _from_status(code: int, message: str, os: Optional[str] = None) -> Error:
    """The exception of a karu status (called by the native module); ``os`` names the
    operating system's reason behind a local file's I/O error."""
    if code == Status.IO and os in _OS_CLASSES:
        return _OS_CLASSES[os](message, code)
    return _CLASSES.get(code, Error)(message, code)
