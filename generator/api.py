"""The static JSON API: one document per error, the index, the schema and the change list.

Documents are plain data built from articles; `dumps` gives the bytes every file is written
with: sorted keys, UTF-8, a trailing newline.
"""

from __future__ import annotations

import orjson
from collections.abc import Sequence

from generator.model import PHASES, Article, Callers, Change, Curated, Family, ListedError, Upstream, Versions

SCHEMA_VERSION = 1


def dumps(document) -> bytes:
    """A document as the API serves it: sorted keys, UTF-8 (not escaped), compact, a trailing
    newline. The bytes of `json.dumps(document, sort_keys=True, ensure_ascii=False,
    separators=(",", ":"))`, made by orjson in a fifth of the time (bench/README.md)."""
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def error_document(article: Article, upstream: Upstream) -> dict:
    """Everything the error's page says, as data (SPEC, "Interfaces other programs rely on")."""
    curated = article.curated
    record = article.record
    document = {
        "schema_version": SCHEMA_VERSION,
        "id": article.id,
        "kind": article.kind,
        "exception": article.exception,
        "message": article.message,
        "title": article.title,
        "status": article.status,
        "scope": article.scope,
        "phase": article.phase,
        "upstream": {"repo": upstream.repo, "revision": upstream.revision, "date": upstream.date},
        "locations": [
            {
                "path": location.site.path,
                "line": location.site.line,
                "end_line": location.site.end_line,
                "function": location.site.function,
                "conditions": list(location.site.conditions),
                "checks_passed": list(location.site.checks_passed),
                "context": list(location.site.context),
                "assert_condition": location.site.assert_condition,
                "url": location.url,
                "phase": location.route.phase if location.route else None,
                "callers": _callers(location.route.callers) if location.route else None,
                "docstring": location.docstring,
                "snippet": None
                if location.snippet is None
                else {
                    "start": location.snippet.start,
                    "end": location.snippet.start + len(location.snippet.lines) - 1,
                    "code": "\n".join(location.snippet.lines) + "\n",
                },
            }
            for location in article.locations
        ],
        "placeholders": [part.render() for part in article.template.placeholders] if article.template else [],
        "trigger": article.trigger,
        "trigger_curated": article.trigger_curated,
        "mentions": list(article.mentions),
        "settings": [
            {
                "name": setting.name, "help": setting.help, "default": setting.default,
                "choices": list(setting.choices) if setting.choices is not None else None,
                "url": article.upstream.url(setting.path, setting.line),
            }
            for setting in article.settings
        ],
        **_texts(curated, article.upstream),
        "family": (
            {"name": article.family.name, "title": article.family.title, **_texts(article.family, article.upstream), "trigger": article.family.trigger}
            if article.family
            else None
        ),
        "curated": curated is not None,
        "review": bool(curated and curated.review),
        "stale": article.stale,
        "related": [{"id": r.id, "message": r.title} for r in article.related],
        "aliases": list(article.aliases),
        # Other forms users see it in, written by hand from the code that prints them.
        "printed": list(curated.printed) if curated else [],
        "moved_to": record.moved_to if record and article.status == "moved" else None,
        "split_into": list(record.split_into) if record and article.status == "split" else [],
        "retired_in": record.retired_in if record and article.status == "retired" else None,
        "last_seen": record.last_seen if record else None,
        "last_location": (
            {"path": record.path, "line": record.line, "function": record.function} if record and record.path else None
        ),
        "versions": _versions(article.versions),
    }
    return document


def _callers(callers: Callers) -> dict:
    """A tree of callers (`model.Callers`) as data: each call's place, function and
    conditions, and its own callers; `more` counts the callers not listed."""
    return {
        "nodes": [
            {"path": n.path, "line": n.line, "function": n.function, "conditions": list(n.conditions), "callers": _callers(n.callers)}
            for n in callers.nodes
        ],
        "more": callers.more,
    }


def _versions(versions: Versions | None) -> dict | None:
    """The releases that raised an error, as tags name them: first, last (null while the
    newest build raises it), the one it was retired in, and its earlier wordings."""
    if versions is None:
        return None
    return {
        "first": versions.first,
        "last": versions.last,
        "retired_in": versions.retired_in or None,
        "wordings": [{"message": w.message, "first": w.first, "last": w.last, "reworded_in": w.reworded_in or None} for w in versions.wordings],
        "places": [{"path": p.path, "line": p.line, "function": p.function, "first": p.first, "last": p.last, "moved_in": p.moved_in} for p in versions.places],
    }


def _texts(text: Curated | Family | None, upstream: Upstream) -> dict:
    """The curated text of an entry or of a family, as the document holds it (empty for none)."""
    fix = text.example_fix if text else None
    return {
        "explanation": text.explanation if text else None,
        "solutions": [{"title": s.title, "body": s.body} for s in text.solutions] if text else [],
        "example_fix": (
            {"before": fix.before, "after": fix.after, "language": fix.language, "reproduced_with": fix.reproduced_with} if fix else None
        ),
        "situations": list(text.situations) if text else [],
        "evidence": [
            {"path": e.path, "line": e.line, "quote": e.quote, "claim": e.claim, "url": upstream.url(e.path, e.line)} for e in text.evidence
        ]
        if text
        else [],
        "reports": list(text.reports) if text else [],
        "tags": list(text.tags) if text else [],
    }


def index_document(articles: Sequence[Article | ListedError], upstream: Upstream) -> dict:
    """Every error, one short record each, sorted by id: from the articles, or as the lists
    show them (`derive.listed_errors`), which give the same."""
    return {
        "schema_version": SCHEMA_VERSION,
        "upstream": {"repo": upstream.repo, "revision": upstream.revision, "date": upstream.date},
        "errors": [
            {
                "id": article.id,
                "kind": article.kind,
                "exception": article.exception,
                "message": article.message,
                "title": article.title,
                "status": article.status,
                "path": article.sites[0].path if article.sites else (article.record.path if article.record else ""),
                "curated": article.curated is not None,
                "phase": article.phase,
            }
            for article in articles
        ],
    }


def changes_document(changes: tuple[Change, ...]) -> dict:
    """The change list, newest first (by date, then revision, then id)."""
    ordered = sorted(changes, key=lambda c: (c.date, c.revision, c.id), reverse=True)
    return {
        "schema_version": SCHEMA_VERSION,
        "changes": [
            {"id": c.id, "revision": c.revision, "date": c.date, "change": c.change, "message": c.message, "detail": c.detail}
            for c in ordered
        ],
    }


def release_document(name: str, revision: str, date: str, changes: list[Change]) -> dict:
    """One release's changes (`/api/releases/<release>.json`), by kind then id."""
    return {
        "schema_version": SCHEMA_VERSION,
        "release": name,
        "revision": revision,
        "date": date,
        "changes": [{"id": c.id, "change": c.change, "message": c.message, "detail": c.detail} for c in changes],
    }


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_ID = {"type": "string", "pattern": "^[0-9a-f]{16}$"}


_PHASE = (
    "When in SGLang's life it is raised, from a static call graph of upstream's code: launch (argument and environment "
    "resolution at start-up), load (model config, weights, tokenizer, quantization, memory pools, CUDA graphs), request "
    "(validating one client request), serving (scheduler, workers, kernels, communication), tool (CLI utilities, "
    "benchmarks, the client-side language, SGLang's own tests), unreachable (nothing in the tree calls it). Null for an "
    "error no longer raised."
)

# The tree of a function's callers, as `_callers` writes it.
_CALLERS = {
    "type": "object",
    "description": "The functions that call the one around the site, up to three levels up, each call with the `if` tests "
    "around it in its function; `more` counts the callers not listed. Calls through registration tables or getattr are not seen.",
    "required": ["nodes", "more"],
    "properties": {
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "line", "function", "conditions", "callers"],
                "properties": {
                    "path": _STRING, "line": {"type": "integer", "minimum": 1}, "function": _STRING, "conditions": _STRINGS,
                    "callers": {"$ref": "#/$defs/callers"},
                },
                "additionalProperties": False,
            },
        },
        "more": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}


def error_schema(base_url: str) -> dict:
    """The JSON Schema (draft 2020-12) of `/api/errors/<id>.json`."""
    location = {
        "type": "object",
        "required": ["path", "line", "function", "conditions", "url", "snippet"],
        "properties": {
            "path": _STRING,
            "line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
            "function": _STRING,
            "conditions": _STRINGS,
            "checks_passed": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0},
                "description": "Positions in `conditions` of those that hold only because an earlier check above the site did not raise.",
            },
            "context": _STRINGS,
            "assert_condition": _nullable(_STRING),
            "url": {"type": "string", "pattern": "^https://.*#L[0-9]+$"},
            "phase": _nullable({"enum": list(PHASES), "description": _PHASE}),
            "callers": _nullable({"$ref": "#/$defs/callers"}),
            "docstring": _nullable(_STRING),
            "snippet": _nullable(
                {
                    "type": "object",
                    "required": ["start", "end", "code"],
                    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}, "code": _STRING},
                    "additionalProperties": False,
                }
            ),
        },
        "additionalProperties": False,
    }
    # The curated text of the entry, and the same fields of its family.
    texts = {
        "explanation": _nullable(_STRING),
        "solutions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["title", "body"],
                "properties": {"title": _STRING, "body": _STRING},
                "additionalProperties": False,
            },
        },
        "example_fix": _nullable(
            {
                "type": "object",
                "required": ["before", "after", "language"],
                "properties": {"before": _STRING, "after": _STRING, "language": _STRING, "reproduced_with": _nullable(_STRING)},
                "additionalProperties": False,
            }
        ),
        "situations": _STRINGS,
        "evidence": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "line", "quote", "claim", "url"],
                "properties": {
                    "path": _STRING, "line": _nullable({"type": "integer"}), "quote": _STRING, "claim": _nullable(_STRING), "url": _STRING,
                },
                "additionalProperties": False,
            },
        },
        "reports": _STRINGS,
        "tags": _STRINGS,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": base_url.rstrip("/") + "/api/schema/error.json",
        "title": "An SGLang error as errorkb describes it",
        "$defs": {"callers": _CALLERS},
        "type": "object",
        "required": [
            "schema_version", "id", "kind", "exception", "message", "upstream", "locations", "trigger",
            "explanation", "solutions", "example_fix", "situations", "related", "curated", "family", "aliases", "status",
        ],
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION},
            "id": _ID,
            "kind": {"enum": ["raise", "assert", "warning"]},
            "exception": _nullable(_STRING),
            "message": _nullable(_STRING),
            "title": _STRING,
            "status": {"enum": ["active", "retired", "moved", "split"]},
            "scope": {"enum": ["product", "test", "benchmark", "example"]},
            "phase": _nullable({"enum": list(PHASES), "description": "The earliest phase of its locations, or the one its curated entry gives where the call graph cannot see the path (`content/README.md`, `phase`). " + _PHASE}),
            "upstream": {
                "type": "object",
                "required": ["repo", "revision", "date"],
                "properties": {"repo": _STRING, "revision": _STRING, "date": _STRING},
                "additionalProperties": False,
            },
            "locations": {"type": "array", "items": location},
            "placeholders": _STRINGS,
            "trigger": _nullable(_STRING),
            "trigger_curated": {"type": "boolean"},
            "mentions": _STRINGS,
            "settings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "help", "default", "choices", "url"],
                    "properties": {
                        "name": _STRING, "help": _nullable(_STRING), "default": _nullable(_STRING), "choices": _nullable(_STRINGS), "url": _STRING,
                    },
                    "additionalProperties": False,
                },
            },
            **texts,
            "family": _nullable(
                {
                    "type": "object",
                    "description": "The family of errors that share this error's cause (`content/families/<name>.yaml`), whose "
                    "text explains it when it has no curated entry of its own; null when it has one, or no family claims it.",
                    "required": ["name", "title", *texts],
                    "properties": {
                        "name": _STRING,
                        "title": _STRING,
                        **texts,
                        "trigger": {**_nullable(_STRING), "description": "When errors of the family happen, in Markdown."},
                    },
                    "additionalProperties": False,
                }
            ),
            "curated": {
                "type": "boolean",
                "description": "Whether the error has a curated entry of its own (`content/errors/<id>.yaml`); false for an "
                "error explained only by its family (`family`).",
            },
            "review": {"type": "boolean"},
            "stale": _nullable(_STRING),
            "related": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "message"],
                    "properties": {"id": _ID, "message": _STRING},
                    "additionalProperties": False,
                },
            },
            "aliases": {"type": "array", "items": _ID},
            "printed": {
                "description": "Other forms in which users see the error (the text its class prints, a log line "
                "upstream wraps it in), as templates with {placeholders}; curated.",
                **_STRINGS,
            },
            "moved_to": _nullable(_ID),
            "split_into": {"type": "array", "items": _ID},
            "retired_in": _nullable(_STRING),
            "last_seen": _nullable(_STRING),
            "last_location": _nullable(
                {
                    "type": "object",
                    "required": ["path", "line", "function"],
                    "properties": {"path": _STRING, "line": {"type": "integer"}, "function": _STRING},
                    "additionalProperties": False,
                }
            ),
            "versions": _nullable(
                {
                    "type": "object",
                    "description": "The releases that raised the error, as the ledger (`content/ledger/`) knows them, named by "
                    "upstream's tags (or commits): the first (the earliest of its own and of the earlier ids reworded into it), "
                    "the last (null while the newest build raises it), the one it was retired in (null unless retired), and its "
                    "earlier wordings, oldest first, each with the releases that raised it and the one that reworded it; "
                    "and the places it was raised in before it moved.",
                    "required": ["first", "last", "retired_in", "wordings", "places"],
                    "properties": {
                        "first": _STRING,
                        "last": _nullable(_STRING),
                        "retired_in": _nullable(_STRING),
                        "places": {
                            "type": "array",
                            "description": "Where earlier releases raised it before it moved to another line, file or function, "
                            "oldest first, one place per run of releases that raised it there: path, line, function, the first "
                            "release that raised it there (null when unknown), the last (null when the ledger knows only the "
                            "move) and the release that raised it elsewhere next, or retired it.",
                            "items": {
                                "type": "object",
                                "required": ["path", "line", "function", "first", "last", "moved_in"],
                                "properties": {
                                    "path": _STRING, "line": {"type": "integer"}, "function": _STRING,
                                    "first": _nullable(_STRING), "last": _nullable(_STRING), "moved_in": _STRING,
                                },
                                "additionalProperties": False,
                            },
                        },
                        "wordings": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["message", "first", "last", "reworded_in"],
                                "properties": {"message": _STRING, "first": _STRING, "last": _STRING, "reworded_in": _nullable(_STRING)},
                                "additionalProperties": False,
                            },
                        },
                    },
                    "additionalProperties": False,
                }
            ),
        },
        "allOf": [
            {"if": {"properties": {"status": {"const": "moved"}}}, "then": {"properties": {"moved_to": _ID}, "required": ["moved_to"]}},
        ],
        "additionalProperties": False,
    }
