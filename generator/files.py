"""Writing files so that a reader never sees half of one: temp file beside it, then rename."""

from __future__ import annotations

import io
import os
import pickle
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; a failure leaves the old file and no temp file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_cache(path: Path, data: bytes) -> None:
    """`write_atomic` for caches: a cache that cannot be written only costs time later."""
    try:
        write_atomic(path, data)
    except OSError:
        pass


def read_cache(path: Path, kind: type) -> object | None:
    """The pickle a build stored at `path` with `write_cache`, when it is a `kind`; None when
    it is missing, unreadable, of another kind or made by other code: a cache that cannot be
    read only costs time. A file read is marked used (its time set to now), so that pruning
    the cache (`cache.prune`) keeps it."""
    try:
        value = pickle.loads(path.read_bytes())
    except (OSError, pickle.PickleError, ValueError, EOFError, TypeError, AttributeError, ImportError, IndexError):
        return None
    if not isinstance(value, kind):
        return None
    mark_used(path)
    return value


def mark_used(path: Path) -> None:
    """Set `path`'s time to now, which says to `cache.prune` that a build still uses it."""
    try:
        os.utime(path)
    except OSError:
        pass


def state_bytes(value: object) -> bytes:
    """`value` pickled for `write_cache` without the pickler's memo, which costs half the time
    of pickling the states a build keeps (bench/README.md): tens of thousands of strings and records, none held twice, no cycles. Only for values like these: without
    the memo, an object held twice comes back as two copies, and a cycle never ends."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    # Documented as deprecated since Python 2, and in every release since.
    pickler.fast = True
    pickler.dump(value)
    return buffer.getvalue()
