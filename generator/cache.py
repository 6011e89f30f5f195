"""The cache layer: everything slow, kept under the cache folder by content, never by mtime.

Every entry lives under `<cache>/<name>/<version>`, where the version is a digest of the code
that makes it (`code_digest`), so editing one stage's code never invalidates another's. Two
shapes, one API each:

- `Store`: many small entries keyed by content (a blob sha, with what was asked of it), the
  rows of one SQLite file, `<cache>/<name>/<version>.sqlite`: `has`, `get`, `put`, `batch`.
  What each file alone gives (`SiteCache`), the sites of its calls to raisers by the raisers
  it sees (`CallCache`) and its highlighted excerpts (`highlight.ExcerptCache`) are stores.
- `kept`: one value a build keeps whole (`cached_values`, the states of `BlobState`, parsed
  content, browse pages, the content schema), read with `read_cache` and written with
  `write_cache`.

Entries are written atomically (a store's in a transaction, a kept value by renaming a
finished file); an unreadable entry counts as missing.

What a build reads or writes is marked used (its file's time set to now). After each build,
`prune` removes what no recent build used: the values of other code versions, of ledgers and
output folders left behind. Which entry is read never depends on those times: a pruned entry
is only missing, and is made again when next needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from generator.files import mark_used, read_cache, state_bytes, write_cache
from generator.model import Binding, ClassBases, ErrorEntry, ExtractedFile, Placeholder, Raiser, Site, Template, changed_errors


class Store:
    """Small entries keyed by content, JSON values, in one SQLite file per store and version:
    `root/<name>/<version>.sqlite`.

    A cold build puts some 12,000 entries (each file's sites and call-graph facts, each
    file's excerpts). As a JSON file each, every one cost a file creation, some 300 µs of the
    kernel's time on the machines measured; as rows, written a batch per transaction
    (`batch`), a twentieth of that (bench/README.md). Each process opens its own connection
    (a store is handed to workers, forked or spawned); several processes and builds may
    share a store, SQLite locking it for each write. Any error reading is a missing entry and
    any error writing is ignored, as for a cache file: a file that is not a database (cut
    short, overwritten) is replaced by an empty one."""

    def __init__(self, root: Path, name: str, version: str) -> None:
        self.path = root / name / f"{version}.sqlite"
        self._pending: list[tuple[str, str]] | None = None

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.path, self._pending = state["path"], None

    def _connection(self) -> sqlite3.Connection:
        return _connection(self.path)

    def has(self, key: str) -> bool:
        """Whether there is an entry for `key` (readable or not: see `get`)."""
        try:
            return self._connection().execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone() is not None
        except sqlite3.Error as error:
            _broken(self.path, error)
            return False

    def keys(self) -> set[str]:
        """Every key with an entry (readable or not)."""
        try:
            return {key for (key,) in self._connection().execute("SELECT key FROM entries")}
        except sqlite3.Error as error:
            _broken(self.path, error)
            return set()

    def get(self, key: str) -> object | None:
        """The entry's JSON value; None when there is none or it is unreadable."""
        try:
            row = self._connection().execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
            return None if row is None else json.loads(row[0])
        except sqlite3.Error as error:
            _broken(self.path, error)
            return None
        except (ValueError, TypeError):
            return None

    def put(self, key: str, value: object) -> None:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if self._pending is not None:
            self._pending.append((key, text))
        else:
            self._write([(key, text)])

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Puts made within are written together when it ends, in one transaction: a worker
        holds the store's lock only for that write, not while it makes the entries."""
        self._pending = []
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self._write(pending)

    def _write(self, rows: list[tuple[str, str]]) -> None:
        # Twice when the file turns out to be no database: the second time, on a new one.
        for _ in range(2):
            try:
                db = self._connection()
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)", rows)
                    db.execute("COMMIT")
                finally:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                return
            except sqlite3.Error as error:
                if not _broken(self.path, error):
                    return


# Each store's connection in this process, by path, with the process that opened it: a
# worker is handed a store with every batch, and opens it once.
_OPEN: dict[Path, tuple[int, sqlite3.Connection]] = {}
# Connections opened before this process was forked: never used here, not even closed
# (SQLite's rule), so kept from being freed.
_INHERITED: list[sqlite3.Connection] = []


def _connection(path: Path) -> sqlite3.Connection:
    opened = _OPEN.get(path)
    if opened is not None and opened[0] == os.getpid():
        return opened[1]
    _forget(path)
    db = _OPEN[path] = (os.getpid(), _open_store(path))
    return db[1]


def _forget(path: Path) -> None:
    """Drop this process's connection to the store at `path`: closed if this process opened
    it, kept unused if it came through a fork."""
    opened = _OPEN.pop(path, None)
    if opened is None:
        return
    if opened[0] == os.getpid():
        opened[1].close()
    else:
        _INHERITED.append(opened[1])


def _broken(path: Path, error: sqlite3.Error) -> bool:
    """Whether `error` says the store's file is no database (overwritten, cut short) rather
    than busy or unwritable: its connection is then forgotten, and the next one makes the
    file anew (`_open_store`)."""
    if isinstance(error, sqlite3.OperationalError) or not isinstance(error, sqlite3.DatabaseError):
        return False
    _forget(path)
    return True


def _open_store(path: Path) -> sqlite3.Connection:
    """A connection to the store at `path`, made (or made anew, when the file is not a
    database) with its table."""
    for attempt in range(2):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error):
            # A folder that cannot be written.
            break
        try:
            # A cache needs no durability through a crash of the system: a store it leaves
            # broken is made anew here. Written ahead, readers never wait for a writer.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
            db.execute("SELECT count(*) FROM entries WHERE key = ''").fetchone()
            mark_used(path)
            return db
        except sqlite3.DatabaseError as error:
            db.close()
            if attempt or isinstance(error, sqlite3.OperationalError):
                # Busy past the timeout, or read-only: left as it is, and not used this time.
                break
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                try:
                    leftover.unlink()
                except OSError:
                    pass
    # A store that holds nothing and keeps nothing.
    return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)


def kept(cache_dir: Path, name: str, code: Iterable[str], suffix: str = "") -> Path:
    """Where a value kept whole lives: `<cache>/<name>/<code_digest(code)><suffix>.pickle`."""
    return cache_dir / name / f"{code_digest(code)}{suffix}.pickle"


class SiteCache(Store):
    """What each blob alone gives (`model.ExtractedFile`: its sites, raisers and imports), or
    the reason it was skipped, under `root/sites/<version>.sqlite`."""

    def __init__(self, root: Path, version: str) -> None:
        super().__init__(root, "sites", version)

    def holds(self, blob_sha: str) -> bool:
        """Whether the cache has an entry for the blob (readable or not: see `load`)."""
        return self.has(blob_sha)

    def load(self, blob_sha: str, path: str) -> ExtractedFile | str | None:
        """What a blob placed at `path` gives, the reason it was skipped, or None."""
        entry = self.get(blob_sha)
        try:
            if "skipped" in entry:
                return str(entry["skipped"])
            return ExtractedFile(
                tuple(site_from_json(row, path) for row in entry["sites"]),
                tuple(Raiser(*row) for row in entry["raisers"]),
                tuple(Binding(*row) for row in entry["bindings"]),
                tuple(ClassBases(name, tuple(bases)) for name, bases in entry["classes"]),
            )
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def store(self, blob_sha: str, result: ExtractedFile | str) -> None:
        if isinstance(result, str):
            entry = {"skipped": result}
        else:
            entry = {
                "sites": [site_to_json(site) for site in result.sites],
                "raisers": [[r.function, r.parameter, r.position, r.exception, r.method, r.line, r.end_line] for r in result.raisers],
                "bindings": [[b.name, b.module, b.member] for b in result.bindings],
                "classes": [[c.name, list(c.bases)] for c in result.classes],
            }
        self.put(blob_sha, entry)


class CallCache(Store):
    """The sites of a blob's calls to raisers, by the blob and the digest of the raisers it
    sees (`raisers.digest`), under `root/calls/<version>.sqlite`: a raiser's file that changes
    changes the digest, so its callers' call sites are found again though their blobs are the
    same."""

    def __init__(self, root: Path, version: str) -> None:
        super().__init__(root, "calls", version)

    def load(self, key: str, path: str) -> tuple[Site, ...] | None:
        entry = self.get(key)
        try:
            return tuple(site_from_json(row, path) for row in entry["sites"])
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def store(self, key: str, sites: tuple[Site, ...]) -> None:
        self.put(key, {"sites": [site_to_json(site) for site in sites]})


def site_to_json(site: Site) -> list:
    """A site as a compact JSON row, without its path (a blob can sit at several paths)."""
    template = None
    if site.template is not None:
        template = [
            part if isinstance(part, str) else [part.expr, part.conversion, part.format_spec, part.equal, part.optional]
            for part in site.template.parts
        ]
    return [
        site.kind,
        site.exception,
        template,
        site.line,
        site.end_line,
        site.function,
        list(site.conditions),
        list(site.context),
        site.assert_condition,
        site.snippet_start,
        site.snippet_end,
        site.ordinal,
        site.resolved,
        site.legacy_key,
        list(site.raised_in) if site.raised_in is not None else None,
        list(site.checks_passed),
        list(site.validates),
    ]


def site_from_json(row: list, path: str) -> Site:
    kind, exception, template, line, end_line, function, conditions, context, condition, start, end, ordinal, resolved, legacy, raised_in, passed, validates = row
    if template is not None:
        template = Template(tuple(part if isinstance(part, str) else Placeholder(*part) for part in template))
    return Site(
        kind=kind,
        exception=exception,
        template=template,
        path=path,
        line=line,
        end_line=end_line,
        function=function,
        conditions=tuple(conditions),
        context=tuple(context),
        assert_condition=condition,
        snippet_start=start,
        snippet_end=end,
        ordinal=ordinal,
        resolved=resolved,
        legacy_key=legacy,
        raised_in=tuple(raised_in) if raised_in is not None else None,
        checks_passed=tuple(passed),
        validates=tuple(validates),
    )


# -- Derived values and states, under a digest of the code that makes them -------------------------


def code_digest(code: Iterable[str]) -> str:
    """A digest of the Python version and the `code` a cached value is made by: module files,
    and version strings such as `extractor_version`."""
    digest = hashlib.sha256(repr(sys.version_info[:2]).encode())
    for part in code:
        digest.update(Path(part).read_bytes() if part.endswith(".py") else part.encode())
    return digest.hexdigest()[:32]


def cached_values(
    cache_dir: Path, name: str, code: Iterable[str], keys: Mapping[str, object], compute: Callable[[list[str]], Mapping[str, object]]
) -> dict[str, object]:
    """A value per id, computed (`compute`, given the ids to do) only for ids whose key the last
    build did not see: the values stay in the cache by key, under a digest of the `code` that
    computes them (module files, and version strings such as `extractor_version`). Keys are
    hashable records of everything else the value is computed from."""
    path = kept(cache_dir, name, code)
    known = read_cache(path, dict) or {}
    missing = _missing(keys, known)
    fresh = compute(missing) if missing else {}
    values, used = {}, {}
    for error, key in keys.items():
        value = fresh[error] if error in fresh else known[key]
        values[error] = used[key] = value
    # Only the keys of this build are kept, so the cache does not grow with history.
    if missing or len(used) != len(known):
        write_cache(path, state_bytes(used))
    return values


def uncached(cache_dir: Path, name: str, code: Iterable[str], keys: Mapping[str, object]) -> list[str]:
    """The ids whose values `cached_values` would compute now: those whose key the last build
    did not see."""
    return _missing(keys, read_cache(kept(cache_dir, name, code), dict) or {})


def _missing(keys: Mapping[str, object], known: Mapping[object, object]) -> list[str]:
    return [error for error, key in keys.items() if key not in known]


class BlobState:
    """The one pattern of the states a build keeps whole between builds (`articles.ArticleState`,
    `derive.RelatedIndex`, `search.IndexState`): made from entries extracted from some blobs,
    and brought up to date by taking out and putting in only the errors an upstream change can
    have touched (`since`), which gives what a state made from scratch gives. Each is kept in
    the cache under a digest of its code and of what makes the entries (`read_state`)."""

    blobs: dict[str, str] | None = None
    # By id, the paths of its sites, joined by NUL.
    paths: dict[str, str]

    def since(self, entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str] | None) -> set[str] | None:
        """The ids whose entries may differ from those the state was last brought up to date
        with (`model.changed_errors`), the `entries` being extracted from `blobs` (path -> blob
        sha), which the state takes in; None when either side's blobs are unknown: make the
        state from scratch."""
        changed = None
        if blobs is not None and self.blobs is not None:
            changed = changed_errors(self.paths, self.blobs, entries, blobs)
        self.blobs = dict(blobs) if blobs is not None else None
        return changed


def read_state(cache_dir: Path, name: str, module: str | Sequence[str], kind: type, make: Callable[[], object]) -> object:
    """The `kind` state kept under `name` by the last build (`write_state`), or `make()` when
    there is none, it is unreadable, or another version of `module` (or of the extractor or the
    records) made it."""
    return read_cache(entries_state_path(cache_dir, name, module), kind) or make()


def write_state(cache_dir: Path, name: str, module: str | Sequence[str], state: object) -> None:
    write_cache(entries_state_path(cache_dir, name, module), state_bytes(state))


def entries_state_path(cache_dir: Path, name: str, module: str | Sequence[str]) -> Path:
    """Where a state kept whole between builds and updated by changed blobs lives: under a
    digest of the code of its `module` (or of each module whose code makes what it keeps) and
    of what makes the entries it was made from (the model and the extractor), since an update
    trusts that unchanged blobs give unchanged entries."""
    from generator import model
    from generator.pipeline import extractor_version

    modules = [module] if isinstance(module, str) else list(module)
    return kept(cache_dir, name, [*modules, model.__file__, extractor_version()], suffix="-state")


# -- Pruning -----------------------------------------------------------------------------------

# Folders of the cache that hold what a user asked for rather than what builds derive, never
# pruned: downloaded releases, clones, the venv SGLang's examples run in, a backfill's state.
UNPRUNED = frozenset({"pypi", "git", "sglang-venv", "backfill"})
# Beside what the last build used, each folder keeps this many of its other entries, the most
# recently used: a rebuild of the revision or branch before, or from the code before, stays fast.
SPARE_ENTRIES = 3
# A temp file of an atomic write (`.name.xxxx`) older than this was left by a killed build.
_ABANDONED = 3600.0


def prune(cache_dir: Path, since: float) -> list[Path]:
    """Remove from each folder of `cache_dir` (but `UNPRUNED`) the entries not used since
    `since` (a build's start, `time.time()`), but the `SPARE_ENTRIES` most recently used; the
    paths removed, in order. An entry is every file and folder whose name starts with the same
    stem (a store's `x.sqlite`, `x.sqlite-wal` and `x.sqlite-shm`). Without pruning, each
    version of errorkb's code would leave all its states behind (hundreds of MB for SGLang
    0.5.23), and each output folder its pages' manifest."""
    removed: list[Path] = []
    try:
        folders = sorted(p for p in cache_dir.iterdir() if p.is_dir() and p.name not in UNPRUNED)
    except OSError:
        return removed
    for folder in folders:
        entries: dict[str, list[Path]] = {}
        try:
            paths = sorted(folder.iterdir())
        except OSError:
            continue
        for path in paths:
            if path.name.startswith("."):
                if _last_used([path]) < since - _ABANDONED:
                    removed += _remove([path])
                continue
            entries.setdefault(path.name.split(".", 1)[0], []).append(path)
        older = sorted((used, stem) for stem, members in entries.items() if (used := _last_used(members)) < since)
        for _, stem in older[: max(0, len(older) - SPARE_ENTRIES)]:
            removed += _remove(entries[stem])
    return removed


def _last_used(paths: list[Path]) -> float:
    times = []
    for path in paths:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            pass
    # An entry whose files are gone counts as used now: another build is at it.
    return max(times, default=time.time())


def _remove(paths: list[Path]) -> list[Path]:
    removed = []
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
        except OSError:
            pass
    return removed
