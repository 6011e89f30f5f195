"""The content schema and the reader of one content file: imported only when a file must really
be parsed or the schema published, since importing pydantic is slow (bench/README.md).

The schema lives in code (`CuratedSchema`, published as JSON Schema by `curated_json_schema`;
`FamilySchema` for the files of `content/families/`, which share its text fields, `CuratedText`).
Files are read by libyaml into values that know their lines (`yamltree`), so every problem names
the line it is on: `content/errors/<id>.yaml:12: 'solutions[0].body': must not be empty`.
ruamel.yaml's round trip writes them (`yaml_round_trip`), keeping comments and quotes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from generator.content import DEFAULT_REPO, ERROR_ID, ContentProblem, CuratedFile, markdown_problems, printed_template, template_key
from generator import yamltree
from generator.model import PHASES, Curated, Evidence, ExampleFix, Family, FamilyMatch, Solution, error_id
from generator.yamltree import Block, Map, Quoted, Seq

SCHEMA_ID = "https://errorkb.example.org/api/schema/curated.json"

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
    needs: list[Annotated[str, Field(pattern=r"^(cuda|rocm|npu|xpu|gpu|multi-gpu|network|model-weights)$")]] = Field(
        default_factory=list,
        description="What the 'before' command needs to reach this error besides SGLang on a CPU: `cuda`, "
        "`rocm`, `npu`, `xpu`, `gpu`, `multi-gpu`, `network` or `model-weights`. An example that needs any is "
        "reported as not run.",
    )


class EvidenceSchema(_Strict):
    """One line of upstream code behind a claim: where it is and a short quote of it."""

    path: Annotated[str, Field(pattern=r"^python/sglang/\S+\.py$")] = Field(
        description="The file in upstream's layout, e.g. `python/sglang/srt/server_args.py`."
    )
    quote: NonBlank = Field(
        description="A short quote of the code, as it stands in the file (whitespace is not compared)."
    )
    line: Annotated[int, Field(ge=1)] | None = Field(default=None, description="The line the quote starts on, at `written_for`.")
    function: str | None = Field(default=None, description="The qualified name of the function the quote is in.")
    claim: str | None = Field(default=None, description="What the quote backs, in a few words: `the default is 16`.")


class CuratedText(_Strict):
    """The curated text an entry and a family share: what it means, when, and the ways out."""

    explanation: Markdown = Field(description="What the error (or every error of the family) means, in two to four sentences.")
    trigger: Markdown | None = Field(
        default=None, description="When it happens, in terms of flags and hardware; replaces the trigger derived from the code."
    )
    situations: list[Markdown] = Field(
        default_factory=list, min_length=1, description="Common situations in which users meet it (or them)."
    )
    solutions: list[SolutionSchema] = Field(min_length=1, description="Ways out, best first.")
    example_fix: ExampleFixSchema | None = Field(default=None, description="A before/after command or snippet.")
    evidence: list[EvidenceSchema] = Field(
        default_factory=list, description="The lines of code behind the text's claims; `errorkb check` verifies each quote."
    )
    reports: list[Annotated[str, Field(pattern=r"^https://\S+$")]] = Field(
        default_factory=list, description="Public issue threads where users met it, shown as 'Reported in'."
    )
    tags: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]] = Field(
        default_factory=list, description="Lowercase words grouping related errors: `kv-cache`, `lora`..."
    )


class CuratedSchema(CuratedText):
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
    supersedes: list[Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]] = Field(
        default_factory=list,
        description="Ids of errors no longer raised that this error continues, when the ledger could not pair "
        "them as rewordings (their text changed too much, or the check moved to another function): the same "
        "check, as an older release wrote it. The build records each as moved to this error, so its last "
        "message is searched as an earlier wording of this one and its page leads here. Each must be a "
        "retired id of the ledger; above each, a YAML comment names the release the ledger last saw it in, its "
        "file:line and the old raising statement, for the reviewer to read in that release.",
    )
    phase: Literal[PHASES] | None = Field(
        default=None,
        description="When in SGLang's life the error is raised, where the call graph's phase is wrong: it cannot "
        "see calls made through registration tables, dispatch or getattr. Overrides the phase of the page, the API "
        "and the lists; the text's evidence must quote the call that decides it.",
    )
    printed: list[NonBlank] = Field(
        default_factory=list,
        description="Other forms in which users see the error, each as a template with `{placeholders}`, "
        "written from the code that prints it: the text its class's `__str__` gives for an error raised "
        "without a message, or a log line upstream wraps it in (`Decode transfer failed for request "
        "rank={rank} ... with exception {error}`). Search matches them as it matches the message; each "
        "needs literal text outside its placeholders, and evidence for the code that prints it.",
    )


def curated_json_schema() -> dict:
    """The content schema as JSON Schema (draft 2020-12), for the site and editors."""
    schema = CuratedSchema.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


OneOrMore = Annotated[str, Field(pattern=r"\S")] | list[Annotated[str, Field(pattern=r"\S")]]


class MatchSchema(_Strict):
    """Which errors a family claims: every criterion given must hold, at least one is given."""

    exception: OneOrMore | None = Field(
        default=None, description="The exception class, or a list of them, as `errorkb extract` names it (`ValueError`)."
    )
    message: NonBlank | None = Field(
        default=None,
        description="A Python regular expression searched in the message template as `errorkb extract` prints it "
        "(placeholders as `{expr}`); errors without literal text never match it.",
    )
    condition: NonBlank | None = Field(
        default=None,
        description="A Python regular expression searched, at every location of the error, in the condition an "
        "`assert` checks or the `if` conditions around a raise, as `errorkb extract` prints them.",
    )
    path: OneOrMore | None = Field(
        default=None,
        description="A glob, or a list of them, over upstream paths (`python/sglang/srt/models/*.py`; `*` crosses "
        "folders); every location of the error must match one.",
    )
    function: OneOrMore | None = Field(
        default=None,
        description="A glob, or a list of them, over qualified function names (`ServerArgs._handle_*`); every "
        "location of the error must match one.",
    )
    scope: Literal["product", "test", "benchmark", "example"] | list[Literal["product", "test", "benchmark", "example"]] | None = Field(
        default=None, description="Only errors of this scope (or these): `product`, `test`, `benchmark`, `example`."
    )
    kind: Literal["raise", "assert", "warning"] | list[Literal["raise", "assert", "warning"]] | None = Field(
        default=None, description="Only errors of this kind (or these): `raise`, `assert`, `warning`."
    )
    has_message: bool | None = Field(
        default=None, description="Only errors whose message has literal text (true) or has none (false)."
    )


class FamilySchema(CuratedText):
    """A curated explanation of a group of errors that share a cause: `content/families/<name>.yaml`."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")] = Field(
        description="The family's name: lowercase words joined by hyphens, the same as the file name."
    )
    title: NonBlank = Field(description="What the errors of the family have in common, in one line.")
    match: MatchSchema = Field(description="Which errors belong to the family.")
    priority: int | None = Field(
        default=None, description="Of two families that match one error, the one with the higher priority explains it."
    )


_NESTED_FIELDS = {
    "solutions": tuple(SolutionSchema.model_fields),
    "example_fix": tuple(ExampleFixSchema.model_fields),
    "evidence": tuple(EvidenceSchema.model_fields),
    "match": tuple(MatchSchema.model_fields),
}
# A printed form with less literal text than this would match too much to be searched.
PRINTED_LITERAL = 8
# Values YAML would read as numbers or booleans unless quoted.
_QUOTED_FIELDS = ("id", "fingerprint")

# -- Reading ---------------------------------------------------------------------------------------


def yaml_round_trip():
    """The YAML reader and writer that edits content files: round trip, quotes and comments
    kept. Imported here: a build only reads."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 100
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def parse_curated(text: str, path: str, repo: str = DEFAULT_REPO) -> tuple[CuratedFile | None, list[ContentProblem]]:
    """One content file's text: its record (None when invalid) and every problem in it."""
    document, schema, problems = _validated(text, path, CuratedSchema, "an id, message, explanation, ...")
    if schema is not None:
        problems.extend(_semantic_problems(schema, document, path, repo))
    return _file(document, schema, problems, lambda: _record(schema, path))


def parse_family(text: str, path: str) -> tuple[CuratedFile | None, list[ContentProblem]]:
    """One family file's text: its record (a `CuratedFile` holding a `Family`; None when
    invalid) and every problem in it, as `parse_curated` gives them."""
    document, schema, problems = _validated(text, path, FamilySchema, "a name, title, match, explanation, ...")
    if schema is not None:
        problems.extend(_family_problems(schema, document, path))
    return _file(document, schema, problems, lambda: _family_record(schema, path))


def _validated(text: str, path: str, kind: type[_Strict], fields: str) -> tuple[Map | None, Any, list[ContentProblem]]:
    """A file's YAML, checked against `kind`: the document, the schema (None when invalid) and
    the problems found so far."""
    try:
        document = yamltree.read(text)
    except yamltree.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else 1
        reason = " ".join(str(part) for part in (error.context, error.problem) if part)
        return None, None, [ContentProblem(path, line, "", f"not valid YAML: {reason}")]
    if not isinstance(document, Map):
        return None, None, [ContentProblem(path, 1, "", f"expected a mapping of fields ({fields})")]
    problems = [ContentProblem(path, line, field, problem) for field, line, problem in _document_problems(document, path, kind)]
    lines = _text_lines(document)
    for field, text in _raw_markdown_fields(document):
        for offset, problem in markdown_problems(text):
            problems.append(ContentProblem(path, lines.get(field, 1) + offset, field, problem))
    try:
        schema = kind.model_validate(_plain(document))
    except ValidationError as error:
        for detail in error.errors(include_url=False):
            location = detail["loc"]
            problems.append(ContentProblem(path, _line_of(document, location), _field_name(location), _describe(detail, kind)))
        schema = None
    return document, schema, problems


def _file(document: Map | None, schema: Any, problems: list[ContentProblem], record) -> tuple[CuratedFile | None, list[ContentProblem]]:
    if problems:
        problems.sort(key=lambda p: (p.line, p.field, p.problem))
        return None, problems
    assert schema is not None and document is not None
    return CuratedFile(record(), tuple(sorted(_text_lines(document).items()))), []


def _document_problems(document: Map, path: str, kind: type[_Strict]) -> Iterator[tuple[str, int, str]]:
    """Problems only the YAML itself shows: quoting, and the file name against the id (a
    family's: against its name)."""
    stem = Path(path).stem
    if kind is FamilySchema:
        value = document.get("name")
        if isinstance(value, str) and value != stem:
            yield "name", document.value_lines["name"], f"{value!r} does not match the file name {stem}.yaml"
        return
    for name in _QUOTED_FIELDS:
        value = document.get(name)
        if isinstance(value, str) and not isinstance(value, Quoted):
            yield name, document.value_lines[name], 'write it quoted ("...") so YAML never reads it as a number'
    value = document.get("id")
    if isinstance(value, str) and ERROR_ID.fullmatch(stem) and value != stem:
        yield "id", document.value_lines["id"], f"{value} does not match the file name {stem}.yaml"
    elif not ERROR_ID.fullmatch(stem):
        yield "", 1, "file name must be the error's id: 16 lowercase hex digits and .yaml"


def _semantic_problems(schema: CuratedSchema, document: Map, path: str, repo: str) -> Iterator[ContentProblem]:
    """What the schema cannot say: the message must give back the id, Markdown links must be
    sound, a printed form must hold text to match."""
    for index, text in enumerate(schema.printed):
        literal = "".join(part for part in printed_template(text).parts if isinstance(part, str))
        if len(literal.strip()) < PRINTED_LITERAL:
            yield ContentProblem(
                path, _line_of(document, ("printed", index)), f"printed[{index}]",
                f"needs at least {PRINTED_LITERAL} characters of text outside its placeholders to be matched",
            )
    if schema.message is not None and schema.exception is not None:
        expected = error_id(repo, schema.exception, template_key(schema.message))
        if expected != schema.id:
            line = document.value_lines["message"]
            yield ContentProblem(
                path,
                line,
                "message",
                f"exception and message give id {expected}, not {schema.id}: copy the message from "
                f"`errorkb extract` exactly",
            )


def _family_problems(schema: FamilySchema, document: Map, path: str) -> Iterator[ContentProblem]:
    """What the schema cannot say of a family: it matches by something, its pattern compiles."""
    match = schema.match
    line = document.key_lines["match"]
    if all(getattr(match, name) is None for name in ("exception", "message", "condition", "path", "function")):
        yield ContentProblem(path, line, "match", "give at least one of exception, message, condition, path, function")
    for name in ("message", "condition"):
        pattern = getattr(match, name)
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as error:
            yield ContentProblem(path, _line_of(document, ("match", name)), f"match.{name}", f"not a regular expression: {error}")


def _family_record(schema: FamilySchema, path: str) -> Family:
    match = schema.match
    return Family(
        name=schema.name,
        path=path,
        title=schema.title,
        match=FamilyMatch(
            exceptions=_many(match.exception),
            message=match.message,
            condition=match.condition,
            paths=_many(match.path),
            functions=_many(match.function),
            scopes=_many(match.scope),
            kinds=_many(match.kind),
            has_message=match.has_message,
        ),
        priority=schema.priority,
        **_texts(schema),
    )


def _many(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _texts(schema: CuratedSchema | FamilySchema) -> dict[str, Any]:
    """The curated text fields an entry and a family share, as the records hold them."""
    fix = schema.example_fix
    return {
        "explanation": schema.explanation,
        "solutions": tuple(Solution(s.title, s.body) for s in schema.solutions),
        "example_fix": ExampleFix(fix.before, fix.after, fix.language, tuple(fix.needs)) if fix else None,
        "situations": tuple(schema.situations),
        "trigger": schema.trigger,
        "tags": tuple(schema.tags),
        "evidence": tuple(Evidence(e.path, e.quote, e.line, e.function, e.claim) for e in schema.evidence),
        "reports": tuple(schema.reports),
    }


def _raw_markdown_fields(document: Map) -> Iterator[tuple[str, str]]:
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
        fingerprint=schema.fingerprint,
        review=schema.review,
        written_for=schema.written_for,
        printed=tuple(schema.printed),
        supersedes=tuple(schema.supersedes),
        phase=schema.phase,
        **_texts(schema),
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


def _line_of(document: Map, location: tuple) -> int:
    """The 1-based line of the deepest node of `location` that exists in the document."""
    node, line = document, document.line
    for step in location:
        if isinstance(node, Map) and step in node:
            line = node.key_lines[step]
            node = node[step]
        elif isinstance(node, Seq) and isinstance(step, int) and step < len(node):
            line = node.item_lines[step]
            node = node[step]
        else:
            break
    return line


def _field_name(location: tuple) -> str:
    name = ""
    for step in location:
        name += f"[{step}]" if isinstance(step, int) else (f".{step}" if name else str(step))
    return name


def _describe(detail: dict, schema: type[_Strict] = CuratedSchema) -> str:
    """A pydantic error in the words a content writer needs."""
    kind, value, location = detail["type"], detail.get("input"), detail["loc"]
    if kind == "extra_forbidden":
        fields = tuple(schema.model_fields)
        known = _NESTED_FIELDS.get(str(location[0]), fields) if len(location) > 1 else fields
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


def _text_lines(document: Map) -> dict[str, int]:
    """The 1-based line each text field's content starts on; block scalars start a line below."""
    lines: dict[str, int] = {}

    def visit(node: Any, prefix: str) -> None:
        if isinstance(node, Map):
            for key in node:
                name = f"{prefix}.{key}" if prefix else str(key)
                value = node[key]
                if isinstance(value, (Map, Seq)):
                    lines[name] = node.key_lines[key]
                    visit(value, name)
                else:
                    lines[name] = node.value_lines[key] + _block_offset(value)
        elif isinstance(node, Seq):
            for index, value in enumerate(node):
                name = f"{prefix}[{index}]"
                if isinstance(value, (Map, Seq)):
                    lines[name] = node.item_lines[index]
                    visit(value, name)
                else:
                    lines[name] = node.item_lines[index] + _block_offset(value)

    visit(document, "")
    return lines


def _block_offset(value: Any) -> int:
    """Block scalars (`|`, `>`) start their text on the line after the indicator."""
    return 1 if isinstance(value, Block) else 0
