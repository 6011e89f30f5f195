"""Articles to pages: typed template contexts, Jinja2 with autoescape, Markdown with raw HTML off.

Nothing here touches the disk except reading templates; `render_errors`, `render_shared`,
`render_browse` and `render_coverage` yield (path, bytes) pairs for `generator.pages`. Every string from upstream or `content/` reaches the HTML escaped:
through Jinja's autoescape, through markdown-it with `html` off and a link filter, or through
Pygments, which escapes what it highlights.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
import re
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict

import jinja2
import pygments
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markupsafe import Markup, escape
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from generator import api
from generator.derive import describe_condition
from generator.content import printed_template
from generator.model import PHASES, Article, Callers, Change, Evidence, Family, ListedError, Location, Placeholder, Site, Template, Upstream, Versions, place_releases, release_name

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
# Snippets shown in full on a page; further locations are listed with their links.
SNIPPETS_SHOWN = 3
TITLE_LIMIT = 160


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """What every page's head and footer need beyond its own article."""

    upstream: Upstream
    base_url: str
    report_url: str


# -- Markdown -----------------------------------------------------------------------------------

_SAFE_SCHEME = re.compile(r"^(?:https?:|[^:/?#]*(?:[/?#]|$))", re.IGNORECASE)


def _safe_link(url: str) -> bool:
    """Only http, https and relative links; `javascript:`, `data:` and the rest are refused."""
    cleaned = "".join(ch for ch in url if ch > " ").lower()
    return _SAFE_SCHEME.match(cleaned) is not None


def markdown_renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _safe_link
    return md


_MARKDOWN = markdown_renderer()


# A family's text is shown on thousands of pages: each text is rendered once per process.
@functools.lru_cache(maxsize=8192)
def markdown(text: str | None) -> Markup:
    """Curated or derived Markdown as safe HTML: raw HTML shown as text, unsafe links dropped."""
    if not text:
        return Markup("")
    return Markup(_MARKDOWN.render(_clean(text)))


# The characters `urllib.parse.quote` leaves as they are in a path.
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~/-]*")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def derived_markdown(text: str | None) -> Markup:
    """The Markdown `derive.derive_trigger` writes (paragraphs, one bullet list, code spans) as
    HTML, the same as `markdown` gives for it but ten times faster; the tests hold the two
    equal on every real trigger's shape."""
    if not text:
        return Markup("")
    blocks = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        if all(line.startswith("- ") for line in lines):
            items = "".join(f"<li>{_inline(line[2:])}</li>\n" for line in lines)
            blocks.append(f"<ul>\n{items}</ul>\n")
        else:
            blocks.append(f"<p>{_inline(block)}</p>\n")
    return Markup("".join(blocks))


def _inline(text: str) -> str:
    out, position = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(escapeHtml(text[position : match.start()]))
        code = match[2]
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(f"<code>{escapeHtml(code)}</code>")
        position = match.end()
    out.append(escapeHtml(text[position:]))
    return "".join(out)


def _clean(text: str) -> str:
    """NUL and other C0 controls (but tab and newline) become U+FFFD, as HTML would."""
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "\ufffd", text)


# -- Typed contexts ----------------------------------------------------------------------------


class Page(TypedDict):
    """What base.html needs on every page."""

    root: str
    path: str
    title: str
    description: str
    canonical: str
    repo: str
    upstream: Upstream | None
    report_url: str
    json_url: str | None


class TitlePart(TypedDict):
    text: str
    placeholder: bool
    # A part only some paths add (`Placeholder.optional`): its own parts, shown in brackets.
    optional: list["TitlePart"]


class CallerView(TypedDict):
    path: str
    # The lines of the calls: several when one function calls it more than once under the
    # same tests, by the same callers.
    lines: tuple[int, ...]
    function: str
    # The tests around the call in its function, in words (Markdown made HTML).
    when: Markup
    callers: list["CallerView"]
    more: int


class LocationView(TypedDict):
    path: str
    line: int
    function: str
    url: str
    conditions: tuple[str, ...]
    snippet: Markup | None
    docstring: str | None
    module_url: str
    # When SGLang raises it there (a `PHASES` value, or None without the call graph), and the
    # callers of its function, with how many more there are.
    phase: str | None
    callers: list[CallerView]
    more_callers: int


class ErrorPage(Page):
    article: Article
    heading: list[TitlePart]
    # Whether the message has a part only some paths add, which the page explains.
    optional_parts: bool
    locations: list[LocationView]
    more_locations: list[LocationView]
    explanation: Markup
    solutions: list[tuple[str, Markup]]
    example_before: Markup | None
    example_after: Markup | None
    reproduced_with: str | None
    trigger: Markup
    family_trigger: Markup | None
    situations: list[Markup]
    evidence: list[tuple[str, Evidence]]
    reports: list[str]
    setting_urls: dict[str, str]
    docstring: str | None
    related: list[tuple[str, str]]
    moved_to: tuple[str, str] | None
    scaffold: str
    exception_url: str
    # Where to look upstream when nothing is written: its issues searched for the error, and
    # where upstream's own messages send a report.
    issues_search_url: str
    report_url_upstream: str
    # The curated printed forms, each as `heading` is.
    printed: list[list[TitlePart]]
    # For an error no longer raised: the code that last raised it, at the release that did,
    # and the release that stopped raising it (name, page), for its "What to do".
    last_code_url: str | None
    retired_release: tuple[str, str] | None
    # The releases that raised it, in words ("" without a ledger), and its earlier wordings:
    # each as `heading` is, with the releases that raised it.
    raised_by: list[tuple[str, str | None]]
    wordings: list[tuple[list[TitlePart], str]]
    # Where earlier releases raised it: (`path:line`, function, the releases), oldest first,
    # then the place it is raised now, since when (empty when it never moved).
    places: list[tuple[str, str, str]]
    places_since: str
    # When SGLang raises it, in words, for a product error (else ""), and what that means for
    # what to do when nothing is written.
    phase_text: str
    phase_advice: str


class FamilyPage(Page):
    family: Family
    explanation: Markup
    trigger: Markup | None
    solutions: list[tuple[str, Markup]]
    situations: list[Markup]
    example_before: Markup | None
    example_after: Markup | None
    evidence: list[tuple[str, Evidence]]
    members: list[tuple[str, str]]


class FamiliesPage(Page):
    families: list[tuple[str, str, int]]


class ListPage(Page):
    heading: str
    intro: str
    crumbs: list[tuple[str, str]]
    folders: list[tuple[str, str, int]]
    groups: list[tuple[str, list[tuple[str, str, str]]]]


class HomePage(Page):
    counts: dict[str, int]
    curated: list[tuple[str, str]]
    # The exception types users meet most, as ways in: (url, name, product errors raising it).
    exception_types: list[tuple[str, str, int]]
    # The phases, and the errors only SGLang's own code raises, as ways in (`phase_counts`).
    phases: list[tuple[str, str, str, int]]


class ChangesPage(Page):
    # Each release, newest first: (url, release name, date, its count of each kind of change).
    releases: list[tuple[str, str, str, dict[str, int]]]


class ReleasePage(Page):
    release: str
    revision: str
    date: str
    # Its changes by kind, in CHANGE_KINDS order: (kind, [(change, title)]).
    groups: list[tuple[str, list[tuple[Change, str]]]]


# The kinds of change a release page lists, in this order.
CHANGE_KINDS = ("added", "reworded", "moved", "retired", "rekeyed", "split")


def releases_of(changes: Iterable[Change], revisions: Iterable[str] = ()) -> list[tuple[str, str, str, list[Change]]]:
    """The changes by release, newest first (releases in version order, then commits by date):
    (release name, revision, date, its changes by kind and id); `revisions` adds the releases
    the ledger names that changed nothing (the first one read, a re-release)."""
    from generator.upstream import version_key

    grouped: dict[str, list[Change]] = {revision: [] for revision in revisions}
    for change in changes:
        grouped.setdefault(change.revision, []).append(change)
    dated = {revision: max((c.date for c in found), default="") for revision, found in grouped.items()}
    ordered = sorted(grouped, key=lambda revision: (version_key(release_name(revision)), dated[revision], revision), reverse=True)
    return [(release_name(revision), revision, dated[revision], sorted(grouped[revision], key=lambda c: (c.change, c.id))) for revision in ordered]


class CoverageRow(TypedDict):
    module: str
    curated: int
    total: int
    percent: str


class CoveragePage(Page):
    curated: int
    family: int
    total: int
    percent: str
    modules: list[CoverageRow]


# -- Rendering ---------------------------------------------------------------------------------


def environment(templates: Path = TEMPLATES) -> jinja2.Environment:
    """The pages' Jinja environment: one per process for each state of the templates, so a
    template is compiled once per process, not once per chunk of pages a worker renders
    (7 s of a cold build's CPU at 110 chunks), and `errorkb serve` still sees an edit."""
    return _environment(templates, templates_digest(templates))


@functools.lru_cache(maxsize=4)
def _environment(templates: Path, digest: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # A build renders 27,000 pages from templates that do not change meanwhile: no stat
        # of each one per page to see whether it did.
        auto_reload=False,
    )


def templates_digest(templates: Path = TEMPLATES) -> str:
    """Changes with any page template and with this module (static files are copied, not
    rendered, so they do not count)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(templates.rglob("*.html")):
        if path.is_file():
            digest.update(path.relative_to(templates).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _root(path: str) -> str:
    """The relative prefix from a page at `path` (e.g. `errors/x/index.html`) to the site root."""
    depth = path.count("/")
    return "../" * depth


def _page(path: str, info: OutputInfo, title: str, description: str, json_url: str | None = None, revision: bool = True) -> Page:
    """What base.html needs; with `revision` False, a page whose footer names no revision (see
    `_listing`)."""
    url = path[: -len("index.html")] if path.endswith("index.html") else path
    return Page(
        root=_root(path),
        path=path,
        title=title,
        description=description,
        canonical=info.base_url.rstrip("/") + "/" + url,
        repo=info.upstream.repo,
        upstream=info.upstream if revision else None,
        report_url=info.report_url,
        json_url=json_url,
    )


def _listing(path: str, info: OutputInfo, title: str, description: str) -> Page:
    """A browse page's: its footer names no revision, so that the page changes only when the
    errors it lists do, not on every upstream commit (a static host or rsync then uploads a
    commit's few changed lists, not all 600). Each error it links to names its own."""
    return _page(path, info, title, description, revision=False)


@functools.lru_cache(maxsize=1 << 17)
def shorten(text: str, limit: int = TITLE_LIMIT) -> str:
    """`text` on one line, cut at a word boundary with an ellipsis when longer than `limit`.
    Kept by text: the browse pages shorten each of 27,000 titles twice."""
    text = " ".join(_clean(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[:limit]) + "\u2026"


def heading_parts(article: Article) -> list[TitlePart]:
    if article.template is None:
        return [TitlePart(text=_clean(article.title), placeholder=False, optional=[])]
    return template_parts(article.template)


def template_parts(template: Template) -> list[TitlePart]:
    """A template as the page shows it: literal text, and placeholders marked as such; a part
    only some paths add (written `{[...]}` in a template's text) with its own parts, which the
    page shows in brackets."""
    return [_title_part(part) for part in template.parts]


def _title_part(part: str | Placeholder) -> TitlePart:
    if isinstance(part, Placeholder) and part.optional:
        return TitlePart(text="", placeholder=False, optional=template_parts(printed_template(part.expr)))
    return TitlePart(text=_clean(part.render() if isinstance(part, Placeholder) else part), placeholder=isinstance(part, Placeholder), optional=[])


def shown_text(template: Template) -> str:
    """A template's text as a page's title shows it: a part only some paths add in brackets,
    not in the `{[...]}` a template's text writes."""
    return "".join(
        (f"[{part.expr}]" if part.optional else part.render()) if isinstance(part, Placeholder) else part for part in template.parts
    )


def has_optional(parts: list[TitlePart]) -> bool:
    return any(part["optional"] for part in parts)


def _location_view(location: Location, root: str, flags: frozenset[str] = frozenset()) -> LocationView:
    site = location.site
    lines = None
    if location.snippet is not None:
        # Joined here rather than looped over in the template: a page has up to 60 lines of
        # code and this is the costliest part of rendering it. The HTML is Pygments' (escaped).
        start = location.snippet.start
        lines = Markup(
            "".join(
                f'<span class="row{" hit" if site.line <= start + offset <= site.end_line else ""}">'
                f'<span class="ln" aria-hidden="true">{start + offset}</span>{html}\n</span>'
                for offset, html in enumerate(location.snippet.html)
            )
        )
    return LocationView(
        path=site.path,
        line=site.line,
        function=site.function,
        url=location.url,
        conditions=site.conditions,
        snippet=lines,
        docstring=location.docstring,
        module_url=f"{root}modules/{posixpath.dirname(site.path)}/",
        phase=location.route.phase if location.route else None,
        callers=_caller_views(location.route.callers, flags) if location.route else [],
        more_callers=location.route.callers.more if location.route else 0,
    )


@functools.lru_cache(maxsize=1 << 14)
def _when(conditions: tuple[str, ...], flags: frozenset[str]) -> Markup:
    """A call's tests in words, as HTML: the same for every error raised below that call,
    and the pages of one function's errors list the same callers."""
    return Markup(_inline(" and ".join(describe_condition(condition, flags) for condition in conditions)))


def _caller_views(callers: Callers, flags: frozenset[str] = frozenset()) -> list[CallerView]:
    """The callers as a page lists them, each call's tests in words, the settings among them
    that are the server's `flags` named by their flag. Calls from one function under the same
    tests and by the same callers are one item with their lines (a constructor calling it
    for four layers is one caller, not four identical trees)."""
    views: dict[tuple, CallerView] = {}
    for node in callers.nodes:
        # The same tests and the same callers (a tuple of tuples) read the same.
        key = (node.path, node.function, node.conditions, node.callers)
        found = views.get(key)
        if found is None:
            views[key] = CallerView(
                path=node.path, lines=(node.line,), function=node.function, when=_when(node.conditions, flags),
                callers=_caller_views(node.callers, flags), more=node.callers.more,
            )
        elif node.line not in found["lines"]:
            found["lines"] += (node.line,)
    return list(views.values())


@functools.lru_cache(maxsize=2048)
def highlight_code(code: str, language: str) -> Markup:
    try:
        lexer = get_lexer_by_name(language or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    return Markup(pygments.highlight(_clean(code), lexer, HtmlFormatter(nowrap=True)))


def error_page(article: Article, info: OutputInfo) -> ErrorPage:
    path = f"errors/{article.id}/index.html"
    root = _root(path)
    curated = article.curated
    # The text shown: the error's own entry, else its family's (`Article.family`).
    text = curated or article.family
    kind = {"raise": "raised", "assert": "assertion", "warning": "warning"}.get(article.kind, article.kind)
    title = shown_text(article.template) if article.template is not None else article.title
    description = f"{article.exception or 'Error'} ({kind}) in SGLang: {shorten(title, 120)}"
    page = _page(path, info, shorten(title, 70) + " \u2014 SGLang error", description, f"{root}api/errors/{article.id}.json")
    # The revision this error's code last changed at, not the build's: the page stays the
    # same, byte for byte, until its own code changes.
    page["upstream"] = article.upstream or info.upstream
    # The page's settings are the server's flags its message, conditions and callers name.
    flags = frozenset(setting.name for setting in article.settings)
    views = [_location_view(location, root, flags) for location in article.locations]
    first_doc = next((location.docstring for location in article.locations if location.docstring), None)
    moved_to = None
    if article.status == "moved" and article.record and article.record.moved_to:
        target = article.record.moved_to
        moved_to = (f"{root}errors/{target}/", next((r.title for r in article.related if r.id == target), target))
    heading = heading_parts(article)
    return ErrorPage(
        **page,
        article=article,
        heading=heading,
        optional_parts=has_optional(heading),
        locations=views[:SNIPPETS_SHOWN],
        more_locations=views[SNIPPETS_SHOWN:],
        explanation=markdown(text.explanation if text else None),
        solutions=[(solution.title, markdown(solution.body)) for solution in text.solutions] if text else [],
        example_before=highlight_code(text.example_fix.before, text.example_fix.language) if text and text.example_fix else None,
        example_after=highlight_code(text.example_fix.after, text.example_fix.language) if text and text.example_fix else None,
        reproduced_with=curated.example_fix.reproduced_with if curated and curated.example_fix else None,
        trigger=markdown(article.trigger) if article.trigger_curated else derived_markdown(article.trigger),
        family_trigger=markdown(article.family.trigger) if article.family and article.family.trigger else None,
        situations=[markdown(situation) for situation in text.situations] if text else [],
        evidence=[(article.upstream.url(e.path, e.line), e) for e in text.evidence] if text else [],
        reports=list(text.reports) if text else [],
        setting_urls={setting.name: article.upstream.url(setting.path, setting.line) for setting in article.settings},
        docstring=first_doc,
        related=[(f"{root}errors/{related.id}/", shorten(related.title)) for related in article.related],
        moved_to=moved_to,
        scaffold=f"errorkb scaffold {article.id}",
        exception_url=f"{root}exceptions/{exception_slug(article.exception)}/",
        printed=[template_parts(printed_template(form)) for form in curated.printed] if curated else [],
        raised_by=raised_by(article.versions, article.status, root),
        places=earlier_places(article),
        places_since=release_name(article.versions.places[0].first) if article.versions and article.versions.places and article.versions.places[0].first else "",
        wordings=[(template_parts(printed_template(w.message)), w.releases) for w in article.versions.wordings] if article.versions else [],
        issues_search_url=issues_search_url(article, page["upstream"].repo),
        phase_text=PHASE_TEXTS[article.phase] if article.phase and article.scope == "product" else "",
        phase_advice=phase_advice(article),
        report_url_upstream=f"https://github.com/{page['upstream'].repo}/issues/new/choose",
        last_code_url=article.upstream.url(article.record.path, article.record.line) if article.status == "retired" and article.upstream and article.record and article.record.path else None,
        retired_release=release_link(article.record.retired_in, root) if article.status == "retired" and article.record and article.record.retired_in else None,
    )


def phase_advice(article: Article) -> str:
    """What the phase of an error without a written fix says to do, in a sentence or two."""
    if article.scope != "product" or article.phase is None:
        return ""
    # An assert while the arguments are resolved that tests the server's flags is a check of
    # the command line (`assert view.mamba_track_interval >= view.speculative_num_draft_tokens`),
    # not an internal one: it gets the launch advice.
    flags_checked = article.phase == "launch" and bool(article.settings)
    if article.kind == "assert" and not flags_checked or article.phase == "serving":
        return (
            "An internal check failed"
            + (" while SGLang was serving" if article.phase == "serving" else "")
            + ": this usually means a bug in SGLang, or a combination of features it does not support together. "
            "Try again without the optional features you turned on, one at a time, to find the one involved."
        )
    if article.phase == "launch":
        said = "SGLang raises it while it resolves its arguments at start-up, before any model is loaded: the command line or environment asks for something this setup does not allow. "
        if article.settings:
            return said + "The flags involved are listed above with upstream's help, default and choices: change the one this check is about."
        variables = [name for name in article.mentions if not name.startswith("--")]
        return said + (
            "No server flag appears in its message, its conditions or its callers' conditions: it checks this machine "
            "(its hardware, drivers, installed packages or files)"
            + (f" and the environment variables {', '.join(variables)}." if len(variables) > 1 else f" and the environment variable {variables[0]}." if variables else ".")
        )
    return {
        "load": "SGLang raises it while it loads the model: its config, weights, tokenizer or quantization, "
        "or while it sizes memory pools and captures CUDA graphs.",
        "request": "SGLang raises it while it checks one request: that request fails with an error response and the "
        "server goes on. Change what the request asks for, as the conditions below say.",
        "tool": "A command-line tool, benchmark or SGLang's client-side language raises it, not the server: check "
        "the command you ran and its arguments.",
        "unreachable": "No path from SGLang's entry points reaches the function that raises it, as far as a static "
        "reading of its code sees: it is reached through a registry, a plugin or getattr, by your own code calling "
        "SGLang's, or not at all.",
    }[article.phase]


def raised_by(versions: Versions | None, status: str, root: str) -> list[tuple[str, str | None]]:
    """The releases that raised an error, in words, each release linked to its page: "since
    0.4.3" while the newest build raises it (a page does not name the newest release, so that it
    stays the same across builds), "0.4.3 to 0.5.18; not raised since 0.5.19" for one no longer
    raised. Empty without a ledger."""
    if versions is None:
        return []
    if status == "active" or versions.last is None:
        return [("Raised by SGLang since ", None), release_link(versions.first, root), (".", None)]
    parts = [("Raised by SGLang ", None), release_link(versions.first, root)]
    if versions.last != versions.first:
        parts += [(" to ", None), release_link(versions.last, root)]
    if versions.retired_in:
        parts += [("; not raised since ", None), release_link(versions.retired_in, root)]
    return parts + [(".", None)]


def release_link(revision: str, root: str) -> tuple[str, str]:
    """A release by its name, with its page's address from a page at `root`."""
    name = release_name(revision)
    return name, f"{root}releases/{name}/"


def earlier_places(article: Article) -> list[tuple[str, str, str]]:
    """Where earlier releases raised an error, oldest first, and where it is raised now since
    its last move; empty for one that never moved (or a ledger that does not know)."""
    versions = article.versions
    if versions is None or not versions.places or not (article.locations or article.status == "retired"):
        return []
    places = [
        (f"{p.path}:{p.line}", p.function, f"SGLang {place_releases(p)}" if p.last else (f"SGLang {release_name(p.first)} until" if p.first else "until") + f" it moved in {release_name(p.moved_in)}")
        for p in versions.places
    ]
    if not article.locations:
        return places  # no longer raised: the last place is in the notice above
    site = article.locations[0].site
    return places + [(f"{site.path}:{site.line}", site.function, f"since {release_name(versions.here_since)} (above)")]


def issues_search_url(article: Article, repo: str) -> str:
    """Upstream's issues searched for what a user would have in hand: the longest literal
    piece of the message as a phrase, else the assert's condition, else the raising
    function's name with the exception."""
    literal = ""
    if article.template is not None:
        pieces = (" ".join(part.split()).strip(" .,:;'\"()[]{}") for part in article.template.parts if isinstance(part, str))
        literal = max(pieces, key=len, default="")
    site = article.locations[0].site if article.locations else None
    # An error no longer raised has no location, only the place the ledger kept.
    function = site.function if site is not None else article.record.function if article.record else ""
    if len(literal) >= 12:
        query = f'"{_phrase(literal)}"'
    elif site is not None and site.assert_condition:
        query = f'"{_phrase(site.assert_condition)}"'
    elif function:
        # A method's own name, or its class's for a constructor or another special method.
        owner, _, name = function.rpartition(".")
        name = owner.rpartition(".")[2] if name.startswith("__") and owner else name
        query = " ".join(filter(None, (name, article.exception)))
    else:
        query = " ".join(filter(None, (literal, article.exception))) or article.id
    return f"https://github.com/{repo}/issues?q=" + urllib.parse.quote_plus(f"is:issue {query}")


def _phrase(text: str, limit: int = 100) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters: a phrase a
    search box takes whole."""
    text = " ".join(text.replace('"', " ").split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0]


def pygments_css() -> bytes:
    """Highlighting colours for light and dark schemes, both with readable contrast."""
    # xcode: every token colour keeps 4.5:1 contrast on the code and marked-line backgrounds
    # (axe's color-contrast rule failed on "default" there).
    light = HtmlFormatter(style="xcode").get_style_defs(".highlight")
    dark = HtmlFormatter(style="github-dark").get_style_defs(".highlight")
    # Only token colours: backgrounds and line numbers come from the site's own stylesheet.
    light, dark = (
        "\n".join(line for line in css.splitlines() if line.startswith(".highlight .") and "{ background" not in line)
        for css in (light, dark)
    )
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n".encode()


def exception_slug(exception: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", exception or "unknown") or "unknown"


class Listed(Protocol):
    """What a list of errors reads of one: an `Article`, or for the errors raised now their
    `ErrorEntry` (always active), from which the browse pages are rendered without deriving
    27,000 articles first."""

    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def exception(self) -> str | None: ...
    @property
    def sites(self) -> tuple[Site, ...]: ...


def _entry_link(article: Listed, root: str) -> tuple[str, str, str]:
    sites = article.sites
    where = f"{sites[0].path}:{sites[0].line}" if sites else ""
    return (f"{root}errors/{article.id}/", shorten(article.title), where)


def _module_folders(articles: Iterable[Listed]) -> tuple[dict[str, list[Listed]], dict[str, set[str]], dict[str, set[str]]]:
    """The active errors of each file, and of each folder (by id) with its subfolders."""
    # An error is listed under every file that raises it, since each of its pages' locations
    # links to its file's folder; a folder counts each error once.
    by_file: dict[str, list[Listed]] = defaultdict(list)
    for article in articles:
        if article.status == "active":
            for path in dict.fromkeys(site.path for site in article.sites):
                by_file[path].append(article)
    under: dict[str, set[str]] = defaultdict(set)
    children: dict[str, set[str]] = defaultdict(set)
    for path, members in by_file.items():
        folder = posixpath.dirname(path)
        while True:
            under[folder].update(article.id for article in members)
            parent = posixpath.dirname(folder)
            if parent == folder:
                break
            children[parent].add(folder)
            folder = parent
    return by_file, under, children


def _module_path(folder: str) -> str:
    return f"modules/{folder}/index.html" if folder else "modules/index.html"


def module_pages(articles: Sequence[Listed], info: OutputInfo) -> Iterator[tuple[str, ListPage]]:
    """A page per folder of upstream holding errors: its subfolders with counts, then its
    files' errors. The root folder's page is the module index."""
    by_file, under, children = _module_folders(articles)
    files_in: dict[str, list[str]] = defaultdict(list)
    for path in by_file:
        files_in[posixpath.dirname(path)].append(path)
    counts = Counter({folder: len(ids) for folder, ids in under.items()})
    for folder in sorted(counts):
        path = _module_path(folder)
        root = _root(path)
        total = counts[folder]
        crumbs, parts = [], folder.split("/") if folder else []
        for depth in range(len(parts)):
            crumbs.append((f"{root}modules/{'/'.join(parts[: depth + 1])}/", parts[depth]))
        title = f"Errors in {folder}/" if folder else "Errors by module"
        page = _listing(path, info, title, f"{total} SGLang errors raised under {folder or 'the source tree'}.")
        yield path, ListPage(
            **page,
            heading=title,
            intro=f"{total} errors in this folder and below.",
            crumbs=[(f"{root}modules/", "modules")] + crumbs,
            folders=[(f"{root}modules/{child}/", posixpath.basename(child) + "/", counts[child]) for child in sorted(children[folder])],
            groups=[
                (posixpath.basename(file), [_entry_link(article, root) for article in sorted(by_file[file], key=lambda a: (a.sites[0].line, a.id))])
                for file in sorted(files_in.get(folder, ()))
            ],
        )


def _raised_types(articles: Iterable[Listed]) -> dict[str, list[Listed]]:
    by_type: dict[str, list[Listed]] = defaultdict(list)
    for article in articles:
        if article.status == "active":
            by_type[article.exception or "unknown"].append(article)
    return by_type


def _gone_types(articles: Iterable[Listed], raised: Collection[str]) -> dict[str, list[Listed]]:
    """Exception types only errors no longer raised had: a retired or reworded error's page
    links its exception type too, even when no error raises that type any more."""
    gone: dict[str, list[Listed]] = defaultdict(list)
    for article in articles:
        if article.status != "active" and (article.exception or "unknown") not in raised:
            gone[article.exception or "unknown"].append(article)
    return gone


def top_exception_types(active: Sequence[Article | ListedError], count: int = 12) -> list[tuple[str, str, int]]:
    """The `count` exception types most product errors raise, most first (ties by name): the
    url of each one's browse page, its name and how many."""
    raised = Counter(a.exception for a in active if a.exception and a.scope == "product")
    ranked = sorted(raised.items(), key=lambda item: (-item[1], item[0]))[:count]
    return [(f"exceptions/{exception_slug(name)}/", name, number) for name, number in ranked]


def _exception_path(name: str) -> str:
    return f"exceptions/{exception_slug(name)}/index.html"


def exception_pages(articles: Sequence[Listed], info: OutputInfo) -> Iterator[tuple[str, ListPage]]:
    """The index of the exception types raised, with counts, and a page per type listing its
    errors."""
    by_type = _raised_types(articles)
    path = "exceptions/index.html"
    page = _listing(path, info, "Errors by exception type", f"SGLang errors grouped by exception type: {len(by_type)} types.")
    yield path, ListPage(
        **page,
        heading="Errors by exception type",
        intro=f"{len(by_type)} exception types.",
        crumbs=[],
        folders=[(f"{exception_slug(name)}/", name, len(members)) for name, members in sorted(by_type.items(), key=lambda item: (-len(item[1]), item[0]))],
        groups=[],
    )
    for name, members in sorted(by_type.items()):
        path = _exception_path(name)
        root = _root(path)
        page = _listing(path, info, f"{name} errors", f"{len(members)} SGLang errors that raise {name}.")
        yield path, _by_folder(page, f"{name}", f"{len(members)} errors raise {name}.", [(f"{root}exceptions/", "exception types")], members, root)


def _by_folder(page: Page, heading: str, intro: str, crumbs: list[tuple[str, str]], members: Iterable[Listed], root: str) -> ListPage:
    """A list page of errors grouped by the folder of their first site, each group by id."""
    by_module: dict[str, list[Listed]] = defaultdict(list)
    for article in members:
        by_module[posixpath.dirname(article.sites[0].path)].append(article)
    groups = [(module, [_entry_link(a, root) for a in sorted(group, key=lambda a: a.id)]) for module, group in sorted(by_module.items())]
    return ListPage(**page, heading=heading, intro=intro, crumbs=crumbs, folders=[], groups=groups)


def gone_exception_pages(articles: Sequence[Listed], info: OutputInfo) -> Iterator[tuple[str, ListPage]]:
    """A page per exception type that only errors no longer raised had (`_gone_types`)."""
    for name, members in sorted(_gone_types(articles, _raised_types(articles)).items()):
        path = _exception_path(name)
        root = _root(path)
        page = _listing(path, info, f"{name} errors", f"SGLang no longer raises {name}; {len(members)} errors did.")
        yield path, ListPage(
            **page,
            heading=f"{name}",
            intro=f"No error raises {name} at this revision; {len(members)} errors did before.",
            crumbs=[(f"{root}exceptions/", "exception types")],
            folders=[],
            groups=[("no longer raised", [_entry_link(a, root) for a in sorted(members, key=lambda a: a.id)])],
        )


# Each phase in words, as the home page and the phase pages say it.
PHASE_TEXTS = {
    "launch": "at launch: argument and environment resolution at start-up",
    "load": "while loading: model config, weights, tokenizer, quantization, memory pools, CUDA graphs",
    "request": "on a request: validating one client request, which gets an error response while the server goes on",
    "serving": "while serving: scheduler, workers, kernels, communication",
    "tool": "in a tool: command-line utilities, benchmarks, the client-side language",
    "unreachable": "unreached: no path a static reading sees from SGLang's entry points (start-up, the model loader, the HTTP handlers, the scheduler, its tools) reaches it",
}
SCOPE_TEXTS = {"test": "SGLang's own tests", "benchmark": "SGLang's benchmark scripts", "example": "SGLang's examples"}


def _phase_groups(active: Sequence[Article | ListedError]) -> dict[str, list]:
    """The errors raised now by phase for the product's, by scope for the others' (each
    error's scope read once: it is worked out from its sites)."""
    groups: dict[str, list] = defaultdict(list)
    for article in active:
        scope = article.scope
        key = article.phase if scope == "product" else scope
        if key:
            groups[key].append(article)
    return groups


def phase_counts(groups: Mapping[str, list]) -> list[tuple[str, str, str, int]]:
    """The phases of the product's errors raised now, as ways in: (url, phase, its words, how
    many), in `PHASES` order; then the errors only SGLang's own tests, benchmarks or examples
    raise, as (url, scope, its words, how many). `groups` are `_phase_groups` of the errors."""
    return [(f"phases/{p}/", p, PHASE_TEXTS[p], len(groups[p])) for p in PHASES if groups.get(p)] + [
        (f"scopes/{scope}/", scope, SCOPE_TEXTS[scope], len(groups[scope])) for scope in SCOPE_TEXTS if groups.get(scope)
    ]


def phase_pages(groups: Mapping[str, list], info: OutputInfo) -> Iterator[tuple[str, ListPage]]:
    """The index of phases, and a page per phase listing the product's errors raised then, by
    folder; a page per scope for the errors only SGLang's own tests, benchmarks or examples
    raise. `groups` are `_phase_groups` of the errors raised now."""
    path = "phases/index.html"
    page = _listing(path, info, "Errors by phase", "SGLang errors by when in SGLang's life they are raised.")
    yield path, ListPage(
        **page,
        heading="Errors by phase",
        intro="When in SGLang's life each error is raised, read from a static call graph of its code from its entry points "
        "(argument resolution, the model loader, the HTTP handlers, the scheduler loop). Errors raised only by SGLang's own "
        "tests, benchmarks and examples are listed apart.",
        crumbs=[],
        folders=[(f"../{url}", f"{name}: {words}", number) for url, name, words, number in phase_counts(groups)],
        groups=[],
    )
    for name in (*PHASES, *SCOPE_TEXTS):
        members = groups.get(name)
        if not members:
            continue
        kind = "phases" if name in PHASES else "scopes"
        path = f"{kind}/{name}/index.html"
        root = _root(path)
        words = PHASE_TEXTS[name] if kind == "phases" else f"raised only by {SCOPE_TEXTS[name]}"
        page = _listing(path, info, f"SGLang errors {words.partition(':')[0]}", f"{len(members)} SGLang errors {words}.")
        yield path, _by_folder(page, f"Errors {words.partition(':')[0]}", f"{len(members)} errors {words}.", [(f"{root}phases/", "phases")], members, root)


def render_errors(articles, info: OutputInfo, env: jinja2.Environment | None = None) -> Iterator[tuple[str, bytes]]:
    """Each article's page and API document."""
    env = env or environment()
    error_template = env.get_template("error.html")
    for article in articles:
        context = error_page(article, info)
        yield context["path"], html_bytes(error_template.render(context))
        yield f"api/errors/{article.id}.json", api.dumps(api.error_document(article, article.upstream or info.upstream))


def html_bytes(html: str) -> bytes:
    """A page's bytes. NUL can come from upstream text in places no filter sees (a docstring,
    a path); HTML parsers turn it into U+FFFD, so the page says so itself."""
    return html.replace("\0", "\ufffd").encode("utf-8")


def render_browse(
    articles: Sequence[Listed],
    info: OutputInfo,
    env: jinja2.Environment | None = None,
    listed: Callable[[jinja2.Template, ListPage], bytes] | None = None,
) -> Iterator[tuple[str, bytes]]:
    """The browse pages of the errors raised: a page per folder (`module_pages`) and per
    exception type (`exception_pages`). They read only the active errors' ids, titles and
    sites (`Listed`): they can be rendered from the entries alone, before the ledger is read. `listed`
    renders a page from its template and context (see `render_shared`)."""
    env = env or environment()
    listed = listed or _listed
    template = env.get_template("list.html")
    for path, context in [*module_pages(articles, info), *exception_pages(articles, info)]:
        yield path, listed(template, context)


def browse_paths(articles: Sequence[Listed]) -> set[str]:
    """The paths of every browse page: those `render_browse` renders, and the pages of the
    exception types only errors no longer raised had."""
    # The folders `_module_folders` lists, without the errors under each.
    folders: set[str] = set()
    for path in {site.path for article in articles if article.status == "active" for site in article.sites}:
        folder = posixpath.dirname(path)
        while folder not in folders:
            folders.add(folder)
            folder = posixpath.dirname(folder)
    raised = _raised_types(articles)
    return {*map(_module_path, folders), "exceptions/index.html", *map(_exception_path, [*raised, *_gone_types(articles, raised)])}


def _listed(template: jinja2.Template, context: ListPage) -> bytes:
    return html_bytes(template.render(context))


def render_shared(
    articles: Sequence[Article | ListedError],
    info: OutputInfo,
    changes: tuple[Change, ...] = (),
    env: jinja2.Environment | None = None,
    listed: Callable[[jinja2.Template, ListPage], bytes] | None = None,
    browse: bool = True,
    revisions: Iterable[str] = (),
) -> Iterator[tuple[str, bytes]]:
    """Home, browse pages (without `browse`, only those of exception types no longer raised:
    the rest come from `render_browse`), the changes by release and a page per release (each of
    `revisions`, the ledger's, and each that `changes` name), 404, sitemap, robots, redirects and
    the API's index, schema and change list. `listed` renders a browse page from its template
    and context, when the caller keeps pages already rendered (`generator.pages.PageMemo`)."""
    env = env or environment()
    listed = listed or _listed
    active = [a for a in articles if a.status == "active"]
    phases = _phase_groups(active)
    home = _page("index.html", info, "SGLang error knowledge base", "Paste an SGLang error message or traceback to find what it means and how to fix it.")
    yield "index.html", env.get_template("home.html").render(
        HomePage(
            **home,
            counts={
                "errors": len(active),
                "curated": sum(1 for a in active if a.curated),
                "with_message": sum(1 for a in active if a.message is not None),
            },
            curated=[(f"errors/{a.id}/", shorten(a.title)) for a in active if a.curated],
            exception_types=top_exception_types(active),
            phases=phase_counts(phases),
        )
    ).encode()
    if browse:
        yield from render_browse(articles, info, env, listed)
    list_template = env.get_template("list.html")
    sitemap = {"", "modules/", "exceptions/", "changes/", "coverage/", *(path[: -len("index.html")] for path in browse_paths(articles))}
    for path, context in [*gone_exception_pages(articles, info), *phase_pages(phases, info)]:
        yield path, listed(list_template, context)
        sitemap.add(path[: -len("index.html")])
    changes_page = _page("changes/index.html", info, "Changes by release", "Errors added, reworded, moved or retired by each SGLang release.", "../api/releases/index.json")
    titles = {a.id: a.title for a in articles}
    releases = releases_of(changes, revisions)
    counts = [{kind: n for kind in CHANGE_KINDS if (n := sum(c.change == kind for c in found))} for _, _, _, found in releases]
    yield "changes/index.html", env.get_template("changes.html").render(
        ChangesPage(**changes_page, releases=[(f"../releases/{name}/", name, date, count) for (name, _, date, _), count in zip(releases, counts)])
    ).encode()
    release_template = env.get_template("release.html")
    for (name, revision, date, found), count in zip(releases, counts):
        path = f"releases/{name}/index.html"
        # A release's page names no build's revision: it changes only when the ledger does.
        page = _page(path, info, f"SGLang {name}: changed errors", f"Errors SGLang {name} added, reworded, moved or retired.", f"../../api/releases/{name}.json", revision=False)
        groups = [(kind, [(c, shorten(c.message or titles.get(c.id, c.id))) for c in found if c.change == kind]) for kind in CHANGE_KINDS if kind in count]
        yield path, listed(release_template, ReleasePage(**page, release=name, revision=revision, date=date, groups=groups))
        yield f"api/releases/{name}.json", api.dumps(api.release_document(name, revision, date, found))
        sitemap.add(f"releases/{name}/")
    yield "api/releases/index.json", api.dumps(
        {"schema_version": api.SCHEMA_VERSION, "releases": [{"release": name, "revision": revision, "date": date, "changes": count} for (name, revision, date, _), count in zip(releases, counts)]}
    )
    missing = _page("404.html", info, "Page not found", "This page does not exist in the SGLang error knowledge base.")
    # A 404 page is served at any depth, so its links cannot be relative: it uses the base URL.
    missing["root"] = info.base_url.rstrip("/") + "/"
    yield "404.html", html_bytes(env.get_template("404.html").render(missing))
    sitemap.update(f"errors/{a.id}/" for a in articles if a.status != "moved")
    base = info.base_url.rstrip("/") + "/"
    # What `quote` leaves as it is needs no quoting, and what it gives needs no escaping: one
    # check per path instead of both, for 27,000 error pages.
    where = escape(base)
    urls = "".join(f"<url><loc>{where}{url if _UNQUOTED.fullmatch(url) else urllib.parse.quote(url)}</loc></url>\n" for url in sorted(sitemap))
    yield "sitemap.xml", (
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n' + urls + "</urlset>\n"
    ).encode()
    yield "robots.txt", f"User-agent: *\nAllow: /\nSitemap: {base}sitemap.xml\n".encode()
    yield "_redirects", b"/api/errors/:id /api/errors/:id.json 200\n"
    yield "api/errors/index.json", api.dumps(api.index_document(articles, info.upstream))
    yield "api/schema/error.json", api.dumps(api.error_schema(info.base_url))
    yield "api/changes.json", api.dumps(api.changes_document(changes))
    yield "static/pygments.css", pygments_css()
    for static in sorted((TEMPLATES / "static").rglob("*")):
        if static.is_file():
            yield "static/" + static.relative_to(TEMPLATES / "static").as_posix(), static.read_bytes()


def render_families(members: Mapping[str, tuple[Family, Sequence[tuple[str, str]]]], info: OutputInfo, env: jinja2.Environment | None = None) -> Iterator[tuple[str, bytes]]:
    """A page per family (`families/<name>/`): its text and the errors it explains, linked;
    and the list of families. `members` maps a family's name to it and the (id, title) of each
    error whose page shows it."""
    env = env or environment()
    template = env.get_template("family.html")
    for name, (family, errors) in sorted(members.items()):
        path = f"families/{name}/index.html"
        root = _root(path)
        fix = family.example_fix
        context = FamilyPage(
            **_page(path, info, shorten(family.title, 70) + " \u2014 SGLang errors", f"A family of SGLang errors: {shorten(family.title, 120)}"),
            family=family,
            explanation=markdown(family.explanation),
            trigger=markdown(family.trigger) if family.trigger else None,
            solutions=[(solution.title, markdown(solution.body)) for solution in family.solutions],
            situations=[markdown(situation) for situation in family.situations],
            example_before=highlight_code(fix.before, fix.language) if fix else None,
            example_after=highlight_code(fix.after, fix.language) if fix else None,
            evidence=[(info.upstream.url(e.path, e.line), e) for e in family.evidence],
            members=sorted((f"{root}errors/{error}/", shorten(title)) for error, title in errors),
        )
        yield path, html_bytes(template.render(context))
    path = "families/index.html"
    listing = FamiliesPage(
        **_page(path, info, "Families of SGLang errors", "Groups of SGLang errors that share a cause, each explained once."),
        families=[(f"{name}/", family.title, len(errors)) for name, (family, errors) in sorted(members.items())],
    )
    yield path, html_bytes(env.get_template("families.html").render(listing))


def render_coverage(coverage, info: OutputInfo, env: jinja2.Environment | None = None) -> Iterator[tuple[str, bytes]]:
    """How many errors have a curated explanation, overall and per module: a page and JSON.
    Modules with the most errors still unexplained come first."""
    env = env or environment()
    page = _page("coverage/index.html", info, "Explanation coverage",
                 "How many SGLang errors have a written explanation, per module.", "../api/coverage.json")
    rows = sorted(coverage.modules, key=lambda m: (-(m.total - m.curated), m.module))
    context = CoveragePage(
        **page,
        curated=coverage.curated,
        family=coverage.family,
        total=coverage.total,
        percent=f"{coverage.percent:.1f}",
        modules=[
            CoverageRow(module=m.module, curated=m.curated, total=m.total, percent=f"{100 * m.curated / m.total:.1f}")
            for m in rows
        ],
    )
    yield "coverage/index.html", html_bytes(env.get_template("coverage.html").render(context))
    yield "api/coverage.json", api.dumps(coverage.as_json())
