"""Every exception and warning arrayds raises of its own, in one module.

Each layer raises these and imports them from here, so an error's home does not depend
on which layer first needed it (the engine's :class:`CorruptionError` is created by the
C++ module and only re-exported here).

>>> from arrayds import errors
>>> issubclass(errors.CorruptionError, OSError), issubclass(errors.CommitLockError, OSError)
(True, True)
>>> issubclass(errors.PreconditionFailedError, errors.CommitConflictError)
False
"""

from __future__ import annotations

from . import _native

__all__ = [
    "BlindCommitWarning",
    "CommitConflictError",
    "CommitLockError",
    "CorruptionError",
    "PreconditionFailedError",
]

CorruptionError = _native.CorruptionError
"""Raised for a damaged or forged file (a subclass of ``OSError``); the message names
the file and the byte position. The engine creates it, so it is the class C++ raises."""


class CommitConflictError(RuntimeError):
    """Another writer committed to the same node after this write started; nothing
    of this write became visible (its shards are orphans)."""


class PreconditionFailedError(OSError):
    """A conditional write of the storage layer was refused: the object is no longer
    the version the caller read (:meth:`arrayds.abc.store.Store.put_if_match`). The
    storage layer knows nothing of commits; :mod:`arrayds.nodes.commit` turns this into
    :class:`CommitConflictError`."""


class CommitLockError(OSError):
    """A local commit could not lock its node folder (another commit holds the lock
    file for too long, or the lock file cannot be created). Nothing of the write is
    visible; retry, or remove the lock file the message names if no write runs."""


class BlindCommitWarning(UserWarning):
    """A commit that is not a compare-and-swap: the manifest is replaced atomically,
    but a concurrent writer's commit to the same node can be lost (the last one
    wins). Issued once per process and reason: for fsspec file systems without
    conditional writes (not local, ``memory://``, S3 or GCS), and everywhere when
    ``ARRAYDS_CONDITIONAL_COMMIT=0``."""
