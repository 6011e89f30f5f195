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
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from generator import derive, render
from generator.config import Config
from generator.errors import BuildError
from generator.highlight import read_excerpts
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


def build(
    config: Config,
    inputs: Inputs,
    ledger: tuple[LedgerRecord, ...] = (),
    changes: tuple[Change, ...] = (),
    jobs: int | None = None,
) -> BuildResult:
    """The whole site for one upstream revision, swapped into `inputs.out` at the end."""
    with build_lock(inputs.out):
        source = open_source(inputs.source, config, inputs.cache_dir)
        extraction = extract_upstream(source, inputs.cache_dir, jobs=jobs)
        entries = group_sites(extraction.sites, extraction.upstream.repo)
        curated = load_content(inputs.content, extraction.upstream.repo)
        articles = derive_site(source, extraction, entries, curated, ledger, inputs.cache_dir, jobs)
        info = render.SiteInfo(extraction.upstream, inputs.base_url, inputs.report_url)
        files = site_files(articles, entries, info, changes, jobs)
        total, written = write_site(files, inputs.out)
    return BuildResult(
        out=inputs.out,
        upstream=extraction.upstream,
        errors=len(entries),
        curated=sum(1 for entry in entries if entry.id in curated),
        files=total,
        written=written,
        problems=extraction.problems,
    )


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
) -> tuple[Article, ...]:
    """Snippets and docstrings from the source, related errors, triggers: one article per id."""
    excerpts = read_excerpts(source, entries, cache_dir, jobs)
    related = cached_related(entries, cache_dir)
    return derive.derive_articles(entries, curated, extraction.upstream, excerpts, ledger, related)


def cached_related(entries: tuple[ErrorEntry, ...], cache_dir: Path) -> dict[str, tuple[str, ...]]:
    """`derive.related_errors`, kept in the cache under a digest of everything it reads (the
    entries and the ranking's code), since it costs seconds and rarely changes."""
    digest = hashlib.sha256(Path(derive.__file__).read_bytes())
    for entry in entries:
        digest.update(repr((entry.id, entry.sites)).encode())
    path = cache_dir / "related" / f"{digest.hexdigest()[:32]}.json"
    try:
        return {key: tuple(value) for key, value in json.loads(path.read_bytes()).items()}
    except (OSError, ValueError, AttributeError):
        pass
    related = derive.related_errors(entries)
    _write_atomic(path, json.dumps(related, sort_keys=True).encode())
    return related


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
) -> Iterator[tuple[str, bytes]]:
    """Every file of the site: shared pages, the search index, and each error's page and
    document, rendered on every core."""
    yield from render.render_shared(articles, info, changes)
    yield from search_files(entries, info.upstream.repo)
    yield from _render_errors(articles, info, jobs)


def search_files(entries: tuple[ErrorEntry, ...], repo: str) -> Iterable[tuple[str, bytes]]:
    """The search engineer's index files, when `generator.search` provides them."""
    try:
        from generator.search import search_files as make_search_files
    except ImportError:
        return ()
    return sorted(make_search_files(entries, repo).items())


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


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


# -- Write ----------------------------------------------------------------------------------------


@contextmanager
def build_lock(out: Path):
    """Hold `.<out>.lock` beside the output folder for the whole build; a second build fails
    at once with a one-line error instead of mixing its files with the first one's."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lock_path = out.parent / f".{out.name}.lock"
    handle = open(lock_path, "w")
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


def write_site(files: Iterable[tuple[str, bytes]], out: Path) -> tuple[int, int]:
    """Write every file into a new folder beside `out`, then swap it in; returns (files,
    files whose bytes changed). Unchanged files are hard links to the previous build's."""
    out = out.absolute()
    # Leftovers of a build that was killed: never part of any site.
    for stale in [*out.parent.glob(f".{out.name}.tmp-*"), *out.parent.glob(f".{out.name}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        total = written = 0
        made: set[Path] = set()
        for relative, data in files:
            target = staging / relative
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            total += 1
            if not _keep_previous(out / relative, target, data):
                target.write_bytes(data)
                written += 1
        os.chmod(staging, 0o755)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return total, written


def _keep_previous(previous: Path, target: Path, data: bytes) -> bool:
    """Link the previous build's file when its bytes are the same; False when they differ."""
    try:
        if previous.stat().st_size != len(data) or previous.read_bytes() != data:
            return False
        os.link(previous, target)
        return True
    except OSError:
        return False


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
    os.replace(staging, out)
    shutil.rmtree(retired, ignore_errors=True)


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError:
        pass
