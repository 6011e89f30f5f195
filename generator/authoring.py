"""Writing content files: a scaffold for a new error, and re-stamping after a review.

Both work on text. A scaffold is built line by line so its comments land where a writer needs
them; a re-stamp rewrites only the `fingerprint`, `written_for` and `review` lines, so every
comment, quote style and line break a writer chose stays as it was.
"""

from __future__ import annotations

import json
import re

from ruamel.yaml.comments import CommentedMap

from generator.errors import ContentError
from generator.model import ErrorEntry, Upstream
from generator.schema import yaml_round_trip

_STAMPED = ("fingerprint", "written_for", "review")


def derived_trigger(entry: ErrorEntry) -> str:
    """When the error is raised, from the guard conditions of its sites, one line per site."""
    lines = []
    for site in entry.sites:
        where = f"{site.function or '<module>'} ({site.path}:{site.line})"
        conditions = list(site.conditions)
        if site.kind == "assert" and site.assert_condition:
            conditions.append(f"not ({site.assert_condition})")
        when = " and ".join(f"`{c}`" for c in conditions) if conditions else "whenever it runs"
        lines.append(f"In {where}: {when}.")
    return "\n".join(lines)


def scaffold_text(entry: ErrorEntry, fingerprint: str, upstream: Upstream) -> str:
    """A new content file for `entry`: the facts as comments, the fields to write left empty,
    and the fingerprint of today's code so the text is checked against the code it describes."""
    comment = ["# Curated explanation of one SGLang error. Field reference: content/README.md."]
    comment.append(f"# Upstream {upstream.repo} at {upstream.revision}:")
    comment.append(f"#   {entry.kind} {entry.exception or '(unknown exception)'}: {entry.title}")
    for site in entry.sites[:20]:
        comment.append(f"#   at {site.path}:{site.line} in {site.function or '<module>'}")
        for condition in site.conditions:
            comment.append(f"#     when {condition}")
        if site.assert_condition:
            comment.append(f"#     asserts {site.assert_condition}")
    if len(entry.sites) > 20:
        comment.append(f"#   ... and {len(entry.sites) - 20} more locations")
    comment.append("# Derived trigger (write `trigger:` to replace it with words a user knows):")
    comment.extend(f"#   {line}" for line in derived_trigger(entry).splitlines())
    # A message or condition can span lines: each of its lines stays inside the comment.
    comment = [part if number == 0 else f"#       {part}" for line in comment for number, part in enumerate(line.splitlines() or [""])]
    body = [
        f'id: "{entry.id}"',
        f"exception: {_scalar(entry.exception)}",
        f"message: {_scalar(entry.message)}",
        "# Log lines upstream wraps it in, or what its class prints, with {placeholders} (optional).",
        "# printed:",
        '#   - "... failed for request rank={rank} with exception {error}"',
        "# What the error means, in two to four sentences, for someone who has not read the code.",
        "explanation: |",
        "",
        "# When it happens, in flags and hardware the user controls (optional).",
        "# trigger: |",
        "situations:",
        "  - ",
        "# Two to four ways out, best first; name real flags and values.",
        "solutions:",
        "  - title: ",
        "    body: |",
        "",
        "example_fix:",
        "  before: |",
        "",
        "  after: |",
        "",
        "tags: []",
        f'fingerprint: "{fingerprint}"',
        f"written_for: {_scalar(upstream.revision)}",
    ]
    return "\n".join(comment + body) + "\n"


def _scalar(value: str | None) -> str:
    """A YAML scalar for a value: null, or a double-quoted string (JSON's escapes are YAML's)."""
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def restamp(text: str, fingerprint: str, revision: str) -> str:
    """The file's text with a new fingerprint and revision and `review` cleared, editing only those
    lines; fields that are missing are added at the end."""
    document = yaml_round_trip().load(text)
    if not isinstance(document, CommentedMap):
        raise ContentError("expected a mapping of fields")
    lines = text.splitlines(keepends=True)
    values = {"fingerprint": f'"{fingerprint}"', "written_for": _scalar(revision), "review": "false"}
    appended = []
    for name in _STAMPED:
        if name not in document:
            if name != "review":
                appended.append(f"{name}: {values[name]}\n")
            continue
        key_line, value_line = document.lc.key(name)[0], document.lc.value(name)[0]
        if key_line != value_line:
            raise ContentError(f"'{name}': write it on one line to let review re-stamp it")
        lines[key_line] = _replace_value(lines[key_line], name, values[name])
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines + appended)


def _replace_value(line: str, name: str, value: str) -> str:
    """`name: old  # comment` -> `name: value  # comment`."""
    match = re.match(rf"^(\s*{name}\s*:\s*)(\"[^\"]*\"|'[^']*'|[^#\s]*)(.*)$", line.rstrip("\n"))
    if match is None:
        raise ContentError(f"'{name}': cannot re-stamp this line: {line.strip()}")
    return f"{match[1]}{value}{match[3]}" + ("\n" if line.endswith("\n") else "")
