"""`errorkb build`: the static site and JSON API for one upstream revision."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from generator.build import build, inputs_of
from generator.commands.common import add_source_options, config_of
from generator.errors import EXIT_OK, EXIT_PARTIAL


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "build",
        help="build the static site and JSON API",
        description="Extract upstream, join the curated content and write the site: a page and a JSON "
        "document per error, browse pages, sitemap. The previous site stays whole until the new one is complete.",
    )
    add_site_options(parser)
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one per core)")
    parser.set_defaults(run=run)


def add_site_options(parser: argparse.ArgumentParser) -> None:
    """--source, --cache-dir, --out and --content, shared by `build` and `serve`."""
    add_source_options(parser)
    parser.add_argument("--out", metavar="DIR", type=Path, help="output folder (default: from errorkb.toml, site/)")
    parser.add_argument("--content", metavar="DIR", type=Path, help="curated content folder (default: content/)")


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    inputs = inputs_of(config, args.source, args.out, args.content, args.cache_dir)
    started = time.monotonic()
    result = build(config, inputs, jobs=args.jobs)
    for problem in result.problems:
        print(f"errorkb: skipped {problem}", file=sys.stderr)
    for orphan in result.orphans:
        print(f"errorkb: {orphan}", file=sys.stderr)
    print(
        f"build: {result.errors} errors ({result.curated} explained), {result.files} files "
        f"({result.written} changed) in {result.out}; {result.upstream.source} at {result.upstream.revision}; "
        f"{time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    if result.stale:
        print(f"errorkb: {result.stale} curated explanations were written for older code; see errorkb check", file=sys.stderr)
    return EXIT_PARTIAL if result.problems or result.orphans else EXIT_OK
