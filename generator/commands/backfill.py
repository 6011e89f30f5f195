"""`errorkb backfill`: the ledger over every upstream release on the package index, oldest first."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from generator.commands.common import cache_dir_of, config_of
from generator.commands.content_options import add_content_option, content_of
from generator.errors import EXIT_OK, EXIT_PARTIAL, ErrorkbError

DEFAULT_START = "0.3.0"
_PINNED = re.compile(r"pypi:(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>\S+)")


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "backfill",
        help="fold every release on the package index into the ledger, oldest first",
        description="Read every release of upstream on the package index from --from to --to, oldest first "
        "(each downloaded once into the cache, each file's sites cached by blob), and update the ledger in the "
        "content folder release by release as successive builds would, keeping what it already holds. No pages "
        "are written. An interrupted run continues after the last release it finished.",
        epilog="Exit codes: 0 ok; 1 bad input or a download failed (run it again to continue); 3 done, but some "
        "releases could not be read (each listed with why).",
    )
    parser.add_argument("--from", dest="start", default=DEFAULT_START, metavar="VERSION", help=f"first release (default {DEFAULT_START})")
    parser.add_argument("--to", dest="end", metavar="VERSION", help="last release (default: the release errorkb.toml pins)")
    add_content_option(parser)
    parser.add_argument("--cache-dir", metavar="DIR", type=Path, help="cache folder (downloads, sites by blob, the backfill's progress)")
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one per core)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.backfill import COUNTED, ReleaseStep, backfill

    config = config_of(args)
    pinned = _PINNED.fullmatch(config.source)
    end = args.end or (pinned["version"] if pinned else None)
    if end is None:
        raise ErrorkbError(f"--to is needed: the configured source {config.source!r} is not a pypi: release")
    name = pinned["name"] if pinned else config.package
    started = last = time.monotonic()

    def report(step: ReleaseStep) -> None:
        nonlocal last
        seconds, last = time.monotonic() - last, time.monotonic()
        if step.skipped:
            print(f"errorkb: skipped {name} {step.version}: {step.skipped}", file=sys.stderr)
            return
        kinds = [*COUNTED, *sorted(kind for kind, _ in step.changes if kind not in COUNTED)]
        counts = ", ".join(f"{step.count(kind)} {kind}" for kind in kinds)
        unparsable = f", {step.unparsable} do not parse" if step.unparsable else ""
        print(
            f"{step.version:<14} {step.files:5d} files ({step.parsed} parsed{unparsable}), {step.errors:5d} errors: {counts} ({seconds:.1f} s)",
            flush=True,
        )

    result = backfill(config, content_of(args, config), cache_dir_of(args, config), args.start, end, name, args.jobs, report)
    read = [step for step in result.steps if not step.skipped]
    skipped = [step for step in result.steps if step.skipped]
    if result.resumed:
        print(f"backfill: continued after {result.steps[result.resumed - 1].version} ({result.resumed} releases folded in before)", file=sys.stderr)
    kinds = [*COUNTED, *sorted({kind for step in read for kind, _ in step.changes} - set(COUNTED))]
    totals = ", ".join(f"{sum(step.count(kind) for step in read)} {kind}" for kind in kinds)
    statuses = {}
    for record in result.records.values():
        statuses[record.status] = statuses.get(record.status, 0) + 1
    ledger = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    print(
        f"total: {len(read)} releases read ({args.start} to {end}), {len(skipped)} skipped; "
        f"{sum(s.files for s in read)} files, {sum(s.parsed for s in read)} parsed; {totals}",
        flush=True,
    )
    print(f"backfill: ledger of {len(result.records)} ids ({ledger}), {result.change_count} changes; {time.monotonic() - started:.1f} s", file=sys.stderr)
    return EXIT_PARTIAL if skipped else EXIT_OK
