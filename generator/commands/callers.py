"""`errorkb callers`: how SGLang gets to an error, from a static call graph of its code."""

from __future__ import annotations

import argparse
import json
import sys

from generator.commands.common import add_source_options, cache_dir_of, config_of, source_of
from generator.errors import ErrorkbError


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "callers",
        help="show when an error is raised and the calls that lead to it",
        description="For each location of an error: its phase (launch, load, request, serving, tool or "
        "unreachable) and the functions that call the raising function, up to DEPTH levels, each with "
        "the conditions around its call. Read from a static call graph of the source; calls made through "
        "registration tables or getattr are not seen.",
        epilog="Exit codes: 0 shown, 1 an id is unknown or bad input.",
    )
    parser.add_argument("ids", nargs="+", metavar="ID", help="an error id (16 hex digits)")
    parser.add_argument("--depth", type=int, default=3, metavar="DEPTH", help="levels of callers (default 3)")
    parser.add_argument("--json", action="store_true", help="print the locations, phases and callers as JSON")
    add_source_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.callgraph import kept_graph, phase_of
    from generator.derive import describe_condition
    from generator.model import group_sites
    from generator.pipeline import extract_upstream

    if args.depth < 1:
        raise ErrorkbError(f"callers: --depth must be at least 1, got {args.depth}")
    config = config_of(args)
    source, cache_dir = source_of(args, config), cache_dir_of(args, config)
    extraction = extract_upstream(source, cache_dir)
    by_id = {entry.id: entry for entry in group_sites(extraction.sites, extraction.upstream.repo)}
    unknown = [error for error in args.ids if error not in by_id]
    if unknown:
        raise ErrorkbError(f"callers: no error {', '.join(unknown)} at {extraction.upstream.revision}")
    # The graph the last build kept, brought up to date with this source (not written back).
    graph, phases, _ = kept_graph(extraction.files, cache_dir, source.read)
    report = []
    for error in args.ids:
        entry = by_id[error]
        locations = []
        for site in entry.sites:
            callers = graph.callers_of(site.path, site.function, args.depth)
            locations.append(
                {
                    "path": site.path,
                    "line": site.line,
                    "function": site.function,
                    "phase": phase_of(phases, site.path, site.function, entry.scope),
                    "callers": [
                        {"level": level, "path": c.path, "line": c.line, "function": c.function, "conditions": list(c.conditions)}
                        for level, c in callers
                    ],
                }
            )
        report.append({"id": error, "title": entry.title, "locations": locations})
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return 0
    for item in report:
        print(f"{item['id']}  {item['title']}")
        for location in item["locations"]:
            print(f"  {location['path']}:{location['line']} in {location['function'] or '<module>'}  [{location['phase']}]")
            if not location["callers"]:
                print("    nothing in the tree calls it" if location["function"] else "    runs when the module is imported")
            for caller in location["callers"]:
                when = f"  when {' and '.join(describe_condition(c) for c in caller['conditions'])}" if caller["conditions"] else ""
                print(f"    {'  ' * (caller['level'] - 1)}<- {caller['function'] or '<module>'} ({caller['path']}:{caller['line']}){when}")
    return 0
