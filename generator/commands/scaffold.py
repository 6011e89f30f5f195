"""`errorkb scaffold ID`: a new content file for one error, prefilled and ready to write."""

from __future__ import annotations

import argparse
import sys

from generator.audit import fingerprints
from generator.commands.common import add_source_options, config_of, source_of
from generator.commands.content_options import add_content_option, content_of, entries_of
from generator.content import ERRORS_FOLDER
from generator.errors import ErrorkbError


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "scaffold",
        help="write content/errors/<id>.yaml for one error, ready to fill in",
        description="Write a new content file for the error ID, prefilled with its message, locations, "
        "conditions and derived trigger as comments, and the fingerprint of today's code. "
        "Never overwrites an existing file.",
    )
    parser.add_argument("id", metavar="ID", help="the error's id (16 hex digits, from `errorkb extract` or the site)")
    add_source_options(parser)
    add_content_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.authoring import scaffold_text

    config = config_of(args)
    folder = content_of(args, config) / ERRORS_FOLDER
    target = folder / f"{args.id}.yaml"
    if target.exists():
        raise ErrorkbError(f"{target}: already exists; edit it, or run `errorkb review {args.id}` after a re-read")
    source = source_of(args, config)
    entries = entries_of(args, config, source)
    if args.id not in entries:
        raise ErrorkbError(f"{args.id}: no such error at {source.upstream.revision}; find ids with `errorkb extract`")
    entry = entries[args.id]
    text = scaffold_text(entry, fingerprints([entry], source)[entry.id], source.upstream)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with target.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise ErrorkbError(f"{target}: already exists") from None
    print(f"scaffold: wrote {target}", file=sys.stderr)
    return 0
