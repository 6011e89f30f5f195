"""Curated content held against an extraction: messages, staleness, orphans and coverage.

`load_curated` says whether a file is well formed; this module says whether it is still true:
the message must be the template of its id, the code it was written against must not have
changed (the fingerprint), and its id must still exist, upstream or in the ledger.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path

from generator.cache import cached_values
from generator.content import ERRORS_FOLDER, ContentProblem, CuratedFile, error_links, markdown_fields, same_message
from generator.history import resolve
from generator.model import Curated, ErrorEntry, Evidence, LedgerRecord, Site
from generator.pysource import decode_source
from generator.upstream import Source

FINGERPRINT_VERSION = "errorkb-fingerprint-v1"
_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
)
if hasattr(ast, "TryStar"):
    _COMPOUND += (ast.TryStar,)

# -- Fingerprints ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SiteCode:
    """What an explanation of a site depends on: the raising statement, the signature of the
    function around it, and the guard conditions; all without line numbers or file paths."""

    statement: str
    signature: str
    conditions: tuple[str, ...]


def site_code(tree: ast.Module | None, lines: list[str], site: Site) -> SiteCode:
    """The code a site's explanation depends on, normalised by `ast.unparse` so reformatting
    (black, line moves) never counts as a change; raw text when the file did not parse."""
    statement, function = None, None
    if tree is not None:
        # The statements around the line, found by descending only into nodes that span it: the
        # same choice as a walk of the whole tree (the innermost, the last of equals), at a
        # fraction of the cost for a file's many sites.
        best_statement = best_function = None
        order = 0
        level: list[ast.AST] = [tree]
        while level:
            deeper = []
            for parent in level:
                for node in ast.iter_child_nodes(parent):
                    start = getattr(node, "lineno", None)
                    if start is not None and not start <= site.line <= (node.end_lineno or start):
                        continue
                    deeper.append(node)
                    order += 1
                    if not isinstance(node, ast.stmt):
                        continue
                    rank = (start, order)
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        if best_function is None or rank >= best_function[0]:
                            best_function = (rank, node)
                    elif not isinstance(node, _COMPOUND):
                        if best_statement is None or rank >= best_statement[0]:
                            best_statement = (rank, node)
            level = deeper
        statement = best_statement[1] if best_statement else None
        function = best_function[1] if best_function else None
    if statement is not None:
        statement_text = ast.unparse(statement)
    else:
        statement_text = " ".join(line.strip() for line in lines[site.line - 1 : site.end_line])
    signature = ""
    if function is not None:
        signature = _signature(function)
    return SiteCode(statement_text, signature, site.conditions)


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """`@decorator def name(arguments) -> returns`, on one line."""
    decorators = "".join(f"@{ast.unparse(d)} " for d in function.decorator_list)
    prefix = "async def" if isinstance(function, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    return f"{decorators}{prefix} {function.name}({ast.unparse(function.args)}){returns}"


def fingerprint_of(codes: Iterable[SiteCode]) -> str:
    """One error's fingerprint: 16 hex digits over the set of its sites' code, in a stable order."""
    unique = sorted({json.dumps([c.statement, c.signature, list(c.conditions)]) for c in codes})
    digest = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for item in unique:
        digest.update(b"\0" + item.encode())
    return digest.hexdigest()[:16]


def fingerprints(entries: Iterable[ErrorEntry], source: Source) -> dict[str, str]:
    """The fingerprint of each entry, reading and parsing each file its sites are in once."""
    files = {file.path: file for file in source.files()}
    parsed: dict[str, tuple[ast.Module | None, list[str]]] = {}
    result = {}
    for entry in entries:
        codes = []
        for site in entry.sites:
            if site.path not in parsed:
                text = decode_source(source.read(files[site.path])) if site.path in files else ""
                try:
                    tree = ast.parse(text)
                except (SyntaxError, ValueError):
                    tree = None
                parsed[site.path] = (tree, text.splitlines())
            codes.append(site_code(*parsed[site.path], site))
        result[entry.id] = fingerprint_of(codes)
    return result


# -- Staleness -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stale:
    """A curated entry whose code changed since it was written, or that waits for review."""

    id: str
    path: str
    written_for: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: stale: {self.reason}; re-read it, then run `errorkb review {self.id}`"


def stale_since(curated: Curated, fingerprint: str | None) -> str | None:
    """The revision an entry's text was written for when the code changed since, else None.

    For a page: "written for older code (`v0.5.22`)". An entry never stamped, or carried over
    from a reworded message, is stale too; its revision reads "an unrecorded revision" when
    none was stamped.
    """
    if fingerprint is not None and curated.fingerprint == fingerprint and not curated.review:
        return None
    return curated.written_for or "an unrecorded revision"


def find_stale(curated: Mapping[str, Curated], current: Mapping[str, str], revision: str) -> tuple[Stale, ...]:
    """The entries whose fingerprint is not the current one, or that are marked for review."""
    found = []
    for error, entry in sorted(curated.items()):
        if error not in current or stale_since(entry, current[error]) is None:
            continue
        if entry.review:
            reason = "carried over from a reworded message and marked for review"
        elif entry.fingerprint is None:
            reason = "no fingerprint: never reviewed against the code"
        else:
            since = entry.written_for or "an unrecorded revision"
            reason = f"written for the code at {since}; the code changed by {revision}"
        found.append(Stale(error, entry.path, entry.written_for, reason))
    return tuple(found)


def stale_revisions(
    curated: Mapping[str, Curated], entries: Mapping[str, ErrorEntry], source: Source, current: Mapping[str, str] | None = None
) -> dict[str, str]:
    """For the build: each stale entry's id and the revision its text was written for, the
    `stale` mapping `derive` takes to mark a page as written for older code. `current` holds
    the fingerprints (`fingerprints`) when they are already known."""
    if current is None:
        current = fingerprints([entries[error] for error in sorted(curated) if error in entries], source)
    found = {error: stale_since(curated[error], fingerprint) for error, fingerprint in current.items()}
    return {error: since for error, since in found.items() if since is not None}


# -- The ledger and orphans ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Orphan:
    """A content file whose id is not extracted and not in the ledger, or that became an alias."""

    id: str
    path: str
    moved_to: str | None = None
    split_into: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.split_into:
            return (
                f"{self.path}: orphaned: {self.id} stood for several errors, now {', '.join(self.split_into)}; "
                "move the text to the file of the one it explains and review it (the file is kept)"
            )
        if self.moved_to:
            return (
                f"{self.path}: orphaned: {self.id} was reworded and is now {self.moved_to}; "
                f"move the text to {Path(self.path).with_name(self.moved_to + '.yaml')} and review it"
            )
        return (
            f"{self.path}: orphaned: {self.id} is neither raised upstream nor in the ledger; "
            "check the id against `errorkb extract` (the file is kept)"
        )


def find_orphans(
    ids: Iterable[tuple[str, str]], entries: Mapping[str, ErrorEntry], ledger: Mapping[str, LedgerRecord]
) -> tuple[Orphan, ...]:
    """Orphans among `(id, path)` pairs of content files, against the ledger of
    `generator.history.load_ledger`. Ids the ledger retired are not orphans (their pages stay);
    ids it moved, or lists as an alias, are reported with the id their page lives at now."""
    aliases = {alias: record.id for record in ledger.values() for alias in record.aliases}
    found = []
    for error, path in sorted(ids):
        record = ledger.get(error)
        moved_to = resolve(ledger, error) if record and record.status == "moved" else aliases.get(error)
        if record and record.status == "split":
            found.append(Orphan(error, path, split_into=record.split_into))
        elif moved_to and moved_to != error:
            found.append(Orphan(error, path, moved_to))
        elif error not in entries and record is None:
            found.append(Orphan(error, path))
    return tuple(found)


def content_orphans(
    folder: Path, entries: Mapping[str, ErrorEntry], ledger: Mapping[str, LedgerRecord]
) -> tuple[Orphan, ...]:
    """For the build: the orphans among the files of `folder/errors/`, valid or not, by file name."""
    written = sorted((path.stem, str(path)) for path in (folder / ERRORS_FOLDER).glob("*.yaml"))
    return find_orphans(written, entries, ledger)


# -- Checks against the extraction -----------------------------------------------------------------


def extraction_problems(
    files: Mapping[str, CuratedFile], entries: Mapping[str, ErrorEntry], ledger: Mapping[str, LedgerRecord]
) -> tuple[ContentProblem, ...]:
    """Valid files that contradict the extraction: a message that is not the id's template, a
    link to an error that does not exist."""
    problems = []
    known = set(entries) | set(ledger)
    for error, file in sorted(files.items()):
        curated = file.curated
        entry = entries.get(error)
        if entry is not None and not same_message(curated.message, entry.message):
            upstream = "no literal text (write message: null)" if entry.message is None else repr(entry.message)
            problems.append(
                ContentProblem(curated.path, file.line("message"), "message", f"not the template of {error}: upstream says {upstream}")
            )
        for field, text in markdown_fields(curated):
            for linked in error_links(text):
                if linked not in known:
                    problems.append(ContentProblem(curated.path, file.line(field), field, f"links to unknown error {linked}"))
    return tuple(problems)


def evidence_problems(files: Mapping[str, CuratedFile], source: Source) -> tuple[ContentProblem, ...]:
    """Evidence whose quote is not in its file at `source`'s revision (white space is not
    compared), or whose file upstream does not have; each names the claim it backed."""
    texts = QuotedFiles(source)
    problems = []
    for error, file in sorted(files.items()):
        for index, evidence in enumerate(file.curated.evidence):
            if texts.find(evidence) is not None:
                if evidence.function and not texts.defines(evidence.path, evidence.function):
                    # A reader follows the name to the code: one the file does not define
                    # sends them nowhere.
                    field = f"evidence[{index}]"
                    problem = f"function {evidence.function!r} is not defined in {evidence.path} at {source.upstream.revision}"
                    problems.append(ContentProblem(file.curated.path, file.line(field), field, problem))
                continue
            backed = f" (it backs: {evidence.claim})" if evidence.claim else ""
            revision = source.upstream.revision
            if not texts.exists(evidence.path):
                problem = f"{evidence.path} does not exist at {revision}{backed}"
            else:
                problem = f"quote not found in {evidence.path} at {revision}{backed}"
            field = f"evidence[{index}]"
            problems.append(ContentProblem(file.curated.path, file.line(field), field, problem))
    return tuple(problems)


REVIEWS_FOLDER = "reviews"
FAMILY_REVIEWS_FOLDER = "family-reviews"


def review_problems(folder: Path, files: Mapping[str, CuratedFile], families: Mapping[str, CuratedFile] | None = None) -> tuple[ContentProblem, ...]:
    """Independent reviews that are malformed, name nothing curated, score what they review
    below 2 (a text a reviewer found misleading is not published), or are missing: every entry
    has one in `content/reviews/<id>.yaml` (`id`, `score` 0-3, `reviewer`, `reasons` citing
    file:line, `problems`), and every family in `content/family-reviews/<name>.yaml` (`family`
    in place of `id`)."""
    problems = [*_reviews(folder, REVIEWS_FOLDER, "id", files, "entry", ERRORS_FOLDER)]
    if families is not None:
        problems.extend(_reviews(folder, FAMILY_REVIEWS_FOLDER, "family", families, "family", "families"))
    return tuple(problems)


def _reviews(folder: Path, kind: str, key: str, files: Mapping[str, CuratedFile], noun: str, written: str) -> list[ContentProblem]:
    from generator import yamltree

    problems = []
    for name in sorted(files.keys() - {path.stem for path in (folder / kind).glob("*.yaml")}):
        problems.append(ContentProblem(files[name].curated.path, 1, "review", f"no independent review in {folder / kind / name}.yaml; unreviewed, this {noun} is not published (content/README.md: Reviews)"))
    for path in sorted((folder / kind).glob("*.yaml")):
        where = str(path)
        try:
            review = yamltree.read(path.read_text(encoding="utf-8"))
        except (OSError, yamltree.YAMLError) as error:
            problems.append(ContentProblem(where, 1, "", f"not valid YAML: {error}".splitlines()[0]))
            continue
        if not isinstance(review, dict):
            problems.append(ContentProblem(where, 1, "", f"not a mapping of {key}, score, reviewer, reasons"))
            continue
        score = review.get("score")
        if review.get(key) != path.stem:
            problems.append(ContentProblem(where, 1, key, f"must be the file name's {key} {path.stem!r}"))
        if not isinstance(score, int) or isinstance(score, bool) or not 0 <= score <= 3:
            problems.append(ContentProblem(where, 1, "score", "must be an integer from 0 to 3"))
        elif score < 2 and path.stem in files:
            problems.append(ContentProblem(where, 1, "score", f"{score}: {'an' if noun[0] in 'aeiou' else 'a'} {noun} scored below 2 is not published; fix it and have it reviewed again, or remove it"))
        if not review.get("reviewer") or not isinstance(review.get("reasons"), list) or not review["reasons"]:
            problems.append(ContentProblem(where, 1, "reasons", "a review names its reviewer and gives its reasons (file:line)"))
        if path.stem not in files:
            problems.append(ContentProblem(where, 1, key, f"no curated {noun} {path.stem} in {folder / written}"))
    return problems


def located_evidence(curated: Mapping[str, Curated], source: Source, cache_dir: Path | None = None, name: str = "evidence") -> dict[str, Curated]:
    """`curated` with each evidence's `line` where its quote is at `source`'s revision, so a
    page links the line the claim rests on even after upstream moved it; evidence whose quote
    is gone keeps no line (`check` reports it). With `cache_dir`, each line is kept under
    `name` by the blob it was found in, the quote and the line given (`cache.cached_values`)."""
    texts = QuotedFiles(source)
    wanted = {
        (error, index): (texts.blob(e.path), e.path, e.quote, e.line)
        for error, entry in curated.items()
        for index, e in enumerate(entry.evidence or ())
    }

    def find(keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        return {key: texts.find(curated[key[0]].evidence[key[1]]) for key in keys}

    if cache_dir is None:
        lines = find(wanted)
    else:
        lines = cached_values(cache_dir, name, [__file__], wanted, find)
    located = {}
    for error, entry in curated.items():
        if entry.evidence:
            entry = replace(entry, evidence=tuple(replace(e, line=lines[error, index]) for index, e in enumerate(entry.evidence)))
        located[error] = entry
    return located


class QuotedFiles:
    """Upstream files read once each, to find quotes in them with white space not compared."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._by_path = {file.path: file for file in source.files()}
        # By path: the text without white space, and where each of its lines starts in it.
        self._texts: dict[str, tuple[str, list[int]] | None] = {}
        # By path: the names its `def` and `class` statements define, read with its text.
        self._names: dict[str, set[str]] = {}

    def exists(self, path: str) -> bool:
        return path in self._by_path

    def blob(self, path: str) -> str | None:
        """The blob sha of the file at `path`; None when there is none."""
        file = self._by_path.get(path)
        return file.blob_sha if file is not None else None

    def find(self, evidence: Evidence) -> int | None:
        """The 1-based line where `evidence.quote` starts: of several, the one nearest its
        `line`, else the first; None when the file or the quote is not there."""
        text = self._text(evidence.path)
        quote = _unspaced(evidence.quote)
        if text is None or not quote:
            return None
        squashed, starts = text
        found = []
        start = squashed.find(quote)
        while start != -1:
            # The line holding that character: the last to start at or before it (an empty
            # line starts where the next one does, and holds none).
            found.append(bisect_right(starts, start))
            start = squashed.find(quote, start + 1)
        if not found:
            return None
        near = evidence.line
        return min(found, key=lambda line: abs(line - near)) if near else found[0]

    def defines(self, path: str, function: str) -> bool:
        """Whether the file at `path` has a `def` or `class` of each part of `function`, a
        qualified name (`ServerArgs.check`, `outer.<locals>.inner`)."""
        if self._text(path) is None:
            return False
        parts = [part for part in function.removesuffix("()").split(".") if part != "<locals>"]
        return bool(parts) and all(part in self._names[path] for part in parts)

    def _text(self, path: str) -> tuple[str, list[int]] | None:
        if path not in self._texts:
            file = self._by_path.get(path)
            if file is None:
                self._texts[path] = None
            else:
                # Read once: the quotes are found in its text, the functions among its names.
                decoded = self._source.read(file).decode("utf-8", "replace")
                self._names[path] = set(_DEFINED.findall(decoded))
                lines = [_unspaced(line) for line in decoded.splitlines()]
                self._texts[path] = ("".join(lines), list(accumulate(map(len, lines[:-1]), initial=0)))
        return self._texts[path]


_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


def _unspaced(text: str) -> str:
    return "".join(text.split())


# -- Coverage --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModuleCoverage:
    """How many of one module's errors have curated text."""

    module: str
    curated: int
    total: int


@dataclass(frozen=True, slots=True)
class Coverage:
    """Curated errors over all errors, overall and per module (by the primary location's file)."""

    curated: int
    total: int
    modules: tuple[ModuleCoverage, ...]
    # Errors without an entry that a family explains (`families.assign`).
    family: int = 0

    @property
    def percent(self) -> float:
        return 100.0 * self.curated / self.total if self.total else 0.0

    @property
    def neither(self) -> int:
        """Errors explained neither by an entry nor by a family."""
        return self.total - self.curated - self.family

    def as_json(self) -> dict:
        """The coverage as the site publishes it: counts overall and per module, sorted."""
        return {
            "curated": self.curated,
            "total": self.total,
            "percent": round(self.percent, 2),
            "family": self.family,
            "neither": self.neither,
            "modules": [{"module": m.module, "curated": m.curated, "total": m.total} for m in self.modules],
        }


def module_of(path: str) -> str:
    """The dotted module of an upstream path: `python/sglang/srt/server_args.py` -> `sglang.srt.server_args`."""
    parts = path.removesuffix(".py").split("/")
    if "sglang" in parts:
        parts = parts[parts.index("sglang") :]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def coverage(entries: Iterable[ErrorEntry], curated: Iterable[str], families: Iterable[str] = ()) -> Coverage:
    """Coverage of `entries` by the curated ids, and by the ids a family explains (`families`)."""
    written = set(curated)
    explained = set(families) - written
    entries = tuple(entries)
    counts: dict[str, list[int]] = {}
    for entry in entries:
        count = counts.setdefault(module_of(entry.sites[0].path), [0, 0])
        count[0] += entry.id in written
        count[1] += 1
    modules = tuple(ModuleCoverage(name, c, t) for name, (c, t) in sorted(counts.items()))
    family = sum(1 for entry in entries if entry.id in explained)
    return Coverage(sum(m.curated for m in modules), sum(m.total for m in modules), modules, family)
