"""Exceptions: one per class of the facade's errors (`ErrorClass`), under one base."""

from __future__ import annotations

from typing import Dict, Optional, Type


class EvicortexError(Exception):
    """Any EviCortex failure. `field` names the offending input where one is to blame
    (`turns[2].time`, `rrf_k`, `as_of`); `message` says what is wrong with it."""

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class BadInputError(EvicortexError):
    """The input is invalid or conflicts with what is stored; nothing changed."""


class NotFoundError(BadInputError):
    """The target (a record, a session) matches nothing in the namespace."""


class ConflictError(BadInputError):
    """The input conflicts with what is stored (a turn's position holds another text, or it
    was erased)."""


class StorageError(EvicortexError):
    """The file system or the storage engine failed (the facade's `Io` class; over HTTP 500,
    or 507 when the disk is full)."""


class IntegrityError(EvicortexError):
    """Stored data failed an integrity check (digest, chain, format, identity)."""


class ModelMissingError(EvicortexError):
    """A model the operation needs is not installed; the message names the
    `evicortex model fetch` command that installs it."""


class InternalError(EvicortexError):
    """Anything else: a bug."""


class AuthError(EvicortexError):
    """The server refused the key (401: missing or invalid; 403: not for this namespace)."""


class UnavailableError(EvicortexError):
    """The server cannot do this now (503: a model it needs is missing, the store is
    read-only, or writes are refused since a disk failure until the server is restarted;
    429 or 503 with Retry-After: its answer or compile queue is full or was too slow, and
    the message says when to retry)."""


class TransportError(EvicortexError):
    """The server could not be reached, or its answer was not the API's."""


_NATIVE_CLASSES: Dict[str, Type[EvicortexError]] = {
    "bad_input": BadInputError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "io": StorageError,
    "integrity": IntegrityError,
    "model_missing": ModelMissingError,
    "internal": InternalError,
}


def from_native(error: BaseException) -> EvicortexError:
    """The exception for a `NativeError(class, field, message)` of the native module."""
    kind, field, message = error.args
    return _NATIVE_CLASSES.get(str(kind), InternalError)(str(message), field)


def from_http(status: int, message: str, field: Optional[str]) -> EvicortexError:
    """The exception for an error response of `evicortex serve`."""
    if status in (401, 403):
        return AuthError(message, field)
    if status == 404:
        return NotFoundError(message, field)
    if status == 409:
        return ConflictError(message, field)
    if status == 429:
        return UnavailableError(message, field)
    if 400 <= status < 500:
        return BadInputError(message, field)
    if status == 503:
        return UnavailableError(message, field)
    if message.startswith("integrity failure"):
        return IntegrityError(message, field)
    return StorageError(message, field)
