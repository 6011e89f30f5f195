"""`errorkb diff FROM TO`: what changed in SGLang's errors between two sources."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from generator.commands.common import cache_dir_of, config_of
from generator.history import Difference, compare
from generator.model import ErrorEntry, group_sites
from generator.pipeline import extract_upstream
from generator.upstream import open_source


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "diff",
        help="errors added, retired, reworded, moved and changed between two sources",
        description="Compare the errors of two upstream sources: added, retired, reworded (old -> new id), "
        "moved (same id, another file or function) and changed (same id and place, different guards or code).",
    )
    parser.add_argument("before", metavar="FROM", help="source spec, e.g. pypi:sglang==0.5.18 or git:/repo@v0.5.18")
    parser.add_argument("after", metavar="TO", help="source spec, e.g. pypi:sglang==0.5.19 or git:/repo@main")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument("--cache-dir", metavar="DIR", type=Path, help="cache folder")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    cache_dir = cache_dir_of(args, config)
    sides = []
    for spec in (args.before, args.after):
        extraction = extract_upstream(open_source(spec, config, cache_dir), cache_dir)
        sides.append((extraction.upstream, group_sites(extraction.sites, extraction.upstream.repo)))
    (before, old), (after, new) = sides
    difference = compare(old, new, after.revision)
    if args.json:
        document = {"from": before.revision, "to": after.revision, **as_json(difference)}
        print(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        sys.stdout.write(as_text(difference, before.revision, after.revision))
    return 0


def _brief(entry: ErrorEntry) -> dict:
    site = entry.sites[0]
    return {"id": entry.id, "exception": entry.exception, "message": entry.title, "path": site.path,
            "line": site.line, "function": site.function}


def as_json(difference: Difference) -> dict:
    return {
        "added": [_brief(e) for e in difference.added],
        "retired": [_brief(e) for e in difference.retired],
        "reworded": [{"old": _brief(a), "new": _brief(b)} for a, b in difference.reworded],
        "moved": [{"old": _brief(a), "new": _brief(b)} for a, b in difference.moved],
        "changed": [_brief(b) for _, b in difference.changed],
    }


def _where(entry: ErrorEntry) -> str:
    site = entry.sites[0]
    more = f" (+{len(entry.sites) - 1} more)" if len(entry.sites) > 1 else ""
    return f"{site.path}:{site.line} in {site.function or 'module'}{more}"


def as_text(difference: Difference, before: str, after: str) -> str:
    lines = [
        f"{before} -> {after}: {len(difference.added)} added, {len(difference.retired)} retired, "
        f"{len(difference.reworded)} reworded, {len(difference.moved)} moved, {len(difference.changed)} changed"
    ]
    sections = [
        ("added", [f"  + {e.id} {e.exception}: {e.title}\n      {_where(e)}" for e in difference.added]),
        ("retired", [f"  - {e.id} {e.exception}: {e.title}\n      was {_where(e)}" for e in difference.retired]),
        ("reworded", [f"  ~ {a.id} -> {b.id} {b.exception}\n      was: {a.title}\n      now: {b.title}"
                      for a, b in difference.reworded]),
        ("moved", [f"  > {b.id} {b.exception}: {b.title}\n      from {_where(a)}\n      to   {_where(b)}"
                   for a, b in difference.moved]),
        ("changed", [f"  * {b.id} {b.exception}: {b.title}\n      {_where(b)}" for _, b in difference.changed]),
    ]
    for name, rows in sections:
        if rows:
            lines.append(f"\n{name}:")
            lines.extend(rows)
    return "\n".join(lines) + "\n"
