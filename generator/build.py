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
import gc
import hashlib
import json
import operator
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import fields, replace
from functools import partial
from importlib.metadata import version as package_version
from importlib.util import find_spec
from pathlib import Path
from typing import TextIO

from generator import api, audit, derive, history, model, render
from generator.config import Config
from generator.errors import BuildError
from generator.files import read_cache, state_bytes, write_cache
from generator.highlight import Excerpts, Highlighting, excerpter_version, excerpts_of, site_excerpts
from generator.model import Article, Change, Curated, ErrorEntry, LedgerRecord, Problem, Related, Upstream, group_sites, record
from generator.pipeline import extract_upstream, extractor_version
from generator.progress import Progress
from generator.spare import make_later as make_spare_later, spare_of, wait as wait_for_spare
from generator.upstream import Source, open_source


@record
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


@record
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
    # The collector comes back once `_build`'s records are freed: its first pass walks every
    # object made since it went off that is still alive, which at `_build`'s end was 900,000
    # records (0.4 s); after, only what outlives the build.
    with without_cycle_collection():
        return _build(config, inputs, jobs)


def _build(config: Config, inputs: Inputs, jobs: int | None) -> BuildResult:
    with build_lock(inputs.out), ExitStack() as cleanup:
        source = open_source(inputs.source, config, inputs.cache_dir)
        stamp = BuildStamp(inputs, source)
        previous = stamp.previous()
        if previous is not None:
            return previous
        extraction = extract_upstream(source, inputs.cache_dir, jobs=jobs)
        entries = group_sites(extraction.sites, extraction.upstream.repo)
        # Related errors, then the search index, need only the entries: made on the other core
        # meanwhile. One after the other: at once, on two cores, they would slow this one too.
        blobs = {file.path: file.blob_sha for file in extraction.files}
        related, search = in_background(
            [partial(cached_related, entries, inputs.cache_dir, blobs), partial(search_files, entries, extraction.upstream.repo, inputs.cache_dir, blobs)],
            jobs,
            len(entries),
        )
        # So do the browse pages, which read only the entries, in a process of their own: they
        # take about as long as this one's work until the pages are written.
        info = render.SiteInfo(extraction.upstream, inputs.base_url, inputs.report_url)
        (browse,) = in_background([partial(browse_files, entries, info, inputs.cache_dir)], jobs, len(entries))
        # What each page was derived from at the last build: the entries that may have changed
        # since, and the files whose blobs did (None: no last build to compare with).
        manifest = PageManifest(inputs.cache_dir, inputs.out, info)
        state = read_cache(article_state_path(inputs.cache_dir), ArticleState) or ArticleState()
        changed, new_files = state.changed(manifest.salt, entries, blobs)
        # And what the excerpt cache lacks of those files is highlighted on every core from now
        # on: on a cold build, the costliest work, which now fills the time this process spends
        # alone.
        highlighting = Highlighting(source, entries, inputs.cache_dir)
        cleanup.callback(highlighting.close)
        highlighting.start(jobs, new_files)
        past = history.build_history(inputs.content, entries, extraction.upstream, blobs, state.codes_of(changed))
        pins = history.pinned_upstreams(past.records, extraction.upstream)
        written_here = load_content(inputs.content, extraction.upstream.repo, inputs.cache_dir)
        # Each evidence quote is found again at this revision, for the line its link names.
        curated = audit.located_evidence(history.carry_curated(written_here, past.records), source)
        by_id = {entry.id: entry for entry in entries}
        # Each error without an entry of its own shows the text of the family that claims it.
        families = family_texts(inputs.content, entries, curated, source, inputs.cache_dir)
        stale = stale_curated(curated, by_id, source, blobs, inputs.cache_dir)
        orphans = audit.content_orphans(inputs.content, by_id, past.records)
        # Home, recent changes and the API's index list errors by what needs no deriving
        # (`derive.listed_errors`): rendered in another process from now on, while this one
        # derives the articles and digests their pages; then, in that process, the bytes the
        # ledger and change list are written as once the site is in place.
        shared, history_files = in_background(
            [partial(listed_files, entries, curated, past.inactive, info, past.changes), partial(history.history_files, past.records, past.changes, past.lines)],
            jobs,
            len(entries),
        )
        # The server arguments a page names are explained on it, as upstream declares them.
        from generator.flags import server_arguments, settings_of

        settings = settings_of(server_arguments(source))
        site = derive_site(state, changed, extraction.upstream, entries, blobs, curated, past, inputs.cache_dir, related, manifest, stale, pins, settings, families)
        digests = site.digests
        hashes, spare = manifest.file_hashes(), manifest.spare_hashes()
        unchanged = manifest.unchanged(digests, hashes, spare)
        # Only the pages rendered again need their articles whole.
        articles = site.articles(digests.keys() - unchanged)
        found = page_excerpts(articles, highlighting, jobs)
        # Until the new tree is in place and described, no manifest: a build killed after the
        # swap must not leave one describing the tree before it.
        manifest.clear()
        stamp.clear()
        # Coverage counts what users can hit: errors of the product, not of SGLang's own tests.
        coverage = audit.coverage([e for e in entries if e.scope == "product"], (k for k in curated if k in by_id), families)
        files = site_files(articles, unchanged, info, [browse, search, shared, partial(render.render_families, family_members(families, by_id), info)], coverage, jobs, found, inputs.cache_dir)
        written = write_site(files, inputs.out, hashes, spare)
        manifest.save(digests, written.hashes, written.spare)
        if written.spare is None:
            # Made after this build, for the next one: see `generator.spare`.
            make_spare_later(inputs.out, manifest.path)
        history.save_history(inputs.content, past, extraction.upstream, history_files())
        result = BuildResult(
            out=inputs.out,
            upstream=extraction.upstream,
            errors=len(entries),
            curated=sum(1 for entry in entries if entry.id in curated),
            files=written.total,
            written=written.written,
            problems=extraction.problems,
            orphans=tuple(str(orphan) for orphan in orphans),
            stale=len(stale),
        )
        stamp.save(result)
    return result


@contextmanager
def without_cycle_collection():
    """Python's cycle collector off for the build, and in the processes it forks. A build makes
    millions of records, lists and tuples and frees them all at its end, and they hold no
    cycles; each collection the allocations triggered walked the records still alive: a fifth
    of a rebuild's time, for nothing to free. Peak memory stays the same (`bench/`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
        stored = read_cache(self.path, tuple)
        if stored is None or len(stored) != 2 or not isinstance(stored[1], BuildResult):
            return None
        digest, result = stored
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


def load_content(folder: Path, repo: str, cache_dir: Path | None = None) -> dict[str, Curated]:
    """Curated entries by id; `ContentError` listing every problem in `folder`."""
    from generator.content import load_curated

    return load_curated(folder, repo, cache_dir)


def family_texts(folder: Path, entries: tuple[ErrorEntry, ...], curated: Mapping[str, Curated], source: Source, cache_dir: Path | None = None) -> dict[str, model.Family]:
    """By id, the family each error without curated text shows (`families.family_of`), its
    evidence located at this revision; `ContentError` listing every problem of the family files."""
    from generator.content import load_families
    from generator.families import family_of

    found = load_families(folder, cache_dir, source.upstream.repo)
    if not found:
        return {}
    located = audit.located_evidence({family.name: family for family in found}, source)
    return family_of((located[family.name] for family in found), entries, curated)


def family_members(families: Mapping[str, model.Family], by_id: Mapping[str, ErrorEntry]) -> dict[str, tuple[model.Family, list[tuple[str, str]]]]:
    """For the family pages: by name, each family and the (id, title) of the errors it explains."""
    members: dict[str, tuple[model.Family, list[tuple[str, str]]]] = {}
    for error, family in sorted(families.items()):
        members.setdefault(family.name, (family, []))[1].append((error, by_id[error].title))
    return members


def article_state_path(cache_dir: Path) -> Path:
    return entries_state_path(cache_dir, "articles", derive.__file__)


def derive_site(
    state: ArticleState,
    changed: set[str],
    upstream: Upstream,
    entries: tuple[ErrorEntry, ...],
    blobs: Mapping[str, str],
    curated: Mapping[str, Curated],
    past: history.BuildHistory,
    cache_dir: Path,
    related: Callable[[], Mapping[str, tuple[str, ...]]],
    manifest: PageManifest,
    stale: Mapping[str, str] | None = None,
    pins: Mapping[str, Upstream] | None = None,
    settings: Mapping[str, model.Setting] | None = None,
    families: Mapping[str, model.Family] | None = None,
) -> DerivedSite:
    """Every article's page digest (`PageManifest.digests`), deriving again only the articles
    whose inputs changed since the last build (`state`, which found the `changed` entries, is
    saved in the cache); and the means to derive any article (`DerivedSite.articles`).
    `related` waits for the ranking: related ids by id. Articles come without snippets and
    docstrings: `joined` adds them to those whose pages are rendered."""
    ledger = past.inactive
    state.codes = {error: record.code for error, record in past.records.items() if record.status == "active" and record.code}
    site = DerivedSite(upstream, entries, curated, ledger, stale or {}, pins or {}, settings or {}, families or {})
    # Read from the changed entries before the ranking is asked for: it may still be under way
    # in the background meanwhile.
    site.read(changed)
    retitled, site.flags = state.update_entries(entries, changed, site.mentions)
    site.related = related()
    dirty = state.dirty(changed, retitled, curated, ledger, site.related, site.stale, site.pins, upstream, site.settings, site.families)
    digests = manifest.digests(site.articles(dirty), blobs)
    state.digests = {error: digests.get(error) or state.digests[error] for error in sorted(site.ids)}
    write_cache(article_state_path(cache_dir), state_bytes(state))
    site.digests = state.digests
    return site


class DerivedSite:
    """The inputs of every article of one build, and the articles derived from them so far:
    `articles` derives those of any ids, once each."""

    def __init__(
        self,
        upstream: Upstream,
        entries: tuple[ErrorEntry, ...],
        curated: Mapping[str, Curated],
        ledger: tuple[LedgerRecord, ...],
        stale: Mapping[str, str],
        pins: Mapping[str, Upstream],
        settings: Mapping[str, model.Setting] | None = None,
        families: Mapping[str, model.Family] | None = None,
    ) -> None:
        self.upstream, self.entries, self.curated, self.ledger = upstream, entries, curated, ledger
        self.stale, self.pins, self.settings, self.families = stale, pins, settings or {}, families or {}
        self.flags: frozenset[str] = frozenset()
        self.by_id = {entry.id: entry for entry in entries}
        self.ids = self.by_id.keys() | {record.id for record in ledger}
        self.related: Mapping[str, tuple[str, ...]] = {}
        self.digests: dict[str, str] = {}
        self.triggers: dict[str, str | None] = {}
        self.mentions: dict[str, derive.MentionParts] = {}
        self._made: dict[str, Article] = {}

    def read(self, ids: Iterable[str]) -> None:
        """Work out the triggers and mentions of the active errors among `ids`: what costs the
        most of an article."""
        for error in ids:
            entry = self.by_id.get(error)
            if entry is not None and error not in self.triggers:
                self.triggers[error] = derive.derive_trigger(entry.sites[0])
                self.mentions[error] = derive.mention_parts(entry.sites[0])

    def articles(self, ids: Iterable[str]) -> tuple[Article, ...]:
        """The articles of `ids` (each one of this build's), sorted by id."""
        wanted = set(ids)
        todo = wanted - self._made.keys()
        if todo:
            self.read(todo)
            made = derive.derive_articles(
                self.entries, self.curated, self.upstream, self.ledger, self.related, self.stale, self.pins,
                self.triggers, self.mentions, self.flags, todo, self.settings, self.families,
            )
            self._made.update((article.id, article) for article in made)
        return tuple(self._made[error] for error in sorted(wanted))


class ArticleState:
    """What each article was derived from at the last build, and its page's digest, kept in
    the cache between builds (like `derive.RelatedIndex`), so that a rebuild derives and
    digests only the articles whose inputs may have changed and keeps the others' digests.

    An active error's article is made from its entry, which changes only with the blob of one
    of its files (`model.changed_errors`); from its curated text or its family's; from its related ids, its
    pin, its aliases and its stale revision, compared as one string per id (`inputs`); from
    the titles of its related errors; and from the flags any message names
    (`derive.known_flags`), which reach only the errors whose conditions' names would be a flag
    that came or went. Inactive articles are few, and always derived. Everything a page depends
    on besides its article is in the manifest's salt: another salt, and everything is derived."""

    def __init__(self) -> None:
        self.salt = ""
        self.blobs: dict[str, str] | None = None
        # By id: its paths, joined by NUL, and its title.
        self.paths: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        # By id, only where there are some: the flags its message names, and those its
        # conditions' names would be (joined by NUL).
        self.named: dict[str, tuple[str, ...]] = {}
        self.candidates: dict[str, str] = {}
        self.inputs: dict[str, str] = {}
        self.curated: dict[str, Curated] = {}
        # By id, a digest of the family whose text its page shows.
        self.families: dict[str, str] = {}
        self.digests: dict[str, str] = {}
        # The ledger's code fingerprint of each active error (`history.code_fingerprint`).
        self.codes: dict[str, str] = {}

    def changed(self, salt: str, entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str]) -> tuple[set[str], set[str] | None]:
        """The ids whose entries may have changed since the last build, the entries being
        extracted from `blobs` (path -> blob sha) and their pages digested under the page
        manifest's `salt`, and the paths whose blobs changed; all of them (and None for the
        paths) when the state knows another salt, or nothing."""
        files = None
        if salt != self.salt or self.blobs is None:
            self.__init__()
            self.salt = salt
        else:
            files = {path for path, blob in blobs.items() if self.blobs.get(path) != blob}
        changed = model.changed_errors(self.paths, self.blobs or {}, entries, blobs)
        self.blobs = dict(blobs)
        return changed, files

    def codes_of(self, changed: set[str]) -> dict[str, str]:
        """The code fingerprints the last build's ledger gave the errors not `changed`: their
        sites, and the blobs of their files, are the same."""
        return {error: code for error, code in self.codes.items() if error not in changed}

    def update_entries(
        self, entries: tuple[ErrorEntry, ...], changed: set[str], mentions: Mapping[str, derive.MentionParts]
    ) -> tuple[set[str], frozenset[str]]:
        """Take in the entries whose ids are `changed`, with their first sites' `mentions`
        (`derive.mention_parts`, by id). Adds to `changed` the errors whose mentions change as
        a flag comes or goes; returns the ids whose title changed, and the flags known now."""
        before = frozenset(flag for flags in self.named.values() for flag in flags)
        titles = {}
        for error in changed:
            titles[error] = self.titles.pop(error, None)
            for kept in (self.paths, self.named, self.candidates):
                kept.pop(error, None)
        for entry in entries:
            if entry.id in changed:
                self.paths[entry.id] = "\0".join(site.path for site in entry.sites)
                self.titles[entry.id] = entry.title
                named, _, candidates = mentions[entry.id]
                if named:
                    self.named[entry.id] = named
                if candidates:
                    self.candidates[entry.id] = "\0".join(candidates)
        flags = frozenset(flag for flags in self.named.values() for flag in flags)
        retitled = {error for error, title in titles.items() if self.titles.get(error) != title}
        moved = flags ^ before
        if moved:
            changed.update(error for error, names in self.candidates.items() if not moved.isdisjoint(names.split("\0")))
        return retitled, flags

    def dirty(
        self,
        changed: set[str],
        retitled: set[str],
        curated: Mapping[str, Curated],
        ledger: tuple[LedgerRecord, ...],
        related: Mapping[str, tuple[str, ...]],
        stale: Mapping[str, str],
        pins: Mapping[str, Upstream],
        upstream: Upstream,
        settings: Mapping[str, model.Setting] | None = None,
        families: Mapping[str, model.Family] | None = None,
    ) -> set[str]:
        """The ids whose articles may differ from the last build's, given what `update_entries`
        found (`changed`, `retitled`); the state takes in the rest of this build's inputs."""
        inactive = {record.id for record in ledger}
        dirty = changed | inactive
        if retitled:
            dirty.update(error for error, others in related.items() if not retitled.isdisjoint(others))
        aliases = derive.aliases_of(ledger)
        # Each setting as a short digest: compared for every error on every build.
        keys = {name: hashlib.blake2b(repr(setting).encode(), digest_size=8).hexdigest() for name, setting in (settings or {}).items()}
        inputs = {
            error: "\0".join(
                (
                    " ".join(related.get(error, ())), *_upstream_fields(pins.get(error, upstream)), " ".join(aliases.get(error, ())), stale.get(error, ""),
                    # The settings its page may explain: those its message or conditions name.
                    *(keys[name] for name in (*self.named.get(error, ()), *self.candidates.get(error, "").split("\0")) if name in keys),
                )
            )
            for error in self.paths
        }
        dirty.update(error for error, text in inputs.items() if self.inputs.get(error) != text or error not in self.digests)
        dirty.update(error for error in curated.keys() | self.curated.keys() if curated.get(error) != self.curated.get(error))
        # Each family as a short digest, made once: the state is pickled without a memo, so a
        # record held by thousands of ids would be written thousands of times.
        texts: dict[str, str] = {}
        families = {
            error: texts.get(family.name) or texts.setdefault(family.name, hashlib.blake2b(repr(family).encode(), digest_size=8).hexdigest())
            for error, family in (families or {}).items()
        }
        dirty.update(error for error in families.keys() | self.families.keys() if families.get(error) != self.families.get(error))
        self.inputs, self.curated, self.families = inputs, dict(curated), families
        return dirty & (self.paths.keys() | inactive)


def page_excerpts(articles: tuple[Article, ...], highlighting: Highlighting, jobs: int | None) -> dict[str, Excerpts]:
    """The excerpts of the files the pages rendered again (`articles`) show, by path: read or
    highlighted only for those, since a rebuild renders few pages. The render workers join
    them to their articles (`joined`)."""
    paths = {location.site.path for article in articles for location in article.locations}
    if not paths:
        highlighting.close()
        return {}
    return excerpts_of(highlighting, paths, jobs)


def joined(article: Article, found: Mapping[str, Excerpts]) -> Article:
    """`article` with the snippets and docstrings of its sites, from its files' excerpts."""
    return derive.with_excerpts(article, site_excerpts(found, (location.site for location in article.locations)))


def cached_values(
    cache_dir: Path, name: str, code: Iterable[str], keys: Mapping[str, object], compute: Callable[[list[str]], Mapping[str, object]]
) -> dict[str, object]:
    """A value per id, computed (`compute`, given the ids to do) only for ids whose key the last
    build did not see: the values stay in the cache by key, under a digest of the `code` that
    computes them (module files, and version strings such as `extractor_version`). Keys are
    hashable records of everything else the value is computed from."""
    path = cache_dir / name / f"{code_digest(code)}.pickle"
    known = read_cache(path, dict) or {}
    missing = [error for error, key in keys.items() if key not in known]
    fresh = compute(missing) if missing else {}
    values, used = {}, {}
    for error, key in keys.items():
        value = fresh[error] if error in fresh else known[key]
        values[error] = used[key] = value
    # Only the keys of this build are kept, so the cache does not grow with history.
    if missing or len(used) != len(known):
        write_cache(path, state_bytes(used))
    return values


def code_digest(code: Iterable[str]) -> str:
    """A digest of the Python version and the `code` a cached value is made by: module files,
    and version strings such as `extractor_version`."""
    digest = hashlib.sha256(repr(sys.version_info[:2]).encode())
    for part in code:
        digest.update(Path(part).read_bytes() if part.endswith(".py") else part.encode())
    return digest.hexdigest()[:32]


def entries_state_path(cache_dir: Path, name: str, module: str) -> Path:
    """Where a state kept whole between builds and updated by changed blobs lives: under a
    digest of its `module`'s code and of what makes the entries it was made from (the model
    and the extractor), since an update trusts that unchanged blobs give unchanged entries."""
    return cache_dir / name / f"state-{code_digest([module, model.__file__, extractor_version()])}.pickle"


def stale_curated(curated: Mapping[str, Curated], by_id: Mapping[str, ErrorEntry], source: Source, blobs: Mapping[str, str], cache_dir: Path) -> dict[str, str]:
    """`audit.stale_revisions` of the entries not waiting for review, fingerprinting again (a
    parse of each file) only errors whose sites' places (`history.places`) are new."""
    written = {error: entry for error, entry in curated.items() if not entry.review}
    keys = {error: history.places(by_id[error].sites, blobs) for error in sorted(written) if error in by_id}
    current = cached_values(cache_dir, "fingerprints", [audit.__file__], keys, lambda ids: audit.fingerprints([by_id[i] for i in ids], source))
    return audit.stale_revisions(written, by_id, source, current)


def cached_related(entries: tuple[ErrorEntry, ...], cache_dir: Path, blobs: Mapping[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    """`derive.related_errors`, with the ranking's state kept in the cache between builds: with
    the entries' `blobs` (path -> blob sha), only the errors an upstream change can have moved
    are ranked again (`derive.RelatedIndex`); the same result as ranking every error."""
    path = entries_state_path(cache_dir, "related", derive.__file__)
    state = read_cache(path, derive.RelatedIndex) or derive.RelatedIndex()
    related = state.update(entries, blobs)
    write_cache(path, state_bytes(state))
    return related


# -- Render ---------------------------------------------------------------------------------------

# Set in the parent before the worker processes fork, so they render from the same articles
# without each one being pickled and sent.
_SHARED: tuple[tuple[Article, ...], render.SiteInfo, Mapping[str, Excerpts]] | None = None


def site_files(
    articles: tuple[Article, ...],
    unchanged: Iterable[str],
    info: render.SiteInfo,
    made: Iterable[Callable[[], Iterable[tuple[str, bytes]]]],
    coverage: audit.Coverage,
    jobs: int | None = None,
    found: Mapping[str, Excerpts] | None = None,
    cache_dir: Path | None = None,
) -> Iterator[tuple[str, bytes | None]]:
    """Every file of the site: the coverage pages, each error's page and document, then the
    browse and shared pages and the search index (`made` gives them, made elsewhere, in the
    order they are ready: `in_background`), so that the files made here are written while the
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


def content_schema(cache_dir: Path | None = None) -> dict:
    """`schema.curated_json_schema`, kept in `cache_dir` under a digest of the schema's code and
    pydantic's version: making it imports pydantic and builds the schema's classes (0.2 s),
    which a build whose content files are all cached (`content.ParsedFiles`) otherwise skips."""
    if cache_dir is not None:
        code = [find_spec("generator.schema").origin, package_version("pydantic")]
        path = cache_dir / "schema" / f"{code_digest(code)}.pickle"
        document = read_cache(path, dict)
        if document is None:
            document = content_schema()
            write_cache(path, pickle.dumps(document, protocol=5))
        return document
    from generator import schema

    return schema.curated_json_schema()


def browse_files(entries: tuple[ErrorEntry, ...], info: render.SiteInfo, cache_dir: Path | None = None) -> list[tuple[str, bytes]]:
    """`render.render_browse` of the entries alone, as a list, to be made in another process:
    the browse pages read no curated text and no ledger, and of the errors only what their
    entries hold (`render.Listed`). With `cache_dir`, pages whose context did not change since
    the last build are not rendered again (`PageMemo`)."""
    if cache_dir is None:
        return list(render.render_browse(entries, info))
    memo = PageMemo(cache_dir / "browse" / f"{render.templates_digest()}.pickle")
    files = list(render.render_browse(entries, info, listed=memo.render))
    memo.save()
    return files


def listed_files(
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    ledger: tuple[LedgerRecord, ...],
    info: render.SiteInfo,
    changes: tuple[Change, ...],
) -> list[tuple[str, bytes]]:
    """`render.render_shared` of `derive.listed_errors`, but the browse pages (`browse_files`),
    as a list, to be made in another process: the same files as of the full articles, without
    waiting for them."""
    listed = derive.listed_errors(entries, curated, ledger)
    return list(render.render_shared(listed, info, changes, browse=False))


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


def search_files(
    entries: tuple[ErrorEntry, ...], repo: str, cache_dir: Path | None = None, blobs: Mapping[str, str] | None = None
) -> list[tuple[str, bytes]]:
    """The search index's files, sorted by path. With `cache_dir` and the entries' `blobs`
    (path -> blob sha), the index's state stays in the cache between builds, and only the
    errors with a site in a changed file are indexed again (`search.IndexState`)."""
    from generator import search

    if cache_dir is None or blobs is None:
        return sorted(search.search_files(entries, repo).items())
    path = entries_state_path(cache_dir, "search", search.__file__)
    state = read_cache(path, search.IndexState)
    if state is None or state.repo != repo:
        state = search.IndexState(repo)
    files = state.update(entries, blobs)
    write_cache(path, state_bytes(state))
    return sorted(files.items())


class PageManifest:
    """What each error page was rendered from in the last build into `out`: a digest of its
    article per id, under a salt of everything else a page depends on (templates, renderer,
    highlighter, site settings). A page whose digest is unchanged is not rendered again.

    A page's sites, and its template and snippets and docstrings, which are read from its sites,
    enter the digest as where each site is: path, lines and the blob sha of its file. A site is
    a pure function of those and of the extractor, as a snippet is of its site and the
    highlighter (both in the salt); pickling 28,000 sites would cost more than the rest of
    the digest. So the digest can be made before snippets are read (`page_excerpts`, `joined`). The
    build's own revision is in neither: a page names the revision its article is pinned to.
    """

    def __init__(self, cache_dir: Path, out: Path, info: render.SiteInfo) -> None:
        key = hashlib.sha256(str(out.absolute()).encode()).hexdigest()[:16]
        self.path = cache_dir / "pages" / f"{key}.json"
        self.out = out
        salt = hashlib.sha256(render.templates_digest().encode())
        salt.update(excerpter_version().encode())
        salt.update(extractor_version().encode())
        for module in (api, derive, model, sys.modules[__name__]):
            salt.update(Path(module.__file__).read_bytes())
        salt.update(pickle.dumps((info.upstream.repo, info.base_url, info.report_url)))
        self.salt = salt.hexdigest()
        self._fallback = info.upstream
        self._record: dict | None = None
        self._read: tuple[int, int, int] | None = None

    def _last(self) -> dict:
        """The last build's record, read once; empty when there is none or it is unreadable."""
        if self._record is None:
            self._read = self._file()
            try:
                record = json.loads(self.path.read_bytes())
                self._record = record if isinstance(record, dict) else {}
            except (OSError, ValueError):
                self._record = {}
        return self._record

    def _file(self) -> tuple[int, int, int] | None:
        """Which file the record is, to tell whether it was replaced since it was read."""
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return found.st_ino, found.st_size, found.st_mtime_ns

    def digests(self, articles: tuple[Article, ...], blobs: Mapping[str, str]) -> dict[str, str]:
        digests = {}
        for article in articles:
            places = history.places((location.site for location in article.locations), blobs)
            upstream = _upstream_fields(article.upstream or self._fallback)
            payload = pickle.dumps((places, _digested(article), tuple(map(_related_fields, article.related)), upstream), protocol=5)
            digests[article.id] = hashlib.sha256(payload).hexdigest()[:32]
        return digests

    def unchanged(self, digests: Mapping[str, str], hashes: Mapping[str, str] | None = None, spare: Mapping[str, str] | None = None) -> frozenset[str]:
        """Ids whose page and document the output folder already holds as this build would
        write them. Given the digests of the site's files (`file_hashes`) and of the spare
        tree's (`spare_hashes`), a file the spare holds as the site does is not looked for in
        the site: that tree, brought up to date, becomes the new site (`write_site`)."""
        previous = self._last()
        if previous.get("salt") != self.salt or not isinstance(previous.get("pages"), dict):
            return frozenset()
        pages = previous["pages"]
        hashes = hashes or {}
        kept = spare if _reuses_spare(self.out, hashes, spare) else {}
        # Plain strings: pathlib's objects cost more than the 54,000 stat calls themselves.
        out = str(self.out)

        def held(relative: str) -> bool:
            digest = hashes.get(relative)
            return (digest is not None and kept.get(relative) == digest) or os.path.isfile(f"{out}/{relative}")

        return frozenset(
            error
            for error, digest in digests.items()
            if pages.get(error) == digest and held(f"errors/{error}/index.html") and held(f"api/errors/{error}.json")
        )

    def file_hashes(self) -> dict[str, str]:
        """The digest of every file the last build wrote into `out`, by path."""
        record = self._last()
        if record.get("file_digest") != FILE_DIGEST:
            return {}
        try:
            return dict(record["files"])
        except (KeyError, TypeError, ValueError):
            return {}

    def spare_hashes(self) -> dict[str, str] | None:
        """The digest of every file of the spare tree the last build kept (`spare_of`), by path;
        None when there is none, or the folder there is not the one the last build left. Waits
        for a spare still being made (`generator.spare`), then reads the manifest again if that
        process replaced it with one describing its spare."""
        wait_for_spare(self.out)
        # A spare process describes the spare it made in a new record: read that one (6 MB of
        # JSON, 0.1 s) only if the record was replaced since it was read.
        if self._record is not None and self._file() != self._read:
            self._record = None
        try:
            record = self._last()
            if record.get("file_digest") != FILE_DIGEST:
                return None
            files, spare = record["files"], record["spare"]
            folder = os.stat(spare_of(self.out.absolute()))
            if spare is None or spare["folder"] != [folder.st_dev, folder.st_ino]:
                return None
            hashes = {**files, **spare["differs"]}
            for path in spare["absent"]:
                del hashes[path]
            return hashes
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self._record = {}

    def save(self, digests: Mapping[str, str], hashes: Mapping[str, str], spare: Mapping[str, str] | None = None) -> None:
        """Record this build's pages and files, and the spare tree as what differs from them."""
        record = {"salt": self.salt, "pages": digests, "file_digest": FILE_DIGEST, "files": hashes, "spare": None}
        try:
            folder = os.stat(spare_of(self.out.absolute())) if spare is not None else None
        except OSError:
            folder = None
        if spare is not None and folder is not None:
            record["spare"] = {
                "folder": [folder.st_dev, folder.st_ino],
                "differs": {path: digest for path, digest in spare.items() if hashes.get(path) != digest},
                "absent": sorted(hashes.keys() - spare.keys()),
            }
        write_cache(self.path, json.dumps(record, sort_keys=True).encode())


# Every field of an article but those read from its sites (see `PageManifest`), and those
# digested as plain tuples of their fields: pickling 130,000 records one by one costs more.
_digested = operator.attrgetter(
    *(field.name for field in fields(Article) if field.name not in ("locations", "template", "upstream", "related"))
)
_related_fields = operator.attrgetter(*(field.name for field in fields(Related)))
_upstream_fields = operator.attrgetter(*(field.name for field in fields(Upstream)))


def _render_errors(
    articles: tuple[Article, ...], info: render.SiteInfo, jobs: int | None, found: Mapping[str, Excerpts]
) -> Iterator[tuple[str, bytes]]:
    """Each article's page and document, joined to its excerpts from `found`, on every core."""
    global _SHARED
    jobs = jobs or os.cpu_count() or 1
    progress = Progress("render", len(articles))
    if jobs == 1 or len(articles) < 200 or not _can_fork():
        for done, item in enumerate(render.render_errors((joined(article, found) for article in articles), info), 1):
            yield item
            progress.update(done // 2, "pages")
        progress.close()
        return
    _SHARED = (articles, info, found)
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
    articles, info, found = _SHARED
    return list(render.render_errors((joined(article, found) for article in articles[bounds[0] : bounds[1]]), info))


# The tasks a background process runs, set in the parent just before it forks.
_BACKGROUND: tuple[Callable[[], object], ...] = ()


def in_background(tasks: Sequence[Callable[[], object]], jobs: int | None, size: int) -> list[Callable[[], object]]:
    """Start `tasks` one after the other in a forked process, which inherits the records they
    read instead of receiving them pickled; returns, per task, a function that waits for its
    result. With one job, no fork, or little work (`size` records), each task runs when its
    result is asked for."""
    global _BACKGROUND
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or size < 1000 or not _can_fork():
        return list(tasks)
    import multiprocessing

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    _BACKGROUND = tuple(tasks)
    try:
        # A fork pool starts its one process inside the first submit, while the tasks are set.
        futures = [pool.submit(_run_background, number) for number in range(len(tasks))]
    finally:
        _BACKGROUND = ()

    def waiting(future: Future) -> Callable[[], object]:
        def result() -> object:
            try:
                return future.result()
            finally:
                if all(other.done() for other in futures):
                    pool.shutdown()

        return result

    return [waiting(future) for future in futures]


def _run_background(number: int) -> object:
    return _BACKGROUND[number]()


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


# -- Write ----------------------------------------------------------------------------------------


# The lock file of the build this process runs (`build_lock`), while it holds the lock.
_LOCK: TextIO | None = None


@contextmanager
def build_lock(out: Path):
    """Hold `.<out>.lock` beside the output folder for the whole build; a second build fails
    at once with a one-line error instead of mixing its files with the first one's."""
    global _LOCK
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
        _LOCK = handle
        yield
    finally:
        _LOCK = None
        handle.close()


def _lock_not_inherited() -> None:
    """In a process forked during a build, close its copy of the lock's file: the lock stays
    the build's, which holds its own, and ends with it. A worker still at its task when the
    build is killed would otherwise keep the lock, and the next build would fail."""
    global _LOCK
    if _LOCK is not None:
        _LOCK.close()
        _LOCK = None


os.register_at_fork(after_in_child=_lock_not_inherited)


@record
class Written:
    """What `write_site` did: the files of the new site, how many of them changed bytes, the
    digest of each by path, and the digests of the tree it kept as the spare (None: none kept)."""

    total: int
    written: int
    hashes: dict[str, str]
    spare: dict[str, str] | None


def write_site(
    files: Iterable[tuple[str, bytes | None]],
    out: Path,
    previous: Mapping[str, str] | None = None,
    spare: Mapping[str, str] | None = None,
) -> Written:
    """Write every file into a tree beside `out`, then swap it in.

    `previous` holds the digests of the files of the site now in `out`, by path; `spare` those
    of the tree the last build kept beside it (`spare_of`). With both, that tree is brought up
    to date, replacing only the files that differ, and swapped in: a rebuild then costs what
    changed, not 27,000 new folders. Otherwise a new tree is made. Either way the site that was
    in `out` is kept as the next spare when `previous` describes it.

    A file whose bytes equal the current site's is a hard link to it (same bytes, same mtime),
    and so is a file given as None; a file whose bytes changed is a new file. Without
    `previous`, telling an unchanged file costs a read of the old one.
    """
    out = out.absolute()
    wait_for_spare(out)
    # Leftovers of a build that was killed: never part of any site.
    for stale in [*out.parent.glob(f".{out.name}.tmp-*"), *out.parent.glob(f".{out.name}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    kept = spare_of(out)
    reuse = _reuses_spare(out, previous, spare)
    try:
        if reuse:
            tree = kept
        else:
            if os.path.lexists(kept):
                _discard(kept, out)
            tree = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as error:
        raise BuildError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    writer = _TreeWriter(str(tree), str(out), previous or {}, spare if reuse else {})

    def abandon() -> None:
        if not reuse:
            shutil.rmtree(tree, ignore_errors=True)
            return
        try:
            _discard(tree, out)
        except OSError:
            # A folder nothing can be renamed in: the half-updated spare stays where it is,
            # and no manifest describes it, so the next build does not trust it.
            pass

    try:
        for relative, data in files:
            writer.put(relative, data)
        writer.remove_the_rest()
        os.chmod(tree, 0o755)
        old = _swap(tree, out)
    except OSError as error:
        # A full disk, a read-only folder: the previous site is still whole, and this is not a bug.
        abandon()
        where = f": {error.filename}" if error.filename else ""
        raise BuildError(f"{out}: cannot write the site ({error.strerror}{where}); the previous site is unchanged") from None
    except BaseException:
        abandon()
        raise
    total, written, hashes = writer.total, writer.written, writer.hashes
    if old is None:
        return Written(total, written, hashes, None)
    try:
        if not previous:
            # Nothing describes the old site: not worth keeping. Renamed first, since it may
            # sit at the staging name, which a tree being written has.
            _discard(old, out)
            return Written(total, written, hashes, None)
        if old != kept:
            os.replace(old, kept)
    except OSError:
        _remove_in_background(old)
        return Written(total, written, hashes, None)
    return Written(total, written, hashes, dict(previous))


def _reuses_spare(out: Path, previous: Mapping[str, str] | None, spare: Mapping[str, str] | None) -> bool:
    """Whether `write_site` brings the spare tree up to date, given the digests of the site's
    files (`previous`) and of the spare's (`spare`), rather than making a new tree."""
    kept = spare_of(out)
    return bool(previous) and spare is not None and kept.is_dir() and not kept.is_symlink() and out.is_dir()


class _TreeWriter:
    """Puts one file after another into `root` (a new folder, or the spare tree), linking to
    the current site in `old` what did not change. Plain strings and os calls: a site has
    57,000 files in 27,000 folders, and pathlib's objects cost more than the links themselves.

    A file already in `root` is never written into: it may be the very inode the current site
    serves. It is replaced by a new file or a new link instead."""

    def __init__(self, root: str, old: str, previous: Mapping[str, str], spare: Mapping[str, str]) -> None:
        self.root, self.old, self.previous, self.spare = root, old, previous, spare
        # No site yet (a first build): nothing to compare with or link to.
        self._old_site = os.path.isdir(old)
        self.hashes: dict[str, str] = {}
        self.total = self.written = 0
        self._made = {root}

    def put(self, relative: str, data: bytes | None) -> None:
        self.total += 1
        current = self.previous.get(relative)
        old = f"{self.old}/{relative}"
        if data is None:
            digest = current if current is not None else _file_digest(old)
            same = True
        else:
            digest = file_digest(data)
            same = digest == current if self.previous else self._old_site and _same_bytes(old, data)
        self.hashes[relative] = digest
        if same and current is not None and self.spare.get(relative) == current:
            # The spare's file is the current site's own (both were linked to one inode).
            return
        target = f"{self.root}/{relative}"
        self._folder(target.rpartition("/")[0])
        if same and self._link(old, target):
            return
        if data is None:
            raise BuildError(f"{old}: the previous build's file vanished during the build")
        self._replace(target, partial(_write_new, target, data))
        self.written += 1

    def remove_the_rest(self) -> None:
        """Remove what the spare tree has and this site does not, and the folders left empty."""
        for relative in sorted(self.spare.keys() - self.hashes.keys()):
            path = f"{self.root}/{relative}"
            try:
                os.unlink(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue  # gone already, now a folder of this site's, or under a file of its
            folder = path.rpartition("/")[0]
            while folder != self.root:
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = folder.rpartition("/")[0]

    def _link(self, old: str, target: str) -> bool:
        try:
            self._replace(target, partial(os.link, old, target))
            return True
        except FileNotFoundError:
            return False

    def _replace(self, target: str, make: Callable[[], object]) -> None:
        try:
            make()
        except FileExistsError:
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.unlink(target)
            make()

    def _folder(self, folder: str) -> None:
        if folder in self._made:
            return
        try:
            if folder.rpartition("/")[0] in self._made:
                os.mkdir(folder)  # one new folder in a known one: one call, 27,000 times
            else:
                os.makedirs(folder, exist_ok=True)
        except FileExistsError:
            if not os.path.isdir(folder):
                self._clear_way(folder)
        except NotADirectoryError:
            self._clear_way(folder)
        self._made.add(folder)

    def _clear_way(self, folder: str) -> None:
        """A file of the spare tree stands where this site has a folder: remove it."""
        parts = folder[len(self.root) + 1 :].split("/")
        for count in range(1, len(parts) + 1):
            prefix = "/".join([self.root, *parts[:count]])
            if os.path.islink(prefix) or os.path.isfile(prefix):
                os.unlink(prefix)
        os.makedirs(folder, exist_ok=True)


def _write_new(target: str, data: bytes) -> None:
    with open(target, "xb") as handle:
        handle.write(data)


# What `file_digest` is, as the page manifest records it: digests made another way are not
# compared with this build's (the old files are read instead).
FILE_DIGEST = "sha256/32"


def file_digest(data: bytes) -> str:
    """A site file's digest: sha256, which runs in hardware here, 1.5 times blake2b's speed
    over the 500 MB a cold build writes."""
    return hashlib.sha256(data).hexdigest()[:32]


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return file_digest(handle.read())
    except OSError as error:
        raise BuildError(f"{path}: the previous build's file vanished during the build ({error.strerror})") from None


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        if os.stat(path).st_size != len(data):
            return False
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False


def _swap(tree: Path, out: Path) -> Path | None:
    """Put `tree` at `out`; returns where the site that was there is now (None: there was
    none). Where the system can, both folders trade places in one step; elsewhere the old one
    is moved aside first, and a reader may find no site for that instant."""
    if not out.exists():
        os.replace(tree, out)
        return None
    if not out.is_dir():
        raise BuildError(f"{out}: exists and is not a folder")
    if _exchange(tree, out):
        return tree
    retired = _aside(out, out)
    try:
        os.replace(tree, out)
    except OSError:
        os.replace(retired, out)
        raise
    return retired


def _exchange(first: Path, second: Path) -> bool:
    """Swap two folders atomically (Linux's `renameat2` with RENAME_EXCHANGE); False where the
    C library or the file system cannot."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _discard(folder: Path, out: Path) -> None:
    """Move `folder` out of the way at once and delete it in the background; if that never
    finishes, the next build into `out` clears it."""
    _remove_in_background(_aside(folder, out))


def _aside(folder: Path, out: Path) -> Path:
    """Rename `folder` to a new `.<out>.old-*` name beside `out`, which builds clear; returns it."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(retired)
    os.replace(folder, retired)
    return retired


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
