"""Make `old_pastes.json`: 100 messages as users of SGLang 0.3.x to 0.5.x saw them, whose wording
a later release changed, each with the id whose page should come first.

Read from the committed ledger (`content/ledger/`, made by `errorkb backfill` from every release
on the package index): every earlier wording of an error raised now (`history.versions_of`),
raised by a release from 0.3.0 to 0.5.22, with some literal text. 100 are drawn evenly over
those releases' order, each filled in as a user would paste it: the exception, then the message
with a plausible value in each placeholder (a number for sizes and counts, a dtype for dtypes,
a path for paths, a word otherwise). Run from the repository root:

    .venv/bin/python tests/data/make_old_pastes.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from generator.content import printed_template
from generator.history import load_ledger, versions_of
from generator.model import release_name
from generator.search import shown_parts
from generator.upstream import version_key

ROOT = Path(__file__).resolve().parent.parent.parent
COUNT = 100

_NUMBER = re.compile(r"size|num|len|count|dim|rank|tp|dp|pp|ep|heads|layers|tokens|batch|shape|step|bytes|idx|index|id\b|\bn\b|total|max|min", re.I)


def value_of(expr: str) -> str:
    """A plausible value for a placeholder, by the words of its expression."""
    if "dtype" in expr.lower():
        return "torch.bfloat16"
    if "path" in expr.lower() or "file" in expr.lower() or "dir" in expr.lower():
        return "/models/Qwen2.5-7B-Instruct"
    if _NUMBER.search(expr):
        return "7"
    return "auto"


def paste_of(exception: str | None, message: str) -> str:
    # As the message prints: `{x=}` writes `x=` before its value (`shown_parts`).
    text = "".join(part if isinstance(part, str) else value_of(part.expr) for part in shown_parts(printed_template(message).parts))
    return f"{exception}: {text}" if exception and exception != "AssertionError" else (f"AssertionError: {text}" if exception else text)


def main() -> None:
    records = load_ledger(ROOT / "content")
    versions = versions_of(records)
    found = []
    for error, known in sorted(versions.items()):
        if known.last is not None:
            continue
        record = records[error]
        for wording in known.wordings:
            first = version_key(release_name(wording.first))
            literal = sum(len(part) for part in printed_template(wording.message).parts if isinstance(part, str))
            if first[0] or not (version_key("0.3.0") <= first <= version_key("0.5.22")) or literal < 20:
                continue
            found.append((first, error, wording))
    found.sort(key=lambda item: (item[0], item[1]))
    step = len(found) / COUNT
    chosen = [found[int(n * step)] for n in range(COUNT)]
    pastes = [
        {
            "paste": paste_of(records[error].exception, wording.message),
            "expect": error,
            "release": release_name(wording.first),
            "wording_until": release_name(wording.last),
        }
        for _, error, wording in chosen
    ]
    (ROOT / "tests" / "data" / "old_pastes.json").write_text(json.dumps(pastes, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(pastes)} pastes from {len(found)} earlier wordings")


if __name__ == "__main__":
    main()
