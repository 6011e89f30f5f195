"""API gate: every document under api/errors/ validates against the site's published schema
(api/schema/error.json, draft 2020-12), and api/errors/index.json lists exactly the documents
present, each once, with the document's own id, status and message.

    .venv/bin/python .ci/check_api.py SITE

Prints one line per problem (`api/errors/<id>.json: <json path>: <problem>`) and a closing
"N passed, N failed" line; exits 1 when anything failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema


def problems_of(site: Path) -> tuple[int, list[str]]:
    """(documents checked, problems) for the built site at `site`."""
    errors = site / "api" / "errors"
    schema = json.loads((site / "api" / "schema" / "error.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    problems: list[str] = []
    documents: dict[str, dict] = {}
    for path in sorted(errors.glob("*.json")):
        if path.name == "index.json":
            continue
        where = path.relative_to(site).as_posix()
        try:
            document = json.loads(path.read_bytes())
        except ValueError as error:
            problems.append(f"{where}: not JSON: {error}")
            continue
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
            pointer = "/".join(str(part) for part in error.absolute_path) or "(document)"
            problems.append(f"{where}: {pointer}: {error.message[:200]}")
        if document.get("id") != path.stem:
            problems.append(f"{where}: id: {document.get('id')!r} is not the file's name")
        documents[path.stem] = document
    listed: dict[str, dict] = {}
    for number, row in enumerate(json.loads((errors / "index.json").read_bytes())["errors"]):
        if row["id"] in listed:
            problems.append(f"api/errors/index.json: errors/{number}: {row['id']} is listed twice")
        listed[row["id"]] = row
    for missing in sorted(documents.keys() - listed.keys()):
        problems.append(f"api/errors/index.json: {missing} has a document but is not listed")
    for extra in sorted(listed.keys() - documents.keys()):
        problems.append(f"api/errors/index.json: {extra} is listed but api/errors/{extra}.json does not exist")
    for error_id in sorted(listed.keys() & documents.keys()):
        for key in ("status", "message", "kind", "exception"):
            if key in listed[error_id] and listed[error_id][key] != documents[error_id].get(key):
                problems.append(f"api/errors/index.json: {error_id}: {key} differs from api/errors/{error_id}.json")
    return len(documents), problems


def main(argv: list[str]) -> int:
    site = Path(argv[0])
    checked, problems = problems_of(site)
    for problem in problems:
        print(f"api: {problem}")
    print(f"api: {checked} documents against {site}/api/schema/error.json, index.json listing {checked}")
    print(f"{checked - len({p.split(':')[0] for p in problems})} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
