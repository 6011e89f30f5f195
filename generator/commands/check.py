"""`errorkb check`: is the curated content valid, still true (its evidence quoted from the code
at the pinned revision), and how much is there?

Exit codes: 0 all good; 1 invalid content (every problem listed); 3 valid, but some entries are
orphaned or stale (stale ones pass with `--allow-stale`).
"""

from __future__ import annotations

import argparse
import json
import sys

from generator.audit import (
    Coverage,
    content_orphans,
    evidence_problems,
    coverage,
    extraction_problems,
    find_stale,
    fingerprints,
)
from generator.commands.common import add_source_options, config_of, source_of
from generator.commands.content_options import add_content_option, content_of, entries_of
from generator.content import read_content
from generator.history import load_ledger


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "check",
        help="validate curated content against upstream; print coverage, stale and orphaned entries",
        description="Validate every content file (schema, message against its id's template, links, "
        "flags and their values, code blocks), list entries whose code changed since they were "
        "written (stale) and files whose id no longer exists (orphaned), and print coverage.",
        epilog="Exit codes: 0 ok; 1 invalid content; 3 orphaned or stale entries.",
    )
    add_source_options(parser)
    add_content_option(parser)
    parser.add_argument("--allow-stale", action="store_true", help="list stale entries but exit 0 for them")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument(
        "--modules", type=int, default=15, metavar="N", help="modules to list in the coverage table (default 15)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.flags import flag_problems, server_arguments

    config = config_of(args)
    folder = content_of(args, config)
    source = source_of(args, config)
    entries = entries_of(args, config, source)
    files, invalid = read_content(folder, config.repo)
    ledger = load_ledger(folder)
    problems = [
        *invalid,
        *extraction_problems(files, entries, ledger),
        *evidence_problems(files, source),
        *flag_problems(files, server_arguments(source)),
    ]
    orphans = content_orphans(folder, entries, ledger)
    curated = {error: file.curated for error, file in files.items() if error in entries}
    current = fingerprints([entries[error] for error in curated], source)
    stale = find_stale(curated, current, source.upstream.revision)
    covered = coverage(entries.values(), curated)
    for line in [*map(str, problems), *map(str, orphans), *map(str, stale)]:
        print(line, file=sys.stderr)
    if args.json:
        report = {
            "revision": source.upstream.revision,
            "coverage": covered.as_json(),
            "problems": [str(p) for p in problems],
            "orphans": [{"id": o.id, "path": o.path, "moved_to": o.moved_to} for o in orphans],
            "stale": [{"id": s.id, "path": s.path, "written_for": s.written_for} for s in stale],
        }
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print_coverage(covered, args.modules)
    print(
        f"check: {len(files) + len({p.path for p in invalid})} files, {len(problems)} problems, {len(orphans)} orphaned, {len(stale)} stale; "
        f"{covered.curated}/{covered.total} errors curated ({covered.percent:.2f}%) at {source.upstream.revision}",
        file=sys.stderr,
    )
    if problems:
        return 1
    if orphans or (stale and not args.allow_stale):
        return 3
    return 0


def print_coverage(covered: Coverage, most: int) -> None:
    """Overall coverage, then the modules with curated entries, most curated first."""
    print(f"coverage: {covered.curated}/{covered.total} errors curated ({covered.percent:.2f}%)")
    shown = sorted((m for m in covered.modules if m.curated), key=lambda m: (-m.curated, m.module))[:most]
    for module in shown:
        print(f"  {module.curated:4d}/{module.total:<5d} {module.module}")
