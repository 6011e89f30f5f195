"""`errorkb build` as a pipeline read top to bottom:

source -> extract -> group -> join curated content -> derive -> render -> write.

Each stage takes records and returns records; only `write_site`, the last, touches the output
folder. It writes a new tree next to the old one and swaps it in at the end, under a lock, so
an interrupted or concurrent build never leaves a half-written site. Files whose bytes did not
change are hard links to the previous build's (same bytes, same mtime), so `rsync` and static
hosts upload only the difference.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from generator import api, audit, derive, history, render
from generator.content import curated_json_schema
from generator.config import Config
from generator.errors import BuildError
from generator.files import write_cache
from generator.highlight import excerpter_version, read_excerpts
from generator.model import Article, Change, Curated, ErrorEntry, Extraction, LedgerRecord, Problem, Upstream, group_sites
from generator.pipeline import extract_upstream
from generator.progress import Progress
from generator.upstream import Source, open_source


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What a build did: where, from what, how many files, how many changed, what it skipped."""

    out: Path
    upstream: Upstream
    errors: int
    curated: int
    files: int
    written: int
    problems: tuple[Problem, ...]
    orphans: tuple[str, ...] = ()
    stale: int = 0


@dataclass(frozen=True, slots=True)
class Inputs:
    """Where a build reads and writes; every path already resolved from config and options."""

    source: str
    out: Path
    content: Path
    cache_dir: Path
    base_url: str
    report_url: str


def inputs_of(config: Config, source: str | None = None, out: Path | None = None, content: Path | None = None, cache_dir: Path | None = None) -> Inputs:
    return Inputs(
        source=source or config.source,
        out=Path(out or config.out),
        content=Path(content or config.content),
        cache_dir=Path(cache_dir or config.cache_dir),
        base_url=config.base_url,
        report_url=config.report_url,
    )


def build(config: Config, inputs: Inputs, jobs: int | None = None) -> BuildResult:
    """The whole site for one upstream revision, swapped into `inputs.out` at the end; then
    the ledger and change list in `inputs.content`, so a build killed before the swap leaves
    both the previous site and the previous ledger."""
    with build_lock(inputs.out):
        source = open_source(inputs.source, config, inputs.cache_dir)
        stamp = BuildStamp(inputs, source)
        previous = stamp.previous()
        if previous is not None:
            return previous
        extraction = extract_upstream(source, inputs.cache_dir, jobs=jobs)
        entries = group_sites(extraction.sites, extraction.upstream.repo)
        # The search index needs only the entries: it is made on the other core meanwhile.
        search = in_background(partial(search_files, entries, extraction.upstream.repo), jobs, len(entries))
        blobs = {file.path: file.blob_sha for file in extraction.files}
        past = history.build_history(inputs.content, entries, extraction.upstream, blobs)
        pins = {error: history.pinned_upstream(record, extraction.upstream) for error, record in past.records.items()}
        written_here = load_content(inputs.content, extraction.upstream.repo)
        curated = history.carry_curated(written_here, past.records)
        by_id = {entry.id: entry for entry in entries}
        stale = audit.stale_revisions({k: v for k, v in curated.items() if not v.review}, by_id, source)
        orphans = audit.content_orphans(inputs.content, by_id, past.records)
        articles = derive_site(source, extraction, entries, curated, past.inactive, inputs.cache_dir, jobs, stale, pins)
        info = render.SiteInfo(extraction.upstream, inputs.base_url, inputs.report_url)
        # Home and browse pages need only the articles: rendered on the other core while
        # this one digests the pages.
        shared = in_background(partial(shared_files, articles, info, past.changes), jobs, len(articles))
        manifest = PageManifest(inputs.cache_dir, inputs.out, info)
        digests = manifest.digests(articles, blobs)
        unchanged, hashes = manifest.unchanged(digests), manifest.file_hashes()
        # Until the new tree is in place and described, no manifest: a build killed after the
        # swap must not leave one describing the tree before it.
        manifest.clear()
        stamp.clear()
        coverage = audit.coverage(entries, (k for k in curated if k in by_id))
        files = site_files(articles, entries, info, past.changes, jobs, unchanged, coverage, search, shared)
        total, written, hashes = write_site(files, inputs.out, hashes)
        manifest.save(digests, hashes)
        history.save_history(inputs.content, past, extraction.upstream)
        result = BuildResult(
            out=inputs.out,
            upstream=extraction.upstream,
            errors=len(entries),
            curated=sum(1 for entry in entries if entry.id in curated),
            files=total,
            written=written,
            problems=extraction.problems,
            orphans=tuple(str(orphan) for orphan in orphans),
            stale=len(stale),
        )
        stamp.save(result)
    return result


class BuildStamp:
    """A digest of everything a build reads: errorkb's code and templates, every upstream
    blob sha, every file under `content/`, the ledger, the changes and the settings. When it
    equals the last build's into the same folder, and that folder is still there, the site
    is already what this build would write and nothing is done."""

    def __init__(self, inputs: Inputs, source: Source) -> None:
        key = hashlib.sha256(str(inputs.out.absolute()).encode()).hexdigest()[:16]
        self.path = inputs.cache_dir / "builds" / f"{key}.pickle"
        self.out = inputs.out
        self._inputs, self._source = inputs, source
        self.digest = self._digest()

    def _digest(self) -> str:
        inputs, source = self._inputs, self._source
        digest = hashlib.sha256(pickle.dumps((inputs, source.upstream)))
        package = Path(__file__).resolve().parent
        for folder in (package, render.TEMPLATES, inputs.content):
            for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
                if path.is_file() and "__pycache__" not in path.parts:
                    digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
        for file in source.files():
            digest.update(f"{file.path}\0{file.blob_sha}\n".encode())
        return digest.hexdigest()

    def previous(self) -> BuildResult | None:
        try:
            digest, result = pickle.loads(self.path.read_bytes())
        except (OSError, pickle.PickleError, ValueError, EOFError, TypeError, AttributeError):
            return None
        if digest != self.digest or not (self.out / "index.html").is_file():
            return None
        return replace(result, written=0)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def save(self, result: BuildResult) -> None:
        """Remember this build, digesting the inputs again: the build itself just wrote the
        ledger into the content folder, and the next build will read that ledger."""
        self.digest = self._digest()
        write_cache(self.path, pickle.dumps((self.digest, result)))


# -- Join and derive ------------------------------------------------------------------------------


def load_content(folder: Path, repo: str) -> dict[str, Curated]:
    """Curated entries by id; `ContentError` listing every problem in `folder`."""
    from generator.content import load_curated

    return load_curated(folder, repo)


def derive_site(
    source: Source,
    extraction: Extraction,
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    ledger: tuple[LedgerRecord, ...],
    cache_dir: Path,
    jobs: int | None,
    stale: Mapping[str, str] | None = None,
    pins: Mapping[str, Upstream] | None = None,
) -> tuple[Article, ...]:
    """Snippets and docstrings from the source, related errors, triggers: one article per id,
    each naming the revision it is pinned to (`pins`, by id)."""
    # Ranking related errors needs only the entries: done on the other core meanwhile.
    related = in_background(partial(cached_related, entries, cache_dir), jobs, len(entries))
    excerpts = read_excerpts(source, entries, cache_dir, jobs)
    triggers = cached_triggers(entries, cache_dir)
    return derive.derive_articles(entries, curated, extraction.upstream, excerpts, ledger, related(), stale, pins, triggers)


def cached_triggers(entries: tuple[ErrorEntry, ...], cache_dir: Path) -> dict[str, str | None]:
    """`derive.derive_trigger` of each error's first site, by id, reading the conditions in
    words again only for sites whose inputs (`derive.trigger_inputs`) the last build did not
    see; the texts stay in the cache under a digest of the deriving code."""
    digest = hashlib.sha256(Path(derive.__file__).read_bytes() + repr(sys.version_info[:2]).encode()).hexdigest()[:32]
    path = cache_dir / "triggers" / f"{digest}.pickle"
    try:
        known = pickle.loads(path.read_bytes())
        if not isinstance(known, dict):
            known = {}
    except (OSError, pickle.PickleError, ValueError, EOFError, TypeError, AttributeError):
        known = {}
    triggers, used, added = {}, {}, False
    for entry in entries:
        key = derive.trigger_inputs(entry.sites[0])
        if key not in known:
            known[key], added = derive.derive_trigger(entry.sites[0]), True
        triggers[entry.id] = used[key] = known[key]
    # Only the inputs of this build are kept, so the cache does not grow with history.
    if added or len(used) != len(known):
        write_cache(path, pickle.dumps(used, protocol=5))
    return triggers


def cached_related(entries: tuple[ErrorEntry, ...], cache_dir: Path) -> dict[str, tuple[str, ...]]:
    """`derive.related_errors`, ranking again only the errors an upstream change can have moved:
    the last ranking and what it was made from stay in the cache, under a digest of the
    ranking's code. The result is the same as ranking every error (`derive.related_state`)."""
    digest = hashlib.sha256(Path(derive.__file__).read_bytes()).hexdigest()[:32]
    path = cache_dir / "related" / f"state-{digest}.pickle"
    try:
        previous = pickle.loads(path.read_bytes())
        if not isinstance(previous, derive.RelatedState):
            previous = None
    except (OSError, pickle.PickleError, ValueError, EOFError, TypeError, AttributeError):
        previous = None
    state = derive.related_state(entries, previous=previous)
    if previous is None or state != previous:
        write_cache(path, pickle.dumps(state, protocol=5))
    return state.related


# -- Render ---------------------------------------------------------------------------------------

# Set in the parent before the worker processes fork, so they render from the same articles
# without each one being pickled and sent.
_SHARED: tuple[tuple[Article, ...], render.SiteInfo] | None = None


def site_files(
    articles: tuple[Article, ...],
    entries: tuple[ErrorEntry, ...],
    info: render.SiteInfo,
    changes: tuple[Change, ...],
    jobs: int | None = None,
    unchanged: frozenset[str] = frozenset(),
    coverage: audit.Coverage | None = None,
    search: Callable[[], Iterable[tuple[str, bytes]]] | None = None,
    shared: Callable[[], Iterable[tuple[str, bytes]]] | None = None,
) -> Iterator[tuple[str, bytes | None]]:
    """Every file of the site: shared pages, the search index, and each error's page and
    document, rendered on every core. The pages of `unchanged` ids are not rendered again:
    they come as `None`, meaning "the previous build's file". `search` and `shared` give the
    search index's files and the shared pages when they are being made elsewhere
    (`in_background`)."""
    yield from shared() if shared is not None else render.render_shared(articles, info, changes)
    if coverage is not None:
        yield from render.render_coverage(coverage, info)
    yield "api/schema/content.json", api.dumps(curated_json_schema())
    yield from search() if search is not None else search_files(entries, info.upstream.repo)
    for article in articles:
        if article.id in unchanged:
            yield f"errors/{article.id}/index.html", None
            yield f"api/errors/{article.id}.json", None
    yield from _render_errors(tuple(a for a in articles if a.id not in unchanged), info, jobs)


def shared_files(articles: tuple[Article, ...], info: render.SiteInfo, changes: tuple[Change, ...]) -> list[tuple[str, bytes]]:
    """`render.render_shared` as a list, to be made in another process."""
    return list(render.render_shared(articles, info, changes))


def search_files(entries: tuple[ErrorEntry, ...], repo: str) -> Iterable[tuple[str, bytes]]:
    """The search engineer's index files, when `generator.search` provides them."""
    try:
        from generator.search import search_files as make_search_files
    except ImportError:
        return ()
    return sorted(make_search_files(entries, repo).items())


class PageManifest:
    """What each error page was rendered from in the last build into `out`: a digest of its
    article per id, under a salt of everything else a page depends on (templates, renderer,
    highlighter, site settings). A page whose digest is unchanged is not rendered again.

    Snippets enter the digest as the blob sha they were cut from, since a snippet is a pure
    function of the blob, its range (in the site) and the highlighter (in the salt). The
    build's own revision is in neither: a page names the revision its article is pinned to.
    """

    def __init__(self, cache_dir: Path, out: Path, info: render.SiteInfo) -> None:
        key = hashlib.sha256(str(out.absolute()).encode()).hexdigest()[:16]
        self.path = cache_dir / "pages" / f"{key}.json"
        self.out = out
        salt = hashlib.sha256(render.templates_digest().encode())
        salt.update(excerpter_version().encode())
        for module in (api, derive, sys.modules[__name__]):
            salt.update(Path(module.__file__).read_bytes())
        salt.update(pickle.dumps((info.upstream.repo, info.base_url, info.report_url)))
        self.salt = salt.hexdigest()
        self._fallback = info.upstream

    def digests(self, articles: tuple[Article, ...], blobs: Mapping[str, str]) -> dict[str, str]:
        digests = {}
        for article in articles:
            locations = tuple(replace(location, snippet=None) for location in article.locations)
            shas = tuple(blobs.get(location.site.path) for location in article.locations)
            pinned = article.upstream or self._fallback
            payload = pickle.dumps((replace(article, locations=locations, upstream=pinned), shas), protocol=5)
            digests[article.id] = hashlib.sha256(payload).hexdigest()[:32]
        return digests

    def unchanged(self, digests: Mapping[str, str]) -> frozenset[str]:
        """Ids whose page and document the output folder already holds as this build would
        write them."""
        try:
            previous = json.loads(self.path.read_bytes())
            if previous.get("salt") != self.salt:
                return frozenset()
            pages = previous["pages"]
        except (OSError, ValueError, KeyError, AttributeError):
            return frozenset()
        # Plain strings: pathlib's objects cost more than the 54,000 stat calls themselves.
        out = str(self.out)
        return frozenset(
            error
            for error, digest in digests.items()
            if pages.get(error) == digest
            and os.path.isfile(f"{out}/errors/{error}/index.html")
            and os.path.isfile(f"{out}/api/errors/{error}.json")
        )

    def file_hashes(self) -> dict[str, str]:
        """The digest of every file the last build wrote into `out`, by path."""
        try:
            return dict(json.loads(self.path.read_bytes())["files"])
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def save(self, digests: Mapping[str, str], hashes: Mapping[str, str]) -> None:
        record = {"salt": self.salt, "pages": digests, "files": hashes}
        write_cache(self.path, json.dumps(record, sort_keys=True).encode())


def _render_errors(articles: tuple[Article, ...], info: render.SiteInfo, jobs: int | None) -> Iterator[tuple[str, bytes]]:
    global _SHARED
    jobs = jobs or os.cpu_count() or 1
    progress = Progress("render", len(articles))
    if jobs == 1 or len(articles) < 200 or not _can_fork():
        for done, item in enumerate(render.render_errors(articles, info), 1):
            yield item
            progress.update(done // 2, "pages")
        progress.close()
        return
    _SHARED = (articles, info)
    try:
        step = 250
        chunks = [(start, min(start + step, len(articles))) for start in range(0, len(articles), step)]
        import multiprocessing

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            done = 0
            for files in pool.map(_render_chunk, chunks):
                yield from files
                done += len(files) // 2
                progress.update(done, "pages")
    finally:
        _SHARED = None
        progress.close()


def _render_chunk(bounds: tuple[int, int]) -> list[tuple[str, bytes]]:
    assert _SHARED is not None
    articles, info = _SHARED
    return list(render.render_errors(articles[bounds[0] : bounds[1]], info))


# The task a background process runs, set in the parent just before it forks.
_BACKGROUND: Callable[[], object] | None = None


def in_background(task: Callable[[], object], jobs: int | None, size: int) -> Callable[[], object]:
    """Start `task` in a forked process, which inherits the records it reads instead of
    receiving them pickled; returns a function that waits for its result. With one job, no
    fork, or little work (`size` records), the task runs when its result is asked for."""
    global _BACKGROUND
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or size < 1000 or not _can_fork():
        return task
    import multiprocessing

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    _BACKGROUND = task
    try:
        # A fork pool starts its process inside submit, while the task is set.
        future = pool.submit(_run_background)
    finally:
        _BACKGROUND = None

    def result() -> object:
        try:
            return future.result()
        finally:
            pool.shutdown()

    return result


def _run_background() -> object:
    assert _BACKGROUND is not None
    return _BACKGROUND()


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


# -- Write ----------------------------------------------------------------------------------------


@contextmanager
def build_lock(out: Path):
    """Hold `.<out>.lock` beside the output folder for the whole build; a second build fails
    at once with a one-line error instead of mixing its files with the first one's."""
    lock_path = out.parent / f".{out.name}.lock"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "w")
    except OSError as error:
        raise BuildError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise BuildError(f"{out}: another build is writing this folder (lock {lock_path})") from None
            raise
        yield
    finally:
        handle.close()


def write_site(
    files: Iterable[tuple[str, bytes | None]], out: Path, previous: Mapping[str, str] | None = None
) -> tuple[int, int, dict[str, str]]:
    """Write every file into a new folder beside `out`, then swap it in; returns (files,
    files whose bytes changed, digest of each file by path).

    Unchanged files are hard links to the previous build's, and so is a file given as None.
    `previous` holds the digests of the files the last build wrote, so telling an unchanged
    file costs a hash in memory rather than a read; without it the old file is read.
    """
    out = out.absolute()
    # Leftovers of a build that was killed: never part of any site.
    for stale in [*out.parent.glob(f".{out.name}.tmp-*"), *out.parent.glob(f".{out.name}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as error:
        raise BuildError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    hashes: dict[str, str] = {}
    # Plain strings and os calls: a site has 57,000 files in 27,000 folders, and pathlib's
    # objects cost more than the links and folders themselves.
    old, new = str(out), str(staging)
    try:
        total = written = 0
        made: set[str] = {new}
        for relative, data in files:
            target = f"{new}/{relative}"
            parent = target.rpartition("/")[0]
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            total += 1
            if data is None:
                _link_previous(f"{old}/{relative}", target)
                if previous and relative in previous:
                    hashes[relative] = previous[relative]
                continue
            digest = hashes[relative] = hashlib.blake2b(data, digest_size=16).hexdigest()
            known = None if not previous else previous.get(relative) == digest
            if not _keep_previous(f"{old}/{relative}", target, data, known):
                with open(target, "wb") as handle:
                    handle.write(data)
                written += 1
        os.chmod(staging, 0o755)
        _swap(staging, out)
    except OSError as error:
        # A full disk, a read-only folder: the previous site is still whole, and this is not a bug.
        shutil.rmtree(staging, ignore_errors=True)
        where = f": {error.filename}" if error.filename else ""
        raise BuildError(f"{out}: cannot write the site ({error.strerror}{where}); the previous site is unchanged") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return total, written, hashes


def _keep_previous(previous: str, target: str, data: bytes, known: bool | None) -> bool:
    """Link the previous build's file when its bytes are the same; False when they differ.
    `known` says whether the last build's digest matched; None when there is none to ask."""
    try:
        if known is None:
            if os.stat(previous).st_size != len(data):
                return False
            with open(previous, "rb") as handle:
                if handle.read() != data:
                    return False
        elif not known:
            return False
        os.link(previous, target)
        return True
    except OSError:
        return False


def _link_previous(previous: str, target: str) -> None:
    try:
        os.link(previous, target)
    except OSError:
        try:
            shutil.copy2(previous, target)
        except OSError as error:
            raise BuildError(f"{previous}: the previous build's file vanished during the build ({error})") from None


def _swap(staging: Path, out: Path) -> None:
    """Put `staging` at `out`; the previous tree stays whole until the new one is in place."""
    if not out.exists():
        os.replace(staging, out)
        return
    if not out.is_dir():
        raise BuildError(f"{out}: exists and is not a folder")
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(retired)
    os.replace(out, retired)
    try:
        os.replace(staging, out)
    except OSError:
        os.replace(retired, out)
        raise
    _remove_in_background(retired)


def _remove_in_background(folder: Path) -> None:
    """Delete the previous tree without making the build wait: removing 27,000 folders takes
    seconds, and the new site is already in place. A removal that never finishes is redone by
    the next build, which clears `.<out>.old-*` first."""
    try:
        subprocess.Popen(
            ["rm", "-rf", "--", str(folder)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
