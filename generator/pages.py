"""Render: every file of the output, as (path, bytes) pairs in the order they are ready.

`output_files` gives the coverage pages and the content schema, each error's page and document
(rendered on every core; `None` for a page the plan found unchanged, meaning "the previous
build's file"), then the browse pages, the shared pages and the search index, which other
processes make meanwhile (`browse_files`, `listed_files`, `search_files`).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from importlib.metadata import version as package_version
from importlib.util import find_spec
from pathlib import Path

from generator import api, audit, content, derive, history, render, workers
from generator.articles import family_members, joined
from generator.cache import kept, read_state, write_state
from generator.files import read_cache, state_bytes, write_cache
from generator.highlight import Excerpts
from generator.model import Article, Change, Curated, ErrorEntry, Family, LedgerRecord, Versions
from generator.progress import Progress
from generator.publish import file_digest


def output_files(
    articles: tuple[Article, ...],
    unchanged: Iterable[str],
    info: render.OutputInfo,
    made: Iterable[Callable[[], Iterable[tuple[str, bytes]]]],
    coverage: audit.Coverage,
    jobs: int | None = None,
    found: Mapping[str, Excerpts] | None = None,
    cache_dir: Path | None = None,
) -> Iterator[tuple[str, bytes | None]]:
    """Every file of the site: the coverage pages, each error's page and document, then the
    browse and shared pages and the search index (`made` gives them, made elsewhere, in the
    order they are ready: `workers.background`), so that the files made here are written while the
    others are still being made. The pages of `articles` are rendered on every core, joined to
    the excerpts of their files (`found`, by path: `page_excerpts`); those of `unchanged` ids
    come as `None`, meaning "the previous build's file". `cache_dir` is where the content
    schema is kept (`content_schema`)."""
    yield from render.render_coverage(coverage, info)
    yield "api/schema/content.json", api.dumps(content_schema(cache_dir))
    for error in sorted(unchanged):
        yield f"errors/{error}/index.html", None
        yield f"api/errors/{error}.json", None
    yield from _render_errors(articles, info, jobs, found or {})
    for files in made:
        yield from files()


def site_holds(hashes: Mapping[str, str], held: Callable[[str], bool]) -> Callable[[str, str | None], bool]:
    """Whether the output folder holds a file with the bytes of a digest (`file_digest`), by
    path and digest, `hashes` being the digests of the site's files and `held` telling whether
    it holds one (`plan.PageManifest.holding`)."""
    return lambda path, digest: digest is not None and hashes.get(path) == digest and held(path)


def as_kept(make: Callable[[], Iterable[tuple[str, bytes]]], holds: Callable[[str, str | None], bool]) -> list[tuple[str, bytes | None]]:
    """`make()`'s files, each that the output folder `holds` (`site_holds`) as None ("the
    previous build's file", as `output_files` gives unchanged pages). Made in another process,
    a rebuild's browse and shared pages send back what changed, not 50 MB, and `publish`
    links the rest as it would have."""
    return [(path, None if holds(path, file_digest(data)) else data) for path, data in make()]


def _render_errors(
    articles: tuple[Article, ...], info: render.OutputInfo, jobs: int | None, found: Mapping[str, Excerpts]
) -> Iterator[tuple[str, bytes]]:
    """Each article's page and document, joined to its excerpts from `found`, on every core."""
    jobs = workers.cores(jobs)
    progress = Progress("render", len(articles))
    try:
        if jobs == 1 or len(articles) < 200:
            for done, item in enumerate(render.render_errors((joined(article, found) for article in articles), info), 1):
                yield item
                progress.update(done // 2, "pages")
            return
        step = 250
        chunks = [(start, min(start + step, len(articles))) for start in range(0, len(articles), step)]
        with workers.pool(jobs, shared=(articles, info, found)) as pool:
            done = 0
            for files in pool.map(_render_chunk, chunks):
                yield from files
                done += len(files) // 2
                progress.update(done, "pages")
    finally:
        progress.close()


def _render_chunk(bounds: tuple[int, int]) -> list[tuple[str, bytes]]:
    """In a worker of `_render_errors`: the pages of one slice of the shared articles."""
    articles, info, found = workers.given()
    return list(render.render_errors((joined(article, found) for article in articles[bounds[0] : bounds[1]]), info))


def content_schema(cache_dir: Path | None = None) -> dict:
    """`schema.curated_json_schema`, kept in `cache_dir` under a digest of the schema's code and
    pydantic's version: making it imports pydantic and builds the schema's classes, which a build whose content files are all cached (`content.ParsedFiles`) otherwise skips."""
    if cache_dir is not None:
        code = [find_spec("generator.schema").origin, package_version("pydantic")]
        path = kept(cache_dir, "schema", code)
        document = read_cache(path, dict)
        if document is None:
            document = content_schema()
            write_cache(path, pickle.dumps(document, protocol=5))
        return document
    from generator import schema

    return schema.curated_json_schema()


def browse_files(entries: tuple[ErrorEntry, ...], info: render.OutputInfo, cache_dir: Path | None = None) -> list[tuple[str, bytes]]:
    """`render.render_browse` of the entries alone, as a list, to be made in another process:
    the browse pages read no curated text and no ledger, and of the errors only what their
    entries hold (`render.Listed`). With `cache_dir`, pages whose context did not change since
    the last build are not rendered again (`PageMemo`)."""
    if cache_dir is None:
        return list(render.render_browse(entries, info))
    memo = PageMemo(kept(cache_dir, "browse", [render.templates_digest()]))
    files = list(render.render_browse(entries, info, listed=memo.render))
    memo.save()
    return files


def listed_files(
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    ledger: tuple[LedgerRecord, ...],
    info: render.OutputInfo,
    changes: tuple[Change, ...],
    revisions: tuple[str, ...] = (),
    cache_dir: Path | None = None,
    routes: Mapping | None = None,
) -> list[tuple[str, bytes]]:
    """`render.render_shared` of `derive.listed_errors`, but the browse pages (`browse_files`),
    as a list, to be made in another process: the same files as of the full articles, without
    waiting for them. `revisions` are the releases the ledger names, each with a page. With
    `cache_dir`, a release page whose changes did not change since the last build is not
    rendered again (`PageMemo`): a ledger of every release names 47,000 changes."""
    listed = derive.listed_errors(entries, curated, ledger, routes)
    if cache_dir is None:
        return list(render.render_shared(listed, info, changes, browse=False, revisions=revisions))
    memo = PageMemo(kept(cache_dir, "shared", [render.templates_digest()]))
    files = list(render.render_shared(listed, info, changes, listed=memo.render, browse=False, revisions=revisions))
    memo.save()
    return files


def family_files(families: Mapping[str, Family], by_id: Mapping[str, ErrorEntry], info: render.OutputInfo) -> list[tuple[str, bytes]]:
    """`render.render_families` of the errors each family explains, as a list, to be made in
    another process."""
    return list(render.render_families(family_members(families, by_id), info))


class PageMemo:
    """Pages by a digest of the context they were rendered from (templates are in the file's
    name), kept from one build to the next: some 600 browse pages, of which an upstream commit
    changes a few."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known = read_cache(path, dict) or {}
        self.used: dict[bytes, bytes] = {}

    def render(self, template, context: Mapping) -> bytes:
        key = hashlib.blake2b(pickle.dumps((template.name, context), protocol=5), digest_size=16).digest()
        page = self.known.get(key)
        if page is None:
            page = render.html_bytes(template.render(context))
        self.used[key] = page
        return page

    def save(self) -> None:
        # Only this build's pages are kept, so the file does not grow with history.
        if self.used.keys() != self.known.keys():
            write_cache(self.path, state_bytes(self.used))


def history_search_files(
    entries: tuple[ErrorEntry, ...],
    records: Mapping[str, LedgerRecord],
    versions: Mapping[str, Versions],
    texts: Mapping[str, str],
    printed: Mapping[str, tuple[str, ...]],
    repo: str,
    cache_dir: Path | None = None,
    blobs: Mapping[str, str] | None = None,
    classes: tuple = (),
    holds: Callable[[str, str | None], bool] | None = None,
) -> list[tuple[str, bytes | None]]:
    """The search index's files, sorted by path, of the errors raised now and of those no
    longer raised (`history.search_facts`), knowing the curated `printed` forms and what
    the ledger's `records` and their `versions` (digested as `texts`: `history.version_texts`)
    say: earlier wordings and places, retirement. Only the search index reads those: made
    here, in the index's own process, and not on the build's path (a ledger of every release
    holds 36,000 records). `classes` are upstream's exception classes
    (`model.Extraction.classes`).

    With `cache_dir` and the entries' `blobs` (path -> blob sha), the index's state stays in
    the cache between builds (`search.IndexState`), and only the errors with a site in a
    changed file, or whose versions or records changed, are indexed again; a file the output
    folder `holds` with the bytes it would have (`site_holds`) comes as None."""
    from generator import search

    if cache_dir is None or blobs is None:
        retired, known = search.Known.of_ledger(printed, history.ledger_facts(records, versions), versions)
        return sorted(search.search_files(entries + retired, repo, classes, known).items())
    # What the state keeps is made by the index, and from the ledger's messages and facts
    # (`content.printed_template`, `history.search_facts`).
    code = (search.__file__, content.__file__, history.__file__)
    state = read_state(cache_dir, "search", code, search.IndexState, partial(search.IndexState, repo))
    if state.repo != repo:
        state = search.IndexState(repo)
    files = state.update_ledger(entries, blobs, classes, printed, records, versions, texts, holds)
    write_state(cache_dir, "search", code, state)
    return sorted(files.items())
