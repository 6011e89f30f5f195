"""Derive: the articles of a build, each error's page as data, derived again only where its
inputs changed since the last build.

`derive_all` works out every article's page digest from the state the last build left
(`ArticleState`), deriving only the articles whose entry, curated text, related errors, pin,
aliases or named flags changed; `DerivedArticles.articles` derives any others on demand.
The related-errors ranking (`cached_related`) and the staleness of curated entries
(`stale_curated`) are kept in the cache the same way. Snippets and docstrings are joined only
to the articles whose pages are rendered (`page_excerpts`, `joined`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from generator import audit, callgraph, derive, history, model, workers
from generator.cache import BlobState, cached_values, read_state, uncached, write_state
from generator.highlight import Excerpts, Highlighting, excerpts_of, site_excerpts
from generator.model import Article, Curated, ErrorEntry, LedgerRecord, Upstream
from generator.plan import PageManifest, _upstream_fields
from generator.upstream import ReadSource, Source


def load_content(folder: Path, repo: str, cache_dir: Path | None = None) -> dict[str, Curated]:
    """Curated entries by id; `ContentError` listing every problem in `folder`."""
    from generator.content import load_curated

    return load_curated(folder, repo, cache_dir)


def family_texts(
    folder: Path,
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    source: Source,
    cache_dir: Path | None = None,
    blobs: Mapping[str, str] | None = None,
) -> dict[str, model.Family]:
    """By id, the family each error without curated text shows (`families.assign`), its
    evidence located at this revision; `ContentError` listing every problem of the family files.
    With `cache_dir` and the entries' `blobs`, which errors each family claims is kept between
    builds (`families.FamilyState`)."""
    from generator import families
    from generator.content import load_families

    found = load_families(folder, cache_dir, source.upstream.repo)
    if not found:
        return {}
    located = audit.located_evidence({family.name: family for family in found}, source, cache_dir, "family-evidence")
    found = [located[family.name] for family in found]
    claimed = None
    if cache_dir is not None and blobs is not None:
        state = read_state(cache_dir, "families", families.__file__, families.FamilyState, families.FamilyState)
        claimed = state.update(found, entries, blobs)
        write_state(cache_dir, "families", families.__file__, state)
    return families.assign(found, entries, curated, claimed).by_error


def family_members(families: Mapping[str, model.Family], by_id: Mapping[str, ErrorEntry]) -> dict[str, tuple[model.Family, list[tuple[str, str]]]]:
    """For the family pages: by name, each family and the (id, title) of the errors it explains."""
    members: dict[str, tuple[model.Family, list[tuple[str, str]]]] = {}
    for error, family in sorted(families.items()):
        members.setdefault(family.name, (family, []))[1].append((error, by_id[error].title))
    return members


def derive_all(
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
    settings: model.Servers | None = None,
    families: Mapping[str, model.Family] | None = None,
    versions: Mapping[str, model.Versions] | None = None,
    routes: callgraph.Routes | None = None,
) -> DerivedArticles:
    """Every article's page digest (`PageManifest.digests`), deriving again only the articles
    whose inputs changed since the last build (`state`, which found the `changed` entries, is
    saved in the cache); and the means to derive any article (`DerivedArticles.articles`).
    `related` waits for the ranking: related ids by id. Articles come without snippets and
    docstrings: `joined` adds them to those whose pages are rendered."""
    ledger = past.inactive
    state.codes = {error: record.code for error, record in past.records.items() if record.status == "active" and record.code}
    made = DerivedArticles(upstream, entries, curated, ledger, stale or {}, pins or {}, settings, families or {}, versions or {}, routes)
    # Read from the changed entries before the ranking is asked for: it may still be under way
    # in the background meanwhile.
    made.read(changed)
    retitled, made.flags = state.update_entries(entries, changed, made.mentions)
    made.related = related()
    # Each id's versions as text: kept with the ledger for the ids this build did not change.
    texts = past.version_texts or {error: history.versions_text(found) for error, found in made.versions.items()}
    dirty = state.dirty(changed, retitled, curated, ledger, made.related, made.stale, made.pins, upstream, made.settings, made.families, texts, route_keys(entries, made.routes))
    digests = manifest.digests(made.articles(dirty), blobs)
    state.digests = {error: digests.get(error) or state.digests[error] for error in sorted(made.ids)}
    write_state(cache_dir, "articles", derive.__file__, state)
    made.digests = state.digests
    return made


def route_keys(entries: tuple[ErrorEntry, ...], routes: callgraph.Routes | None) -> dict[str, tuple[str, tuple[str, ...]]]:
    """By id, the keys of the routes of its sites (`callgraph.Routes.key`), what its page says of
    its phase and callers, and the flags their tests may name (whose settings the page shows)."""
    if routes is None:
        return {}
    return {
        entry.id: (
            " ".join(routes.key((site.path, site.function)) for site in entry.sites),
            routes.flags_of(entry.sites),
        )
        for entry in entries
    }


class DerivedArticles:
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
        settings: model.Servers | None = None,
        families: Mapping[str, model.Family] | None = None,
        versions: Mapping[str, model.Versions] | None = None,
        routes: callgraph.Routes | None = None,
    ) -> None:
        self.upstream, self.entries, self.curated, self.ledger = upstream, entries, curated, ledger
        self.stale, self.pins, self.settings, self.families = stale, pins, settings or model.Servers({}), families or {}
        self.versions, self.routes = versions or {}, routes
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
        flags = {id(server): frozenset(server) for server in (self.settings.main, self.settings.diffusion)}
        for error in ids:
            entry = self.by_id.get(error)
            if entry is not None and error not in self.triggers:
                self.triggers[error] = derive.derive_trigger(entry.sites, flags[id(self.settings.of(entry.sites[0].path))])
                self.mentions[error] = derive.mention_parts(entry.sites[0])

    def articles(self, ids: Iterable[str]) -> tuple[Article, ...]:
        """The articles of `ids` (each one of this build's), sorted by id."""
        wanted = set(ids)
        todo = wanted - self._made.keys()
        if todo:
            self.read(todo)
            made = derive.derive_articles(
                self.entries, self.curated, self.upstream, self.ledger, self.related, self.stale, self.pins,
                self.triggers, self.mentions, self.flags, todo, self.settings, self.families, self.versions, self.routes,
            )
            self._made.update((article.id, article) for article in made)
        return tuple(self._made[error] for error in sorted(wanted))


class ArticleState(BlobState):
    """What each article was derived from at the last build, and its page's digest, kept in
    the cache between builds (like `derive.RelatedIndex`), so that a rebuild derives and
    digests only the articles whose inputs may have changed and keeps the others' digests.

    An active error's article is made from its entry, which changes only with the blob of one
    of its files (`model.changed_errors`); from its curated text or its family's; from its related ids, its
    pin, its aliases and its stale revision, compared as one string per id (`inputs`); from
    the titles of its related errors; and from the flags any message names
    (`derive.known_flags`), which reach only the errors whose conditions' names would be a flag
    that came or went. An inactive article is made from its ledger record, its pin and the titles
    of the ids it points to, compared as one string too. Everything a page depends
    on besides its article is in the manifest's salt: another salt, and everything is derived."""

    @classmethod
    def kept(cls, cache_dir: Path) -> ArticleState:
        """The state the last build left in the cache, or an empty one."""
        return read_state(cache_dir, "articles", derive.__file__, cls, cls)

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
        before = self.blobs
        changed = self.since(entries, blobs) if salt == self.salt else None
        if changed is None:
            self.__init__()
            self.salt, self.blobs = salt, dict(blobs)
            return {entry.id for entry in entries}, None
        return changed, {path for path, blob in blobs.items() if before.get(path) != blob}

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
        settings: model.Servers | None = None,
        families: Mapping[str, model.Family] | None = None,
        versions: Mapping[str, str] | None = None,
        routes: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
    ) -> set[str]:
        """The ids whose articles may differ from the last build's, given what `update_entries`
        found (`changed`, `retitled`); the state takes in the rest of this build's inputs.
        `versions` are the texts of each error's versions (`history.version_texts`), `routes`
        the keys of each error's routes (`route_keys`)."""
        inactive = {record.id for record in ledger}
        versions = versions or {}
        dirty = set(changed)
        if retitled:
            dirty.update(error for error, others in related.items() if not retitled.isdisjoint(others))
        aliases = derive.aliases_of(ledger)
        # Each setting as a short digest: compared for every error on every build.
        settings = settings or model.Servers({})
        servers = {
            id(server): {name: hashlib.blake2b(repr(setting).encode(), digest_size=8).hexdigest() for name, setting in server.items()}
            for server in (settings.main, settings.diffusion)
        }
        # Each pin's fields once: 27,000 ids share a few dozen pins.
        pinned = {id(pin): "\0".join(_upstream_fields(pin)) for pin in {id(p): p for p in (*pins.values(), upstream)}.values()}
        routes = routes or {}
        inputs = {
            error: "\0".join(
                (
                    " ".join(related.get(error, ())), pinned[id(pins.get(error, upstream))], " ".join(aliases.get(error, ())), stale.get(error, ""),
                    versions.get(error, ""), route[0],
                    # The settings its page may explain: those its message, conditions or callers' tests name.
                    *(keys[name] for name in (*self.named.get(error, ()), *self.candidates.get(error, "").split("\0"), *route[1]) if name in keys),
                )
            )
            for error, paths in self.paths.items()
            for keys, route in ((servers[id(settings.of(paths.partition("\0")[0]))], routes.get(error, ("", ()))),)
        }
        # An inactive article is made from its record, its pin and the titles of the ids it
        # points to: a history of every release holds thousands, derived again only when one
        # of those changed.
        for record in ledger:
            targets = (record.moved_to,) if record.status == "moved" and record.moved_to else record.split_into
            inputs[record.id] = "\0".join(
                (repr(record), versions.get(record.id, ""), pinned[id(pins.get(record.id, upstream))], *(self.titles.get(t) or t for t in targets))
            )
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


def stale_curated(
    curated: Mapping[str, Curated], by_id: Mapping[str, ErrorEntry], source: Source, blobs: Mapping[str, str], cache_dir: Path, jobs: int | None = None
) -> Callable[[], dict[str, str]]:
    """A function giving `audit.stale_revisions` of the entries not waiting for review,
    fingerprinting again (a parse of each file) only errors whose sites' places
    (`history.places`) are new. That parse, of every curated file in a cold build (3 s), runs
    in another process from now on, off the build's own path; entries carried to a reworded
    id wait for review, so `curated` may be the entries as loaded, before carrying."""
    written = {error: entry for error, entry in curated.items() if not entry.review}
    keys = {error: history.places(by_id[error].sites, blobs) for error in sorted(written) if error in by_id}
    missing = uncached(cache_dir, "fingerprints", [audit.__file__], keys)
    files = ReadSource(source, {site.path for error in missing for site in by_id[error].sites})

    def stale() -> dict[str, str]:
        current = cached_values(cache_dir, "fingerprints", [audit.__file__], keys, lambda ids: audit.fingerprints([by_id[i] for i in ids], files))
        return audit.stale_revisions(written, by_id, files, current)

    if not missing:
        return stale
    (found,) = workers.background([stale], jobs, len(by_id))
    return found


def cached_related(entries: tuple[ErrorEntry, ...], cache_dir: Path, blobs: Mapping[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    """`derive.related_errors`, with the ranking's state kept in the cache between builds: with
    the entries' `blobs` (path -> blob sha), only the errors an upstream change can have moved
    are ranked again (`derive.RelatedIndex`); the same result as ranking every error."""
    state = read_state(cache_dir, "related", derive.__file__, derive.RelatedIndex, derive.RelatedIndex)
    related = state.update(entries, blobs)
    write_state(cache_dir, "related", derive.__file__, state)
    return related
