"""Curated content: one YAML file per error in `content/errors/<id>.yaml`, and one per family
of errors in `content/families/<name>.yaml`, read and validated.

Every problem of every file is collected before anything fails:
`content/errors/<id>.yaml:12: 'solutions[0].body': must not be empty`. The schema and the
reader of one file (`generator.schema`, with pydantic) are imported only to
parse a file, and a build parses only files new or edited since the last one (`ParsedFiles`).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from importlib.metadata import version as package_version
from importlib.util import find_spec

from markdown_it import MarkdownIt

from generator.config import Config
from generator import model
from generator.errors import ContentError
from generator.cache import kept
from generator.files import read_cache, write_cache
from generator.model import Curated, Family

ERRORS_FOLDER = "errors"
FAMILIES_FOLDER = "families"
DEFAULT_REPO = Config().repo
ERROR_ID = re.compile(r"[0-9a-f]{16}")
_WHITESPACE = re.compile(r"\s+")

# -- Records ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContentProblem:
    """One problem in one content file: where, which field, what is wrong."""

    path: str
    line: int
    field: str
    problem: str

    def __str__(self) -> str:
        field = f"'{self.field}'" if self.field else "file"
        return f"{self.path}:{self.line}: {field}: {self.problem}"


@dataclass(frozen=True, slots=True)
class CuratedFile:
    """A valid content file: its record (an entry's `Curated`, or a `Family`), and the line
    each field's text starts on.

    `lines` maps a field path (`explanation`, `solutions[1].body`, `example_fix.after`) to the
    1-based line of the first line of its text, so later checks (flags, code blocks) can cite
    the line a problem is on.
    """

    curated: Curated | Family
    lines: tuple[tuple[str, int], ...]

    def line(self, field: str, offset: int = 0) -> int:
        return dict(self.lines).get(field, 1) + offset


# -- Reading ---------------------------------------------------------------------------------------


def load_curated(folder: Path, repo: str = DEFAULT_REPO, cache_dir: Path | None = None) -> dict[str, Curated]:
    """Every curated entry under `folder/errors/`, by id; `ContentError` listing every problem.
    With `cache_dir`, files read as they were by the last build are not parsed again. Example
    fixes say which SGLang reproduced them (`with_reproduced`)."""
    files, problems = read_content(folder, repo, cache_dir)
    if problems:
        raise ContentError(format_problems(problems))
    return with_reproduced({error: file.curated for error, file in files.items()}, folder)


def with_reproduced(curated: dict[str, Curated], folder: Path) -> dict[str, Curated]:
    """The entries with the SGLang version each example fix was reproduced with, where
    `folder/reproduced.json` holds that very example of that very entry (`examples.reproduced_with`)."""
    from generator.examples import read_record, reproduced_with

    record = read_record(folder)
    out = {}
    for error, entry in curated.items():
        version = reproduced_with(entry, record) if record else None
        out[error] = replace(entry, example_fix=replace(entry.example_fix, reproduced_with=version)) if version else entry
    return out


def read_content(
    folder: Path, repo: str = DEFAULT_REPO, cache_dir: Path | None = None
) -> tuple[dict[str, CuratedFile], tuple[ContentProblem, ...]]:
    """The valid files under `folder/errors/` by id, and the problems of the others; never raises
    for bad content. A missing folder is no content. With `cache_dir`, what a file's path
    and text parsed to is kept there (`ParsedFiles`)."""
    parsed = ParsedFiles(cache_dir, repo)
    files, problems = _read_folder(folder / ERRORS_FOLDER, parsed, "<id>.yaml")
    parsed.save()
    return {file.curated.id: file for file in files}, problems


def read_families(
    folder: Path, cache_dir: Path | None = None, repo: str = DEFAULT_REPO
) -> tuple[dict[str, CuratedFile], tuple[ContentProblem, ...]]:
    """The valid family files under `folder/families/` by name (each `CuratedFile` holds a
    `Family`), and the problems of the others, as `read_content` gives them."""
    parsed = ParsedFiles(cache_dir, repo, FAMILIES_FOLDER)
    files, problems = _read_folder(folder / FAMILIES_FOLDER, parsed, "<name>.yaml")
    parsed.save()
    return {file.curated.name: file for file in files}, problems


def load_families(folder: Path, cache_dir: Path | None = None, repo: str = DEFAULT_REPO) -> tuple[Family, ...]:
    """Every family under `folder/families/`, sorted by name; `ContentError` listing every problem."""
    files, problems = read_families(folder, cache_dir, repo)
    if problems:
        raise ContentError(format_problems(problems))
    return tuple(files[name].curated for name in sorted(files))


def _read_folder(folder: Path, parsed: ParsedFiles, named: str) -> tuple[list[CuratedFile], tuple[ContentProblem, ...]]:
    files: list[CuratedFile] = []
    problems: list[ContentProblem] = []
    if not folder.is_dir():
        return files, ()
    read: list[tuple[str, str]] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_dir():
            continue
        shown = str(path)
        if path.suffix != ".yaml":
            problems.append(ContentProblem(shown, 1, "", f"not a .yaml file; content files are named {named}"))
            continue
        try:
            read.append((path.read_text(encoding="utf-8"), shown))
        except (OSError, UnicodeDecodeError) as error:
            problems.append(ContentProblem(shown, 1, "", f"unreadable: {error}"))
    for text, shown in read:
        curated, found = parsed.parse(text, shown, family=folder.name == FAMILIES_FOLDER)
        problems.extend(found)
        if curated is not None:
            files.append(curated)
    problems.sort(key=lambda problem: problem.path)
    return files, tuple(problems)


class ParsedFiles:
    """`schema.parse_curated` by path and text, kept in `cache_dir` from one build to the next
    under a digest of the parsing code, its libraries and the repo: reading and validating YAML,
    and importing the libraries that do it, cost more than reading the cache, while content
    rarely changes between builds (bench/README.md). Without `cache_dir`, just parses."""

    def __init__(self, cache_dir: Path | None, repo: str, folder: str = ERRORS_FOLDER) -> None:
        self.repo = repo
        self.known: dict[tuple[str, str], tuple[CuratedFile | None, list[ContentProblem]]] = {}
        self.used: dict[tuple[str, str], tuple[CuratedFile | None, list[ContentProblem]]] = {}
        self.path = None
        if cache_dir is None:
            return
        # The schema module found without importing it: a build whose files are all cached
        # never loads pydantic.
        code = [f"{repo}\0", package_version("pydantic"), package_version("PyYAML"), __file__, find_spec("generator.schema").origin, find_spec("generator.yamltree").origin, model.__file__]
        # One cache per folder: each is saved with only what its own files parsed to.
        self.path = kept(cache_dir, "content", code, "" if folder == ERRORS_FOLDER else "-" + folder)
        self.known = read_cache(self.path, dict) or {}

    def parse(self, text: str, path: str, family: bool = False) -> tuple[CuratedFile | None, list[ContentProblem]]:
        key = (path, text)
        found = self.known.get(key)
        if found is None:
            from generator import schema

            found = schema.parse_family(text, path) if family else schema.parse_curated(text, path, self.repo)
        self.used[key] = found
        return found

    def save(self) -> None:
        if self.path is not None and self.used != self.known:
            write_cache(self.path, pickle.dumps(self.used, protocol=5))


def format_problems(problems) -> str:
    return "\n".join(str(problem) for problem in problems)


# -- Markdown --------------------------------------------------------------------------------------

_MARKDOWN = MarkdownIt("commonmark", {"html": False})
_LEFTOVER_LINK = re.compile(r"\[[^\]\n]*\]\(|\[[^\]\n]+\]\[[^\]\n]*\]")
_SAFE_HREF = re.compile(r"^(https?://[^\s]+|mailto:[^\s]+|/[^\s]*|#[^\s]*)$")
_ERROR_LINK = re.compile(r"^/errors/(?P<id>[^/#?]*)/?(#.*)?$")


def markdown_parser() -> MarkdownIt:
    """The Markdown dialect of content files: CommonMark, raw HTML off (as the site renders it)."""
    return _MARKDOWN


def markdown_fields(curated: Curated) -> Iterator[tuple[str, str]]:
    """Every Markdown text of an entry with its field path."""
    yield "explanation", curated.explanation
    if curated.trigger is not None:
        yield "trigger", curated.trigger
    for index, situation in enumerate(curated.situations):
        yield f"situations[{index}]", situation
    for index, solution in enumerate(curated.solutions):
        yield f"solutions[{index}].title", solution.title
        yield f"solutions[{index}].body", solution.body


def markdown_problems(text: str) -> Iterator[tuple[int, str]]:
    """Links that are broken or unsafe, as (line offset in `text`, problem)."""
    for token in _MARKDOWN.parse(text):
        if token.type != "inline" or not token.children:
            continue
        offset = token.map[0] if token.map else 0
        for child in token.children:
            if child.type == "link_open":
                href = str(child.attrs.get("href", ""))
                if not _SAFE_HREF.match(href):
                    yield offset, f"link target {href!r}: use an https:// URL, a site path (/errors/<id>/) or #anchor"
                match = _ERROR_LINK.match(href)
                if match and not ERROR_ID.fullmatch(match["id"]):
                    yield offset, f"link target {href!r}: an error link needs a 16-hex-digit id"
            elif child.type == "text" and _LEFTOVER_LINK.search(child.content):
                found = _LEFTOVER_LINK.search(child.content)
                yield offset, f"broken or unsafe link near {found.group(0)!r}: write [text](https://...)"


def error_links(text: str) -> Iterator[str]:
    """The ids of `/errors/<id>/` links in Markdown text."""
    for token in _MARKDOWN.parse(text):
        for child in token.children or ():
            if child.type == "link_open":
                match = _ERROR_LINK.match(str(child.attrs.get("href", "")))
                if match and ERROR_ID.fullmatch(match["id"]):
                    yield match["id"]


# -- Templates -------------------------------------------------------------------------------------


# A self-documenting placeholder's text, `{expr=}` (with its conversion and format spec, if
# any): its key is `expr={}`, as the extractor's, and it prints `expr=` before its value.
_DOCUMENTED = re.compile(r"(?P<expr>.*?)=(?:!(?P<conversion>[rsa]))?(?::(?P<spec>[^{}]*))?$", re.DOTALL)


def template_key(message: str) -> str:
    """The id key of a template's text: every `{expr}` written `{}`, whitespace collapsed.

    The inverse of `Template.text`: doubled braces are literal, a single `{` opens a placeholder
    that runs to its matching `}` (expressions may hold braces of their own).
    """
    out = []
    for literal, expr in _pieces(message):
        if expr is None:
            out.append(literal)
        else:
            documented = _DOCUMENTED.match(expr)
            out.append(documented["expr"] + "={}" if documented else "{}")
    return _WHITESPACE.sub(" ", "".join(out)).strip()


def printed_forms(curated: Mapping[str, Curated]) -> dict[str, tuple[str, ...]]:
    """By id, the printed forms of the curated entries (`Curated.printed`) that have some."""
    return {error: entry.printed for error, entry in sorted(curated.items()) if entry.printed}


def printed_template(text: str) -> model.Template:
    """A template written as `Template.text` writes one (a curated `printed` form, a message
    the ledger keeps): literal text with doubled braces undoubled, each `{expr}` a placeholder,
    and `{expr=}` one that prints `expr=` before its value (`Placeholder.equal`)."""
    parts: list[str | model.Placeholder] = []
    for literal, expr in _pieces(text):
        if expr is not None:
            parts.append(_placeholder(expr))
            continue
        character = literal[0]  # a doubled brace is one brace
        if parts and isinstance(parts[-1], str):
            parts[-1] += character
        else:
            parts.append(character)
    return model.Template(tuple(parts))


def _placeholder(text: str) -> model.Placeholder:
    found = _DOCUMENTED.match(text)
    if found is None:
        return model.Placeholder(text)
    return model.Placeholder(found["expr"], found["conversion"] or "", found["spec"] or "", equal=True)


def _pieces(message: str) -> Iterator[tuple[str, str | None]]:
    """A template's text in order: (a literal character or doubled brace, None), or ("", the
    expression of a placeholder)."""
    index, length = 0, len(message)
    while index < length:
        char = message[index]
        if message.startswith("{{", index) or message.startswith("}}", index):
            yield message[index : index + 2], None
            index += 2
        elif char == "{":
            start, depth, index = index + 1, 1, index + 1
            while index < length and depth:
                depth += {"{": 1, "}": -1}.get(message[index], 0)
                index += 1
            yield "", message[start : index - 1]
        else:
            yield char, None
            index += 1


def same_message(written: str | None, template: str | None) -> bool:
    """Whether a content file's message is the template's text, whitespace aside."""
    if written is None or template is None:
        return written is template
    return _WHITESPACE.sub(" ", written).strip() == _WHITESPACE.sub(" ", template).strip()
