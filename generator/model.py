"""Every record errorkb passes between its stages, in one place.

Records are frozen, slotted dataclasses holding tuples, so they can be hashed, cached,
compared and sent between processes unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import operator
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import ClassVar, NamedTuple

ID_PREFIX = "errorkb-id-v1\0"

def record(cls: type) -> type:
    """A frozen, slotted dataclass that pickles as its class and a tuple of its fields, taken in
    C (`operator.attrgetter`), instead of through dataclasses' per-field `__getstate__` in
    Python: a build pickles some 27,000 articles to digest them, and its caches hold such
    records, so this makes both about three times faster."""
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    names = [field.name for field in dataclasses.fields(cls)]
    values = operator.attrgetter(*names) if len(names) > 1 else (lambda record: (getattr(record, names[0]),))

    def __reduce__(self):  # noqa: N807
        return cls, values(self)

    cls.__reduce__ = __reduce__
    return cls

_WORDY = re.compile(r"[^\W_]")
_WHITESPACE = re.compile(r"\s+")

KINDS = ("raise", "assert", "warning")


@record
class Placeholder:
    """One interpolated expression of a message, as upstream wrote it.

    `expr` is the expression's source on one line; `conversion` (`r`, `s`, `a`), `format_spec`
    and `equal` (the `=` of `f"{x=}"`) are kept so the template shows them.
    """

    expr: str
    conversion: str = ""
    format_spec: str = ""
    equal: bool = False
    # A part of a message held in a variable that only some paths add (`if ...: msg += ...`):
    # `expr` is that part's template, shown as `{[...]}` and matched whether present or not.
    optional: bool = False

    def render(self) -> str:
        if self.optional:
            return "{[" + self.expr + "]}"
        text = self.expr + ("=" if self.equal else "")
        if self.conversion:
            text += "!" + self.conversion
        if self.format_spec:
            text += ":" + self.format_spec
        return "{" + text + "}"


@record
class Template:
    """A message template: literal text and placeholders in order.

    Literal parts hold the text a user sees (escapes decoded). Rendered, literal braces are
    doubled as in an f-string, so `{...}` always means a placeholder.
    """

    parts: tuple[str | Placeholder, ...]

    @property
    def text(self) -> str:
        return "".join(
            part.render() if isinstance(part, Placeholder) else escape_braces(part)
            for part in self.parts
        )

    @property
    def has_literal(self) -> bool:
        """Whether the user sees some text that is not a value: a literal part with a letter
        or digit (`{a}, {b}` says nothing of which error it is), or the expression a
        self-documenting `{expr=}` prints."""
        return any(part.equal if isinstance(part, Placeholder) else _WORDY.search(part) for part in self.parts)

    @property
    def key(self) -> str:
        """The template with whitespace runs collapsed and every placeholder written `{}`,
        but a self-documenting `{expr=}` written `expr={}` (SPEC: its text is printed)."""
        raw = "".join(
            (escape_braces(part.expr) + "={}" if part.equal else "{}") if isinstance(part, Placeholder) else escape_braces(part)
            for part in self.parts
        )
        return _WHITESPACE.sub(" ", raw).strip()

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(part for part in self.parts if isinstance(part, Placeholder))


def escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@record
class Site:
    """One place in upstream's code that raises, asserts or warns.

    Positions are 1-based lines of the file at the revision; `function` is the enclosing
    qualified name (`""` at module level); `conditions` hold, outermost first, when the site is
    reached, and `checks_passed` numbers those that hold only because an earlier check in the
    function did not raise; `context` names the loops, `with` blocks and `try` handlers around it;
    `assert_condition` is the condition an assert checks (it failed when the error shows).
    """

    kind: str
    exception: str | None
    template: Template | None
    path: str
    line: int
    end_line: int
    function: str
    conditions: tuple[str, ...]
    context: tuple[str, ...]
    assert_condition: str | None
    snippet_start: int
    snippet_end: int
    ordinal: int = 0
    checks_passed: tuple[int, ...] = ()
    # In a pydantic field validator: the parameter holding the value, then the fields validated.
    validates: tuple[str, ...] = ()
    # Whether the message was read from the assignments to the variable raised (`msg = ...`):
    # 0 no, else how (`extract.RESOLVED_ONE`, `RESOLVED_LAST`).
    resolved: int = 0
    # The id key under the rules before messages were read from variables and `{expr=}` kept
    # its text, where it differs from `key`: the ledger moves such ids to their new ones.
    legacy_key: str | None = None
    # For a call to a raiser, where the exception is raised: the raiser's path, qualified
    # name, line and end line (a traceback's last frame is there, not at the call).
    raised_in: tuple[str, str, int, int] | None = None

    @property
    def own_conditions(self) -> tuple[str, ...]:
        """Its conditions but those that hold only because an earlier check did not raise."""
        if not self.checks_passed:
            return self.conditions
        passed = set(self.checks_passed)
        return tuple(condition for number, condition in enumerate(self.conditions) if number not in passed)

    @property
    def message(self) -> str | None:
        """The template's text, or None when it has no literal text."""
        if self.template is None or not self.template.has_literal:
            return None
        return self.template.text

    @property
    def key(self) -> str:
        """The id key: the template key, or a location key for sites without literal text."""
        # Whether there is a message, without joining its text: 28,000 sites on every build.
        if self.template is not None and self.template.has_literal:
            return self.template.key
        key = f"@{self.path}:{self.function}:{self.ordinal}"
        if self.kind == "assert":
            key += f":{self.assert_condition}"
        return key

    def id(self, repo: str) -> str:
        return error_id(repo, self.exception or "", self.key)


def error_id(repo: str, exception: str, key: str) -> str:
    """SPEC's id: sha256 of the namespace, repo, exception and key, 16 hex digits."""
    payload = f"{ID_PREFIX}{repo}\0{exception}\0{key}".encode()
    return hashlib.sha256(payload).hexdigest()[:16]


@record
class Problem:
    """An input errorkb could not use: the file, and why. Reported, never fatal."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@record
class Upstream:
    """The upstream revision a build describes.

    `revision` is what links pin to (a commit sha, or the release tag `v0.5.23`); `commit` is
    the commit sha where one is known; `date` is the commit or release date, ISO 8601 UTC.
    """

    repo: str
    source: str
    revision: str
    date: str
    commit: str = ""

    def url(self, path: str, line: int | None = None) -> str:
        url = f"https://github.com/{self.repo}/blob/{self.revision}/{path}"
        return f"{url}#L{line}" if line else url


@record
class SourceFile:
    """One Python file of upstream: its path in upstream's layout and its git blob sha."""

    path: str
    blob_sha: str


@record
class Raiser:
    """A function that raises an exception made from one of its parameters (`def fail(obj,
    message): raise ValueError(message)`): each call to it that passes text for that parameter
    is a site of its own, in the caller (`generator.raisers`).

    `function` is its qualified name in its module (`fail`, or `Pool.fail` for a method, called
    as `self.fail` from its own class); `position` is the parameter's index among the arguments
    a call passes (a method's `self` not counted), None when it can only be passed by keyword;
    `line` and `end_line` are those of its raise, and `path` its file's, once resolved (a
    blob alone does not know where it is)."""

    function: str
    parameter: str
    position: int | None
    exception: str
    method: bool = False
    line: int = 0
    end_line: int = 0
    path: str = ""


@record
class Binding:
    """A name one import binds: `from module import member as name`, `import module as name`
    (`member` None), or every public name of `module` for `from module import *` (`name` "*").
    `module` is as written, a relative one with its leading dots."""

    name: str
    module: str
    member: str | None = None


@record
class ClassBases:
    """A class a file defines with the bases it names, as written (`errors.BaseError`)."""

    name: str
    bases: tuple[str, ...]


@record
class ExtractedFile:
    """What one file alone gives: its sites, the raisers it defines, the names it imports and
    the classes it derives. The sites of calls to raisers defined elsewhere are found later,
    once every file's raisers are known (`generator.raisers`)."""

    sites: tuple[Site, ...]
    raisers: tuple[Raiser, ...] = ()
    bindings: tuple[Binding, ...] = ()
    classes: tuple[ClassBases, ...] = ()


@record
class Extraction:
    """Everything one extraction found: the sites, sorted, and the files it had to skip.

    `inputs` names, for each file whose sites also depend on other files (calls to raisers
    defined there), what its sites were made from: its blob sha and a digest of the raisers it
    sees. A state kept between builds and brought up to date by changed blobs takes `made_from`
    instead of the blob shas, so that a change to a raiser's file counts as a change to its
    callers'."""

    upstream: Upstream
    files: tuple[SourceFile, ...]
    sites: tuple[Site, ...]
    problems: tuple[Problem, ...]
    inputs: tuple[tuple[str, str], ...] = ()
    # Each exception class upstream defines, by name, with the names of its ancestors
    # (`raisers.exception_classes`).
    classes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def made_from(self) -> dict[str, str]:
        """Path -> what its sites were made from: the blob sha, or the blob sha and the digest
        of the raisers the file sees."""
        made = {file.path: file.blob_sha for file in self.files}
        made.update(self.inputs)
        return made


@record
class ErrorEntry:
    """One error: every site with the same exception and key, under one id.

    `sites` are sorted by path and line; the first is the entry's primary location, whose
    `message` is the entry's (kept here, as every stage reads it and a template's text is
    joined anew on each read).
    """

    id: str
    kind: str
    exception: str | None
    template: Template | None
    sites: tuple[Site, ...]
    message: str | None
    # An entry is an error upstream raises now; the lists of errors read this, as of articles.
    status: ClassVar[str] = "active"

    @property
    def scope(self) -> str:
        """`product` when some site is in the code SGLang runs, else where the sites are
        (`site_scope`): `test`, `benchmark` or `example`."""
        return scope_of(site.path for site in self.sites)

    @property
    def title(self) -> str:
        """What a page calls the error: its message, or for a site without text what it checks."""
        if self.message is not None:
            return self.message
        site = self.sites[0]
        if site.kind == "assert" and site.assert_condition is not None:
            return f"assert {site.assert_condition}"
        if site.template is not None:
            return f"{self.exception or 'exception'}({site.template.text})"
        return f"{self.exception or 'unknown exception'} in {site.function or site.path}"


# Where an error can come from, product first: an error raised in the product and in a test
# is a product error.
SCOPES = ("product", "test", "benchmark", "example")
_TEST_FOLDER = re.compile(r"(?:^|/)(?:tests?|unit_tests?|testing)/")
_BENCHMARK_FOLDER = re.compile(r"(?:^|/)(?:benchmarks?|bench)/")
_EXAMPLE_FOLDER = re.compile(r"(?:^|/)examples?/")


@functools.cache
def site_scope(path: str) -> str:
    """Whether a file is part of what SGLang runs (`product`) or only of its own tests
    (a `test/`, `tests/` or `testing/` folder, `test_*.py`, `*_test.py`, `conftest.py`),
    benchmarks (a `bench/` or `benchmark(s)/` folder, `bench_*.py`) or examples (`example(s)/`)."""
    name = path.rsplit("/", 1)[-1]
    if _TEST_FOLDER.search(path) or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return "test"
    if _BENCHMARK_FOLDER.search(path) or name.startswith("bench_"):
        return "benchmark"
    if _EXAMPLE_FOLDER.search(path):
        return "example"
    return "product"


def scope_of(paths: Iterable[str]) -> str:
    """The scope of an error raised in `paths`: `product` if any is, else the first of
    `SCOPES` among them (`product` for none: a retired error whose place is unknown)."""
    scopes = {site_scope(path) for path in paths}
    return next((scope for scope in SCOPES if scope in scopes), "product")


def merge_sites(sites: tuple[Site, ...], calls: tuple[Site, ...]) -> tuple[Site, ...]:
    """A file's sites and the sites of its calls to raisers, in source order."""
    if not calls:
        return sites
    return tuple(sorted(sites + calls, key=lambda site: site.line))


def group_sites(sites: tuple[Site, ...], repo: str) -> tuple[ErrorEntry, ...]:
    """Sites with the same exception and template key become one entry, sorted by id."""
    by_id: dict[str, list[Site]] = {}
    for site in sites:
        by_id.setdefault(site.id(repo), []).append(site)
    entries = []
    for error_id, members in sorted(by_id.items()):
        members.sort(key=lambda s: (s.path, s.line, s.end_line))
        first = members[0]
        entries.append(ErrorEntry(error_id, first.kind, first.exception, first.template, tuple(members), first.message))
    return tuple(entries)


def changed_errors(paths: Mapping[str, str], before: Mapping[str, str], entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str]) -> set[str]:
    """The ids whose entries may differ between two revisions: an entry is made from its sites
    alone, and a site from its file's blob, so these are the errors with a site in a file whose
    blob sha changed, then (`paths`: each id's paths joined by NUL; `before`: path -> blob sha)
    or now (`entries` from `blobs`), and those only one side has."""
    files = {path for path in before.keys() | blobs.keys() if before.get(path) != blobs.get(path)}
    changed = {error for error, joined in paths.items() if not files.isdisjoint(joined.split("\0"))}
    now = set()
    for entry in entries:
        now.add(entry.id)
        if entry.id not in paths or any(site.path in files for site in entry.sites):
            changed.add(entry.id)
    return changed | (paths.keys() - now)


@record
class Solution:
    """One curated way out: a short title and a Markdown body."""

    title: str
    body: str


@record
class ExampleFix:
    """Before and after code or commands, with the language used to highlight them."""

    before: str
    after: str
    language: str = "shell"
    # What the "before" side needs to reach its error beyond SGLang on a CPU (`cuda`, ...).
    needs: tuple[str, ...] = ()
    # The SGLang version this very example was run with and reproduced on (`content/reproduced.json`).
    reproduced_with: str | None = None


@record
class Evidence:
    """A line of upstream code a curated claim rests on: its file, a short quote of it, and
    optionally the line, the function and the claim it backs."""

    path: str
    quote: str
    line: int | None = None
    function: str | None = None
    claim: str | None = None


@record
class Curated:
    """The curated explanation of one error, from `content/errors/<id>.yaml`.

    Markdown fields are untrusted text, rendered with raw HTML off. `fingerprint` is the
    fingerprint of the code the text was written against and `written_for` the upstream revision
    it was stamped at; `review` is set when the text was carried over from an older id (a
    reworded message) and waits for a human to re-read it.
    """

    id: str
    path: str
    message: str | None
    explanation: str
    solutions: tuple[Solution, ...]
    example_fix: ExampleFix | None
    situations: tuple[str, ...]
    trigger: str | None
    tags: tuple[str, ...]
    fingerprint: str | None
    review: bool = False
    written_for: str | None = None
    evidence: tuple[Evidence, ...] = ()
    reports: tuple[str, ...] = ()
    # Other forms users see it in (a class's `__str__`, a log line wrapping it), as templates
    # with `{placeholders}`: searched as the message is.
    printed: tuple[str, ...] = ()
    # Retired ids this error continues, paired by a curator where the ledger could not.
    supersedes: tuple[str, ...] = ()
    # The phase (`PHASES`) a curator read where the call graph's is wrong.
    phase: str | None = None


@record
class FamilyMatch:
    """Which errors a family claims: every criterion given must hold (`families.claims`).

    `exceptions` are class names; `message` is a regular expression searched in the template
    as `errorkb extract` prints it; `paths` are globs over upstream paths and `functions` globs
    over qualified names, each held by every location of the error; `condition` is a regular
    expression searched, at every location, in the assert's condition or the guard conditions
    around the raise; `scopes` and `kinds` restrict to those values; `has_message` to errors
    with (True) or without (False) text.
    """

    exceptions: tuple[str, ...] = ()
    message: str | None = None
    condition: str | None = None
    paths: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    has_message: bool | None = None


@record
class Family:
    """One curated explanation of a group of errors that share a cause, from
    `content/families/<name>.yaml`: shown on each member's page that has no entry of its own.

    Its text fields mean what `Curated`'s do; `priority` decides between two families that
    claim one error (the higher wins; None is no priority)."""

    name: str
    path: str
    title: str
    match: FamilyMatch
    explanation: str
    solutions: tuple[Solution, ...]
    example_fix: ExampleFix | None = None
    situations: tuple[str, ...] = ()
    trigger: str | None = None
    tags: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    reports: tuple[str, ...] = ()
    priority: int | None = None


@record
class LedgerRecord:
    """One id ever published, as the ledger (`content/ledger/`) remembers it.

    `status` is `active`, `retired` (no longer raised since `retired_in`), `moved` (a
    reworded message, or an id the id rules changed: `moved_to` is the new id) or `split`
    (errors that shared the id under earlier rules, each with an id of its own: `split_into`). `last` keeps the last known message, exception
    and location so a retired page can still say what and where it was.

    `code` fingerprints where the error's code is (each site's path, lines and file blob), and
    `pinned` / `pinned_date` name the upstream revision at which `code` last changed: a link
    pinned there shows the same lines as one pinned to any later revision with the same `code`,
    so the page need not change until its code does.
    """

    id: str
    status: str
    first_seen: str
    last_seen: str
    kind: str
    exception: str | None
    message: str | None
    path: str
    line: int
    function: str
    moved_to: str | None = None
    retired_in: str | None = None
    aliases: tuple[str, ...] = ()
    code: str = ""
    pinned: str = ""
    pinned_date: str = ""
    # Status `split`: the ids that shared this one under earlier id rules, each its own now.
    split_into: tuple[str, ...] = ()
    # Where its first site was before where it is now, oldest first: each place it stayed at
    # over a run of releases, as (first, last, line, path, function). A new line, file or
    # function, or a release that did not raise it, starts another. `since` is the first
    # release of the place it is at now, when not `first_seen`.
    spans: tuple[tuple[str, str, int, str, str], ...] = ()
    since: str = ""
    # An assert's condition as its first site checks it: a traceback prints `assert <condition>`,
    # by which a paste of an assert no longer raised (most have no message) finds it.
    condition: str | None = None

    @property
    def seen_message(self) -> str | None:
        """The message a user saw: the message, or for an assert without one the statement a
        traceback prints above `AssertionError`; None when it had no text."""
        if self.message is not None:
            return self.message
        if self.kind == "assert" and self.condition:
            return f"assert {self.condition}"
        return None


@record
class Snippet:
    """The source lines shown around a site: plain text and highlighted HTML, one per line.

    `start` is the 1-based number of the first line; `html` lines are Pygments markup, already
    escaped, so a template may print them as they are.
    """

    start: int
    lines: tuple[str, ...]
    html: tuple[str, ...]


# When in SGLang's life an error is raised, earliest first (`generator.callgraph`).
PHASES = ("launch", "load", "request", "serving", "tool", "unreachable")


class CallerNode(NamedTuple):
    """A call of a function in the tree of its callers (`callgraph.CallGraph.tree`): where,
    the `if` tests around it in the calling function, and the caller's own callers. A named
    tuple, not a record: a build keeps some 100,000 of them between builds, and tuples pickle
    several times faster."""

    path: str
    function: str
    line: int
    conditions: tuple[str, ...]
    callers: Callers


class Callers(NamedTuple):
    """The callers of a function listed (`nodes`), and how many more there are."""

    nodes: tuple[CallerNode, ...]
    more: int


@record
class Route:
    """How SGLang gets to a site: when in its life (`phase`, one of `PHASES`) and the callers of
    the function around it."""

    phase: str
    callers: Callers


def earliest_phase(phases: Iterable[str | None]) -> str | None:
    """The earliest of some sites' phases (`PHASES`); None when none is known."""
    known = [phase for phase in phases if phase is not None]
    return min(known, key=PHASES.index) if known else None


def error_phase(curated: Curated | None, phases: Iterable[str | None]) -> str | None:
    """An error's phase: the one its curated entry gives (where the call graph cannot see the
    path), else the earliest of its sites' `phases`."""
    return (curated.phase if curated is not None else None) or earliest_phase(phases)


@record
class Location:
    """A site made ready to show: its snippet and the docstring of the function around it."""

    site: Site
    url: str
    snippet: Snippet | None
    docstring: str | None
    # When SGLang raises it and its callers, when the build read the call graph.
    route: Route | None = None


@record
class Setting:
    """A server argument as a page explains it: its flag, upstream's help text, its default as
    written, its choices, and where it is declared."""

    name: str
    help: str | None
    default: str | None
    choices: tuple[str, ...] | None
    path: str
    line: int


@dataclasses.dataclass(frozen=True, slots=True)
class Servers:
    """The settings a page may explain, by flag, of each of SGLang's command lines: the
    language server's (`main`), and the diffusion server's for code under `multimodal_gen/`,
    whose errors name its own flags (`--num-gpus` is only the diffusion server's)."""

    main: Mapping[str, Setting]
    diffusion: Mapping[str, Setting] = dataclasses.field(default_factory=dict)

    def of(self, path: str) -> Mapping[str, Setting]:
        """The settings of the command line that runs the code at `path`."""
        return self.diffusion if self.diffusion and DIFFUSION_CODE in path else self.main


# Where the diffusion server's code lives (`Servers.of`).
DIFFUSION_CODE = "/sglang/multimodal_gen/"


@record
class Related:
    """A related error as a page links to it: its id and its title."""

    id: str
    title: str


@record
class Change:
    """One change to one error between two upstream revisions, for the recent-changes page.

    `change` is `added`, `retired`, `reworded` (the new id is `detail`) or `moved` (to
    another file or function; `detail` is the old location).
    """

    id: str
    revision: str
    date: str
    change: str
    message: str | None
    detail: str = ""


def release_name(revision: str) -> str:
    """A revision as a page names a release: `v0.5.18` -> `0.5.18`; a commit stays as it is."""
    return revision[1:] if revision[:1] == "v" and revision[1:2].isdigit() else revision


def release_span(first: str, last: str) -> str:
    """Two revisions as a range of releases: `0.4.3 to 0.5.18`, or one release."""
    first, last = release_name(first), release_name(last)
    return first if first == last else f"{first} to {last}"


def place_releases(place: Place) -> str:
    """The releases that raised an error at an earlier place, in words: `0.5.7 to 0.5.18`,
    or, where the ledger knows only the move, `releases before 0.5.19`."""
    if place.last and place.first:
        return release_span(place.first, place.last)
    return f"releases before {release_name(place.moved_in)}"


@record
class Wording:
    """An earlier message of an error: its text (a template) and the releases that raised it,
    and the one whose rewording gave the message after it."""

    message: str
    first: str
    last: str
    reworded_in: str

    @property
    def releases(self) -> str:
        """`SGLang 0.4.3 to 0.5.18; reworded in 0.5.19`."""
        reworded = f"; reworded in {release_name(self.reworded_in)}" if self.reworded_in else ""
        return f"SGLang {release_span(self.first, self.last)}{reworded}"


@record
class Place:
    """Where an error was raised before it moved to another line, file or function: the path,
    line and function, the first release that raised it there (None when the ledger does not
    know it), the last (None when the ledger knows only the move: a ledger from before it kept
    lines), and the one that raised it elsewhere next (or retired it)."""

    path: str
    line: int
    function: str
    first: str | None
    moved_in: str
    last: str | None = None


@record
class Versions:
    """The releases an error was raised by, as its ledger records and those of its earlier ids
    say: the first; the last (None while the newest build raises it); the release it was
    retired in, for one no longer raised; and its earlier wordings, oldest first. Releases are
    named as upstream tags them (`v0.5.18`), or by commit for a build of one."""

    first: str
    last: str | None = None
    retired_in: str = ""
    wordings: tuple[Wording, ...] = ()
    # Where earlier releases raised it, oldest first, and since when it is where it is now.
    places: tuple[Place, ...] = ()
    here_since: str | None = None


@record
class Article:
    """Everything one error's page and API document say, joined and derived before rendering.

    `status` is `active`, `retired` or `moved`. An active article has an `entry`; a retired or
    moved one has the ledger `record` instead. `trigger` is Markdown: the curated text when
    there is one (`trigger_curated`), else what the guard conditions say. `mentions` are the
    flags and environment variables the message and conditions name. `stale` names the
    revision curated text was written against when the code changed since (else None).
    `upstream` is the revision the page names and links to: the one at which its code last
    changed, so that the page stays the same across builds until its code changes.
    """

    id: str
    status: str
    title: str
    kind: str
    exception: str | None
    template: Template | None
    locations: tuple[Location, ...]
    curated: Curated | None
    trigger: str | None
    trigger_curated: bool
    mentions: tuple[str, ...]
    related: tuple[Related, ...]
    aliases: tuple[str, ...] = ()
    record: LedgerRecord | None = None
    stale: str | None = None
    upstream: Upstream | None = None
    # The server arguments among `mentions`, as upstream declares them at the page's revision.
    settings: tuple[Setting, ...] = ()
    # The family whose text the page shows, for an active error without curated text of its own.
    family: Family | None = None
    # The releases that raised it, as the ledger knows them (None without a ledger).
    versions: Versions | None = None

    @property
    def sites(self) -> tuple[Site, ...]:
        """Where upstream raises it, as `ErrorEntry.sites`: none for an error no longer raised."""
        return tuple(location.site for location in self.locations)

    @property
    def message(self) -> str | None:
        """Its template's text, as `ErrorEntry.message` (None for a message without text)."""
        return self.template.text if self.template is not None else None

    @property
    def phase(self) -> str | None:
        """The earliest phase (`PHASES`) of its locations: when SGLang first can raise it; the
        curated entry's where it gives one. None for an error no longer raised, or a build
        without the call graph."""
        if not self.locations:
            return None
        return error_phase(self.curated, (location.route.phase for location in self.locations if location.route is not None))

    @property
    def scope(self) -> str:
        """As `ErrorEntry.scope`; for an error no longer raised, where it last was."""
        return _scope(self.sites if self.locations else (), self.record)


@record
class ListedError:
    """An error as the lists of errors and the API's index show it (`derive.listed_errors`):
    what its `Article` says but what only its own page shows, which costs the most to derive."""

    id: str
    status: str
    title: str
    kind: str
    exception: str | None
    message: str | None
    sites: tuple[Site, ...]
    curated: Curated | None
    record: LedgerRecord | None = None
    # As `Article.phase`.
    phase: str | None = None

    @property
    def scope(self) -> str:
        """As `Article.scope`."""
        return _scope(self.sites, self.record)


def _scope(sites: tuple[Site, ...], record: LedgerRecord | None) -> str:
    """The scope of an error raised at `sites`, or with none, where its record last saw it."""
    if sites:
        return scope_of(site.path for site in sites)
    return scope_of([record.path] if record and record.path else [])


# -- A build --------------------------------------------------------------------------------------


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
