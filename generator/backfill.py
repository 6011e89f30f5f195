"""`errorkb backfill`: the ledger over every release of upstream on the package index.

Each release from `start` to `end`, oldest first, is read as a build of `pypi:<name>==<version>`
reads it (`upstream.PypiSource`, the sites of each blob through the cache, `model.group_sites`)
and folded into a ledger by `history.update_ledger`, as a build of each release in turn would
fold it. No page is rendered. A blob that an earlier release (or an earlier run) already had is
read from the sites cache, not parsed again. The releases after the one being folded are read,
and their new blobs parsed, by worker processes meanwhile (`Prefetch`). Each release is extracted whole, as a build would
extract it: a raiser's call sites depend on the raisers every other file defines, so a file
unchanged since the release before may give other sites (taking such files from the release
before once left five errors of 0.5.19 to 0.5.23 retired in the ledger while every build raised
them).

The ledger being made is kept in the cache, in `backfill/<digest>/`, in the content folder's own
format (`ledger/`, the change list whole in `changes.jsonl`, `upstream.json`), with
`progress.json` listing the releases folded in so far; it is written every `SAVE_EVERY`
seconds and when the run ends or stops. It lives in the cache, not in `content/`,
because it is made only from public releases and this code (the digest covers both, so a state
made by other code is never continued), is never edited or committed, and an interrupted run
then leaves `content/` as it was. A run continues after the last release recorded there.

Once the last release is folded in, the backfilled ledger is joined with the ledger in
`content/` (`join_ledgers`): nothing it holds is dropped; where both know an id, the newer
word stands (the backfill's, when it read the release the current ledger was last built at).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from generator import history, workers
from generator.cache import SiteCache, code_digest
from generator.config import Config
from generator.errors import DownloadError, ErrorkbError, SourceError
from generator.files import write_atomic
from generator.model import Change, LedgerRecord, Upstream, group_sites
from generator.pipeline import cache_blobs, extract_upstream, extractor_version
from generator.upstream import PypiSource, Source, release_versions, version_key

PROGRESS_NAME = "progress.json"
# The kinds of change each release's line counts; others (`rekeyed`, `split`: an id of one
# release that a site of the next had under earlier id rules) are counted where they occur.
COUNTED = ("added", "reworded", "moved", "retired")


@dataclass(frozen=True, slots=True)
class ReleaseStep:
    """One release as the backfill folded it in: its files, how many of their blobs had to be
    parsed (the others came from the cache), how many errors it raises, its changes by kind,
    how many of its files do not parse; or, for a release that cannot be read, why (`skipped`)."""

    version: str
    revision: str = ""
    date: str = ""
    files: int = 0
    parsed: int = 0
    errors: int = 0
    unparsable: int = 0
    changes: tuple[tuple[str, int], ...] = ()
    skipped: str = ""

    def count(self, change: str) -> int:
        """How many changes of one kind the release made."""
        return dict(self.changes).get(change, 0)


@dataclass(frozen=True, slots=True)
class Backfill:
    """What a backfill did: every release folded in (from earlier runs too, `resumed` of them),
    and the ledger it left in the content folder, with how many changes that lists."""

    steps: tuple[ReleaseStep, ...]
    resumed: int
    records: dict[str, LedgerRecord]
    change_count: int


def backfill(
    config: Config,
    content: Path,
    cache_dir: Path,
    start: str,
    end: str,
    name: str | None = None,
    jobs: int | None = None,
    report: Callable[[ReleaseStep], None] = lambda step: None,
) -> Backfill:
    """Fold every release of `name` (default: the configured package) from `start` to `end`
    into the ledger of `content`, oldest first, continuing a run that was interrupted;
    `report` is told of each release as soon as it is done. A release that cannot be read is
    reported as skipped; a download that fails stops the run (it can be continued)."""
    with workers.without_cycle_collection():
        return _backfill(config, content, cache_dir, start, end, name, jobs, report)


def _backfill(
    config: Config,
    content: Path,
    cache_dir: Path,
    start: str,
    end: str,
    name: str | None,
    jobs: int | None,
    report: Callable[[ReleaseStep], None],
) -> Backfill:
    name = name or config.package
    versions = release_versions(name, config, cache_dir, wanted=end)
    if end not in versions:
        raise SourceError(f"pypi:{name}=={end}: no such release on the index")
    wanted = [v for v in versions if version_key(start) <= version_key(v) <= version_key(end)]
    state = BackfillState(cache_dir, config, name, start)
    steps, records, lines, changes = state.load(wanted)
    resumed = len(steps)
    upstream = state.upstream()
    cache = SiteCache(cache_dir, extractor_version())
    todo = wanted[len(steps) :]
    with Prefetch(config, name, todo, cache_dir, cache, jobs) if todo else nullcontext() as ahead:
        # The state is written every SAVE_EVERY seconds, and when the run ends or stops
        # (interrupted, a download failed): writing the whole ledger after each of 119
        # releases cost more than folding most of them. A run killed outright folds again the
        # releases after the last save.
        saved, unsaved = time.monotonic(), False
        try:
            for version in todo:
                step, folded = fold_release(version, ahead, cache_dir, records, jobs)
                if folded is not None:
                    upstream, update = folded
                    records, changes = update.records, [history.change_line(change) for change in update.changes] + changes
                steps.append(step)
                unsaved = True
                if time.monotonic() - saved >= SAVE_EVERY:
                    lines = state.save(records, lines, changes, steps, upstream)
                    saved, unsaved = time.monotonic(), False
                report(step)
        finally:
            if unsaved:
                lines = state.save(records, lines, changes, steps, upstream)
    if upstream is None:
        raise SourceError(f"pypi:{name}: no release from {start} to {end} could be read")
    revisions = {step.revision for step in steps if not step.skipped}
    joined = join_content(content, records, state.changes(), upstream, revisions)
    return Backfill(tuple(steps), resumed, joined.records, len(joined.changes))


def fold_release(
    version: str,
    ahead: Prefetch,
    cache_dir: Path,
    records: Mapping[str, LedgerRecord],
    jobs: int | None,
) -> tuple[ReleaseStep, tuple[Upstream, history.LedgerUpdate] | None]:
    """One release folded into `records` as its build would fold it: its step and the update,
    or a skipped step and None when the release cannot be read. The release comes from
    `ahead`, its new blobs already parsed into the cache; its files are extracted as a build
    extracts them (`pipeline.extract_upstream`, the sites cache, then parsing what it lacks),
    whole: the call sites of a raiser depend on the raisers every other file defines, so a
    file unchanged since the release before may still give other sites."""
    try:
        source, parsed = ahead.take(version)
    except DownloadError:
        raise
    except SourceError as error:
        return ReleaseStep(version, skipped=str(error)), None
    files = source.files()
    upstream = source.upstream
    extraction = extract_upstream(source, cache_dir, jobs=jobs)
    entries = group_sites(extraction.sites, upstream.repo)
    blobs = {file.path: file.blob_sha for file in files}
    update = history.update_ledger(records, entries, upstream, blobs)
    counts = Counter(change.change for change in update.changes)
    step = ReleaseStep(
        version,
        revision=upstream.revision,
        date=upstream.date,
        files=len(files),
        parsed=parsed,
        errors=len(entries),
        unparsable=len(extraction.problems),
        changes=tuple(sorted(counts.items())),
    )
    return step, (upstream, update)


# How often the state is written during a run (and after its last release), in seconds.
SAVE_EVERY = 30.0
# How many releases are read ahead of the one being folded, at most: each holds its files'
# text (up to 60 MB for the latest), and a few keep the workers busy.
READ_AHEAD = 4


class Prefetch:
    """The releases to come, read and their new blobs parsed into the sites cache by worker
    processes while this one folds the releases before them: without it, the workers idled
    while each release was folded, and this process waited while they parsed and while it
    read each archive (bench/README.md).

    Releases are read in order, each by a worker, up to `READ_AHEAD` after the one taken last;
    each blob is handed to the workers once, by the first release that has it and the cache
    lacks. `take` gives a release once its blobs are parsed, with how many of them it was the
    first to have."""

    def __init__(self, config: Config, name: str, versions: list[str], cache_dir: Path, cache: SiteCache, jobs: int | None) -> None:
        self._config, self._name, self._cache_dir, self._cache = config, name, cache_dir, cache
        self._versions = list(versions)
        self._asked = 0  # releases asked for so far, from the first of `versions`
        # By version: the release being read, or read (its source or why it cannot be read,
        # the parsing of its new blobs, how many those are).
        self._reading: dict[str, Future] = {}
        self._read: dict[str, tuple[Source | SourceError, list[Future], int]] = {}
        # Blobs the cache holds or the workers were handed.
        self._seen = cache.keys()
        # The extractor (and libcst, 0.4 s to import) is imported before the workers are
        # forked, so they find it imported.
        import generator.extract  # noqa: F401

        self._pool = workers.pool(workers.cores(jobs)) if workers.cores(jobs) > 1 else None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def take(self, version: str) -> tuple[Source, int]:
        """The release, read, its new blobs in the cache; and how many of its blobs were
        parsed for it. Raises what reading it raised (`SourceError`, `DownloadError`)."""
        while True:
            # The releases after it are asked for meanwhile, so the workers go on reading and
            # parsing while this process folds this one.
            while self._asked < len(self._versions) and len(self._reading) + len(self._read) < READ_AHEAD + 1:
                self._ask(self._versions[self._asked])
            # Releases read are handed on in their order, whichever read ended first: a blob
            # is parsed for the first release that has it, and that release waits for it.
            while self._reading and (first := next(iter(self._reading))) and self._reading[first].done():
                self._parse(first, self._reading.pop(first))
            next_read = [next(iter(self._reading.values()))] if self._reading else []
            if version not in self._read:
                wait(next_read)
                continue
            source, futures, parsed = self._read[version]
            pending = [future for future in futures if not future.done()]
            if not pending:
                break
            wait([*pending, *next_read], return_when=FIRST_COMPLETED)
        del self._read[version]
        for future in futures:
            future.result()  # a worker's failure is this run's
        if isinstance(source, SourceError):
            raise source
        return source, parsed

    def _submit(self, function: Callable, *args: object) -> Future:
        """`function(*args)` on a worker, or here at once with one job."""
        if self._pool is not None:
            return self._pool.submit(function, *args)
        future: Future = Future()
        future.set_result(function(*args))
        return future

    def _ask(self, version: str) -> None:
        self._asked += 1
        self._reading[version] = self._submit(_read_release, self._name, version, self._config, self._cache_dir)

    def _parse(self, version: str, reading: Future) -> None:
        """A release read: its new blobs handed to the workers."""
        source = reading.result()
        if isinstance(source, DownloadError):
            # Raised when the run reaches this release, after folding those before it;
            # nothing after it is asked for.
            self._asked = len(self._versions)
        if isinstance(source, SourceError):
            self._read[version] = (source, [], 0)
            return
        new = []
        for file in source.files():
            if file.blob_sha not in self._seen:
                self._seen.add(file.blob_sha)
                new.append(file)
        batches = [[(file, source.read(file)) for file in new[start : start + 8]] for start in range(0, len(new), 8)]
        self._read[version] = (source, [self._submit(cache_blobs, self._cache, batch) for batch in batches], len(new))


def _read_release(name: str, version: str, config: Config, cache_dir: Path) -> Source | SourceError:
    """In a worker of `Prefetch`: a release read (downloaded first if it must be), or why it
    cannot be."""
    try:
        return PypiSource(name, version, config, cache_dir)
    except SourceError as error:
        return error


class BackfillState:
    """The ledger a backfill has made so far, in `<cache>/backfill/<digest>/`: the digest
    covers the code that makes it (this module, the ledger's, the extractor), the settings
    that place files in upstream's layout, the package and the first release, so a state
    made any other way is never continued, only made anew."""

    def __init__(self, cache_dir: Path, config: Config, name: str, start: str) -> None:
        from generator import model

        code = [__file__, history.__file__, model.__file__, extractor_version(), config.index_url, config.repo, config.package_root, name, start]
        self.folder = cache_dir / "backfill" / code_digest(code)

    def load(self, wanted: list[str]) -> tuple[list[ReleaseStep], dict[str, LedgerRecord], dict[str, tuple[tuple, str]], list[str]]:
        """The steps, ledger (records and lines) and change lines so far, when the releases
        recorded are the first of `wanted`; else nothing, and the run starts from the first."""
        try:
            progress = json.loads((self.folder / PROGRESS_NAME).read_bytes())
            steps = [_step_of(data) for data in progress["steps"]]
            if [step.version for step in steps] != wanted[: len(steps)]:
                raise ValueError("releases recorded are not the first of those wanted")
            lines: dict[str, tuple[tuple, str]] = {}
            records = history.load_ledger(self.folder, lines)
            changes = (self.folder / history.CHANGES_NAME).read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError, TypeError, KeyError, ErrorkbError):
            return [], {}, {}, []
        return steps, records, lines, [line for line in changes if line.strip()]

    def upstream(self) -> Upstream | None:
        """The last release folded in, as its build named it."""
        try:
            data = json.loads((self.folder / history.UPSTREAM_NAME).read_bytes())
            return Upstream(repo=data["repo"], source=data["source"], revision=data["revision"], date=data["date"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def changes(self) -> tuple[Change, ...]:
        return history.load_changes(self.folder)

    def save(
        self,
        records: Mapping[str, LedgerRecord],
        lines: Mapping[str, tuple[tuple, str]],
        changes: list[str],
        steps: list[ReleaseStep],
        upstream: Upstream | None,
    ) -> dict[str, tuple[tuple, str]]:
        """The ledger and changes as a build leaves them, then the releases done: a run killed
        between the two folds the last release again, which changes nothing. Returns the
        ledger's lines, to be given with the next save: `lines`, the lines last written,
        where their records are unchanged."""
        written = dict(lines)
        if upstream is not None:
            files = {**history.ledger_files(records, lines, written), history.CHANGES_NAME: history.changes_file(changes)}
            history.save_history(self.folder, history.BuildHistory(records, (), ()), upstream, files)
        progress = {"steps": [asdict(step) for step in steps]}
        write_atomic(self.folder / PROGRESS_NAME, (json.dumps(progress, indent=1, sort_keys=True) + "\n").encode())
        return written


def _step_of(data: dict) -> ReleaseStep:
    data = dict(data)
    data["changes"] = tuple((str(kind), int(count)) for kind, count in data.get("changes", ()))
    return ReleaseStep(**data)


# -- Joining the backfill with the ledger in content/ ----------------------------------------------


def join_content(
    content: Path, backfilled: dict[str, LedgerRecord], changes: tuple[Change, ...], upstream: Upstream, folded: Collection[str]
) -> history.LedgerUpdate:
    """Write into `content` the backfilled ledger joined with the one already there
    (`join_ledgers`; `folded`: the revisions of the releases folded in); a content folder
    without one takes the backfill as it is, with `upstream.json` naming the last release."""
    lines: dict[str, tuple[tuple, str]] = {}
    current = history.load_ledger(content, lines)
    built = history.last_built(content)
    if not current and built is None:
        joined = history.LedgerUpdate(backfilled, changes)
        history.save_history(content, history.BuildHistory(backfilled, (), changes), upstream)
        return joined
    joined = join_ledgers(backfilled, changes, current, history.load_changes(content), upstream, _upstream_of(content), folded)
    history.write_history(content, joined.records, joined.changes, lines)
    return joined


def _upstream_of(content: Path) -> Upstream:
    data = json.loads((content / history.UPSTREAM_NAME).read_text(encoding="utf-8"))
    return Upstream(repo=data.get("repo", ""), source=data.get("source", ""), revision=data["revision"], date=data.get("date", ""))


def join_ledgers(
    backfilled: Mapping[str, LedgerRecord],
    backfilled_changes: tuple[Change, ...],
    current: Mapping[str, LedgerRecord],
    current_changes: tuple[Change, ...],
    end: Upstream,
    built: Upstream,
    folded: Collection[str] = (),
) -> history.LedgerUpdate:
    """The backfilled ledger (up to release `end`) with the current one (last built at `built`)
    laid over it; `folded`: the revisions of the releases the backfill read. An id only one
    side knows keeps its record.

    An id both know: when the backfill folded the revision the current ledger was last built
    at, the backfill's record is the one to keep (it read every release up to there with this
    code, while the current ledger's may come from older code), with the aliases of both;
    otherwise the current ledger is newer and its record stands, with the backfill's first
    release, the aliases of both, and the backfill's pin where its code is the same (the pin a
    build of each release in turn leaves). Then an id active at `end` that the current ledger
    never saw was gone by the time it was built: it is retired there.

    Changes, newest first: the backfill's, and the current ones not already among them. At a
    revision the backfill folded, what changed since the release before is the backfill's to
    say: the current ledger's changes there are kept only for ids the backfill does not know
    (ids of earlier id rules, `rekeyed` or `split`), since the others were made against another
    predecessor (an earlier build of the same revision, by other code)."""
    records = dict(backfilled)
    added: list[Change] = []
    newer = built.revision not in folded and built.revision != end.revision
    if newer:
        for error_id, then in backfilled.items():
            if then.status == "active" and error_id not in current:
                records[error_id] = replace(then, status="retired", retired_in=built.revision)
                added.append(Change(error_id, built.revision, built.date, "retired", then.message))
    for error_id, now in current.items():
        then = backfilled.get(error_id)
        if then is None:
            records[error_id] = now
            continue
        if newer:
            joined = replace(now, first_seen=then.first_seen)
            if now.code == then.code and then.pinned:
                joined = replace(joined, pinned=then.pinned, pinned_date=then.pinned_date)
        else:
            joined = then
        if joined.status == "active":
            joined = replace(joined, aliases=tuple(sorted({*then.aliases, *now.aliases})))
        records[error_id] = joined
    for error_id, record in records.items():
        if record.status == "active" and record.aliases:
            kept = tuple(a for a in record.aliases if records.get(a) is None or records[a].status != "active")
            if kept != record.aliases:
                records[error_id] = replace(record, aliases=kept)
    kept = [c for c in current_changes if c.revision not in folded or c.id not in backfilled]
    seen = {(c.id, c.revision, c.change) for c in kept}
    earlier = [c for c in backfilled_changes if (c.id, c.revision, c.change) not in seen]
    # Newest first by date; at the same date the current ledger's changes come first, and each
    # side keeps its own order (a stable sort).
    changes = sorted([*added, *kept, *earlier], key=lambda c: c.date, reverse=True)
    return history.LedgerUpdate(records, tuple(changes))
