"""`errorkb extract`: every site as one JSON object per line."""

from __future__ import annotations

import argparse
import json
import sys

from generator.commands.common import add_source_options, cache_dir_of, config_of, source_of
from generator.errors import EXIT_OK, EXIT_PARTIAL
from generator.model import Extraction, Site, Upstream, site_scope
from generator.pipeline import extract_upstream


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "extract",
        help="print every raise, assert and warning site as JSON lines",
        description="Print every raise, assert and warnings.warn site of upstream, one JSON object per line.",
    )
    add_source_options(parser)
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one per core)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    source = source_of(args, config)
    extraction = extract_upstream(source, cache_dir_of(args, config), jobs=args.jobs)
    out = sys.stdout
    for site in extraction.sites:
        out.write(json.dumps(site_record(site, extraction.upstream), sort_keys=True, ensure_ascii=False) + "\n")
    out.flush()
    return report(extraction)


def site_record(site: Site, upstream: Upstream) -> dict:
    """A site as SPEC's JSON line: the contract fields first, then the extras; a call to a
    raiser adds where the raiser raises (`raised_in`)."""
    record = {
        "id": site.id(upstream.repo),
        "kind": site.kind,
        "exception": site.exception,
        "message": site.message,
        "path": site.path,
        "line": site.line,
        "end_line": site.end_line,
        "function": site.function,
        "conditions": list(site.conditions),
        "checks_passed": list(site.checks_passed),
        "context": list(site.context),
        "assert_condition": site.assert_condition,
        "snippet": [site.snippet_start, site.snippet_end],
        "url": upstream.url(site.path, site.line),
        "scope": site_scope(site.path),
    }
    if site.validates:
        record["validates"] = {"parameter": site.validates[0], "fields": list(site.validates[1:])}
    if site.raised_in is not None:
        path, function, line, _end = site.raised_in
        record["raised_in"] = {"path": path, "function": function, "line": line}
    return record


def report(extraction: Extraction) -> int:
    """Print skipped files and the one-line summary to stderr; 3 when anything was skipped."""
    for problem in extraction.problems:
        print(f"errorkb: skipped {problem}", file=sys.stderr)
    counts = {kind: 0 for kind in ("raise", "assert", "warning")}
    for site in extraction.sites:
        counts[site.kind] += 1
    print(
        f"extract: {len(extraction.files)} files, {len(extraction.sites)} sites "
        f"({counts['raise']} raise, {counts['assert']} assert, {counts['warning']} warning), "
        f"{len(extraction.problems)} skipped; {extraction.upstream.source} at {extraction.upstream.revision}",
        file=sys.stderr,
    )
    return EXIT_PARTIAL if extraction.problems else EXIT_OK
