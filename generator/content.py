"""Curated content: one YAML file per error in `content/errors/<id>.yaml`, read and validated.

The schema lives in code (`CuratedSchema`, published as JSON Schema by `curated_json_schema`).
Files are read with ruamel.yaml's round-trip loader so every problem names the line it is on,
and every problem of every file is collected before anything fails:
`content/errors/<id>.yaml:12: 'solutions[0].body': must not be empty`.
"""

from __future__ import annotations

import difflib
import hashlib
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from importlib.metadata import version as package_version
from typing import Annotated, Any

from markdown_it import MarkdownIt
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from generator.config import Config
from generator import model
from generator.errors import ContentError
from generator.files import read_cache, write_cache
from generator.model import Curated, ExampleFix, Solution, error_id

ERRORS_FOLDER = "errors"
SCHEMA_ID = "https://errorkb.example.org/api/schema/curated.json"
DEFAULT_REPO = Config().repo
_ID = re.compile(r"[0-9a-f]{16}")
_WHITESPACE = re.compile(r"\s+")

# -- The schema ------------------------------------------------------------------------------------

NonBlank = Annotated[str, Field(pattern=r"\S")]
Markdown = Annotated[str, Field(pattern=r"\S", description="Markdown, rendered with raw HTML off.")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SolutionSchema(_Strict):
    """One way out of the error."""

    title: NonBlank = Field(description="A short imperative title, one line, e.g. 'Use an fp8 KV cache'.")
    body: Markdown = Field(description="How to do it: flags and values, why it works, what it costs.")


class ExampleFixSchema(_Strict):
    """A before/after pair: the command or code that fails, and the one that works."""

    before: NonBlank = Field(description="The failing command or code, verbatim.")
    after: NonBlank = Field(description="The working command or code, verbatim.")
    language: Annotated[str, Field(pattern=r"^[a-z0-9_+-]+$")] = Field(
        default="shell", description="Highlighting language of both sides: shell, python, json, yaml..."
    )


class CuratedSchema(_Strict):
    """The curated explanation of one error: `content/errors/<id>.yaml`."""

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] = Field(
        description="The error's id, 16 lowercase hex digits, quoted; the same as the file name."
    )
    exception: str | None = Field(
        description="The exception class the error raises (`ValueError`), or null when upstream raises "
        "something unresolvable. With `message` it must give back `id`."
    )
    message: str | None = Field(
        description="The message template exactly as `errorkb extract` shows it, placeholders as "
        "`{expr}`; null for an error whose message has no literal text."
    )
    explanation: Markdown = Field(description="What the error means, in two to four sentences.")
    trigger: Markdown | None = Field(
        default=None, description="When it happens, in terms of flags and hardware; replaces the trigger derived from the code."
    )
    situations: list[Markdown] = Field(
        default_factory=list, min_length=1, description="Common situations in which users meet it."
    )
    solutions: list[SolutionSchema] = Field(min_length=1, description="Ways out, best first.")
    example_fix: ExampleFixSchema | None = Field(default=None, description="A before/after command or snippet.")
    tags: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]] = Field(
        default_factory=list, description="Lowercase words grouping related errors: `kv-cache`, `lora`..."
    )
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = Field(
        default=None,
        description="Fingerprint of the code the text was written against (raising statements, guard "
        "conditions, signatures of the enclosing functions), stamped by `errorkb review`.",
    )
    written_for: str | None = Field(
        default=None, description="The upstream revision the fingerprint was stamped at, e.g. `v0.5.23`."
    )
    review: bool = Field(
        default=False, description="True when the text was carried over from a reworded message and waits for a human."
    )


def curated_json_schema() -> dict:
    """The content schema as JSON Schema (draft 2020-12), for the site and editors."""
    schema = CuratedSchema.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


FIELDS = tuple(CuratedSchema.model_fields)
_NESTED_FIELDS = {
    "solutions": tuple(SolutionSchema.model_fields),
    "example_fix": tuple(ExampleFixSchema.model_fields),
}
# Values YAML would read as numbers or booleans unless quoted.
_QUOTED_FIELDS = ("id", "fingerprint")

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
    """A valid content file: its record, and the line each field's text starts on.

    `lines` maps a field path (`explanation`, `solutions[1].body`, `example_fix.after`) to the
    1-based line of the first line of its text, so later checks (flags, code blocks) can cite
    the line a problem is on.
    """

    curated: Curated
    lines: tuple[tuple[str, int], ...]

    def line(self, field: str, offset: int = 0) -> int:
        return dict(self.lines).get(field, 1) + offset


# -- Reading ---------------------------------------------------------------------------------------


def load_curated(folder: Path, repo: str = DEFAULT_REPO, cache_dir: Path | None = None) -> dict[str, Curated]:
    """Every curated entry under `folder/errors/`, by id; `ContentError` listing every problem.
    With `cache_dir`, files read as they were by the last build are not parsed again."""
    files, problems = read_content(folder, repo, cache_dir)
    if problems:
        raise ContentError(format_problems(problems))
    return {error: file.curated for error, file in files.items()}


def read_content(
    folder: Path, repo: str = DEFAULT_REPO, cache_dir: Path | None = None
) -> tuple[dict[str, CuratedFile], tuple[ContentProblem, ...]]:
    """The valid files under `folder/errors/` by id, and the problems of the others; never raises
    for bad content. A missing folder is no content. With `cache_dir`, what a file's path
    and text parsed to is kept there (`ParsedFiles`)."""
    errors_folder = folder / ERRORS_FOLDER
    files: dict[str, CuratedFile] = {}
    problems: list[ContentProblem] = []
    if not errors_folder.is_dir():
        return files, ()
    parsed = ParsedFiles(cache_dir, repo)
    for path in sorted(errors_folder.iterdir()):
        if path.name.startswith(".") or path.is_dir():
            continue
        shown = str(path)
        if path.suffix != ".yaml":
            problems.append(ContentProblem(shown, 1, "", "not a .yaml file; content files are named <id>.yaml"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            problems.append(ContentProblem(shown, 1, "", f"unreadable: {error}"))
            continue
        curated, found = parsed.parse(text, shown)
        problems.extend(found)
        if curated is not None:
            files[curated.curated.id] = curated
    parsed.save()
    return files, tuple(problems)


class ParsedFiles:
    """`parse_curated` by path and text, kept in `cache_dir` from one build to the next under a
    digest of the parsing code, its libraries and the repo: reading YAML and validating it costs
    5 ms a file, and content rarely changes between builds. Without `cache_dir`, just parses."""

    def __init__(self, cache_dir: Path | None, repo: str) -> None:
        self.repo = repo
        self.known: dict[tuple[str, str], tuple[CuratedFile | None, list[ContentProblem]]] = {}
        self.used: dict[tuple[str, str], tuple[CuratedFile | None, list[ContentProblem]]] = {}
        self.path = None
        if cache_dir is None:
            return
        digest = hashlib.sha256(f"{repo}\0{package_version('pydantic')}\0{package_version('ruamel.yaml')}\0".encode())
        for module in (__file__, model.__file__):
            digest.update(Path(module).read_bytes())
        self.path = cache_dir / "content" / f"{digest.hexdigest()[:32]}.pickle"
        self.known = read_cache(self.path, dict) or {}

    def parse(self, text: str, path: str) -> tuple[CuratedFile | None, list[ContentProblem]]:
        key = (path, text)
        found = self.known.get(key)
        if found is None:
            found = parse_curated(text, path, self.repo)
        self.used[key] = found
        return found

    def save(self) -> None:
        if self.path is not None and self.used != self.known:
            write_cache(self.path, pickle.dumps(self.used, protocol=5))


def format_problems(problems) -> str:
    return "\n".join(str(problem) for problem in problems)


def yaml_round_trip() -> YAML:
    """The YAML reader and writer content files use: round trip, quotes and comments kept."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 100
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def parse_curated(text: str, path: str, repo: str = DEFAULT_REPO) -> tuple[CuratedFile | None, list[ContentProblem]]:
    """One content file's text: its record (None when invalid) and every problem in it."""
    try:
        document = yaml_round_trip().load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else 1
        reason = " ".join(str(part) for part in (error.context, error.problem) if part)
        return None, [ContentProblem(path, line, "", f"not valid YAML: {reason}")]
    if not isinstance(document, CommentedMap):
        return None, [ContentProblem(path, 1, "", "expected a mapping of fields (id, message, explanation, ...)")]
    problems = [ContentProblem(path, line, field, problem) for field, line, problem in _document_problems(document, path)]
    lines = _text_lines(document)
    for field, text in _raw_markdown_fields(document):
        for offset, problem in markdown_problems(text):
            problems.append(ContentProblem(path, lines.get(field, 1) + offset, field, problem))
    try:
        schema = CuratedSchema.model_validate(_plain(document))
    except ValidationError as error:
        for detail in error.errors(include_url=False):
            location = detail["loc"]
            problems.append(ContentProblem(path, _line_of(document, location), _field_name(location), _describe(detail)))
        schema = None
    if schema is not None:
        problems.extend(_semantic_problems(schema, document, path, repo))
    if problems:
        problems.sort(key=lambda p: (p.line, p.field, p.problem))
        return None, problems
    assert schema is not None
    return CuratedFile(_record(schema, path), tuple(sorted(_text_lines(document).items()))), []


def _document_problems(document: CommentedMap, path: str) -> Iterator[tuple[str, int, str]]:
    """Problems only the YAML itself shows: quoting, and the file name against the id."""
    for name in _QUOTED_FIELDS:
        value = document.get(name)
        if isinstance(value, str) and not isinstance(value, (DoubleQuotedScalarString, SingleQuotedScalarString)):
            yield name, document.lc.value(name)[0] + 1, 'write it quoted ("...") so YAML never reads it as a number'
    stem = Path(path).stem
    value = document.get("id")
    if isinstance(value, str) and _ID.fullmatch(stem) and value != stem:
        yield "id", document.lc.value("id")[0] + 1, f"{value} does not match the file name {stem}.yaml"
    elif not _ID.fullmatch(stem):
        yield "", 1, "file name must be the error's id: 16 lowercase hex digits and .yaml"


def _semantic_problems(schema: CuratedSchema, document: CommentedMap, path: str, repo: str) -> Iterator[ContentProblem]:
    """What the schema cannot say: the message must give back the id, Markdown links must be sound."""
    if schema.message is not None and schema.exception is not None:
        expected = error_id(repo, schema.exception, template_key(schema.message))
        if expected != schema.id:
            line = document.lc.value("message")[0] + 1
            yield ContentProblem(
                path,
                line,
                "message",
                f"exception and message give id {expected}, not {schema.id}: copy the message from "
                f"`errorkb extract` exactly",
            )


def _raw_markdown_fields(document: CommentedMap) -> Iterator[tuple[str, str]]:
    """The Markdown texts of a document that are strings, whether or not the rest is valid."""
    for name in ("explanation", "trigger"):
        if isinstance(document.get(name), str):
            yield name, document[name]
    situations = document.get("situations")
    if isinstance(situations, list):
        for index, text in enumerate(situations):
            if isinstance(text, str):
                yield f"situations[{index}]", text
    solutions = document.get("solutions")
    if isinstance(solutions, list):
        for index, solution in enumerate(solutions):
            if isinstance(solution, dict):
                for name in ("title", "body"):
                    if isinstance(solution.get(name), str):
                        yield f"solutions[{index}].{name}", solution[name]


def _record(schema: CuratedSchema, path: str) -> Curated:
    return Curated(
        id=schema.id,
        path=path,
        message=schema.message,
        explanation=schema.explanation,
        solutions=tuple(Solution(s.title, s.body) for s in schema.solutions),
        example_fix=ExampleFix(schema.example_fix.before, schema.example_fix.after, schema.example_fix.language)
        if schema.example_fix
        else None,
        situations=tuple(schema.situations),
        trigger=schema.trigger,
        tags=tuple(schema.tags),
        fingerprint=schema.fingerprint,
        review=schema.review,
        written_for=schema.written_for,
    )


def _plain(node: Any) -> Any:
    """The YAML tree as plain dicts, lists and scalars, for the schema."""
    if isinstance(node, dict):
        return {str(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, str):
        return str(node)
    return node


# -- Locating problems -----------------------------------------------------------------------------


def _line_of(document: CommentedMap, location: tuple) -> int:
    """The 1-based line of the deepest node of `location` that exists in the document."""
    node, line = document, document.lc.line + 1
    for step in location:
        if isinstance(node, CommentedMap) and step in node:
            line = node.lc.key(step)[0] + 1
            node = node[step]
        elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
            line = node.lc.item(step)[0] + 1
            node = node[step]
        else:
            break
    return line


def _field_name(location: tuple) -> str:
    name = ""
    for step in location:
        name += f"[{step}]" if isinstance(step, int) else (f".{step}" if name else str(step))
    return name


def _describe(detail: dict) -> str:
    """A pydantic error in the words a content writer needs."""
    kind, value, location = detail["type"], detail.get("input"), detail["loc"]
    if kind == "extra_forbidden":
        known = _NESTED_FIELDS.get(str(location[0]), FIELDS) if len(location) > 1 else FIELDS
        close = difflib.get_close_matches(str(location[-1]), known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known fields: {', '.join(known)}"
        return "unknown field" + hint
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = detail.get("ctx", {}).get("pattern", "")
        if pattern == r"\S":
            return "must not be empty"
        if "0-9a-f]{16}" in pattern:
            return f"expected 16 lowercase hex digits, got {value!r}"
        return f"{value!r} does not match {pattern}"
    if kind == "too_short":
        return "empty section: write at least one item or remove the field"
    expected = {
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "bool_type": "true or false",
    }.get(kind)
    if expected:
        quote = "; write it quoted" if location[0] in _QUOTED_FIELDS and value is not None else ""
        return f"expected {expected}, got {_yaml_type(value)}{quote}"
    return detail["msg"]


def _yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _text_lines(document: CommentedMap) -> dict[str, int]:
    """The 1-based line each text field's content starts on; block scalars start a line below."""
    lines: dict[str, int] = {}

    def visit(node: Any, prefix: str) -> None:
        if isinstance(node, CommentedMap):
            for key in node:
                name = f"{prefix}.{key}" if prefix else str(key)
                value = node[key]
                if isinstance(value, (CommentedMap, CommentedSeq)):
                    lines[name] = node.lc.key(key)[0] + 1
                    visit(value, name)
                else:
                    lines[name] = node.lc.value(key)[0] + 1 + _block_offset(value)
        elif isinstance(node, CommentedSeq):
            for index, value in enumerate(node):
                name = f"{prefix}[{index}]"
                if isinstance(value, (CommentedMap, CommentedSeq)):
                    lines[name] = node.lc.item(index)[0] + 1
                    visit(value, name)
                else:
                    lines[name] = node.lc.item(index)[0] + 1 + _block_offset(value)

    visit(document, "")
    return lines


def _block_offset(value: Any) -> int:
    """Block scalars (`|`, `>`) start their text on the line after the indicator."""
    return 1 if type(value).__name__ in ("LiteralScalarString", "FoldedScalarString") else 0


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
                if match and not _ID.fullmatch(match["id"]):
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
                if match and _ID.fullmatch(match["id"]):
                    yield match["id"]


# -- Templates -------------------------------------------------------------------------------------


def template_key(message: str) -> str:
    """The id key of a template's text: every `{expr}` written `{}`, whitespace collapsed.

    The inverse of `Template.text`: doubled braces are literal, a single `{` opens a placeholder
    that runs to its matching `}` (expressions may hold braces of their own).
    """
    out, index, length = [], 0, len(message)
    while index < length:
        char = message[index]
        if message.startswith("{{", index) or message.startswith("}}", index):
            out.append(message[index : index + 2])
            index += 2
        elif char == "{":
            depth, index = 1, index + 1
            while index < length and depth:
                depth += {"{": 1, "}": -1}.get(message[index], 0)
                index += 1
            out.append("{}")
        else:
            out.append(char)
            index += 1
    return _WHITESPACE.sub(" ", "".join(out)).strip()


def same_message(written: str | None, template: str | None) -> bool:
    """Whether a content file's message is the template's text, whitespace aside."""
    if written is None or template is None:
        return written is template
    return _WHITESPACE.sub(" ", written).strip() == _WHITESPACE.sub(" ", template).strip()
