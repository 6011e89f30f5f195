"""`errorkb review ID...`: after a human re-read, stamp an entry with today's fingerprint."""

from __future__ import annotations

import argparse
import sys

from generator.audit import fingerprints
from generator.commands.common import add_source_options, config_of, source_of
from generator.commands.content_options import add_content_option, content_of, entries_of
from generator.content import ERRORS_FOLDER, format_problems
from generator.errors import ContentError, ErrorkbError


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "review",
        help="mark curated entries as re-read against today's code (re-stamps the fingerprint)",
        description="Re-stamp content/errors/<id>.yaml with the fingerprint of the code at the source's "
        "revision and clear `review`, editing only those lines: comments and formatting are kept. "
        "Run it after re-reading the text against the code.",
    )
    parser.add_argument("ids", nargs="+", metavar="ID", help="ids of the entries reviewed")
    add_source_options(parser)
    add_content_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.authoring import restamp
    from generator.schema import parse_curated

    config = config_of(args)
    folder = content_of(args, config) / ERRORS_FOLDER
    paths = {error: folder / f"{error}.yaml" for error in args.ids}
    missing = [str(path) for path in paths.values() if not path.exists()]
    if missing:
        raise ErrorkbError(f"{', '.join(missing)}: no such file; write one with `errorkb scaffold`")
    source = source_of(args, config)
    entries = entries_of(args, config, source)
    unknown = [error for error in args.ids if error not in entries]
    if unknown:
        raise ErrorkbError(f"{', '.join(unknown)}: not raised at {source.upstream.revision}; nothing to review against")
    texts = {error: path.read_text(encoding="utf-8") for error, path in paths.items()}
    problems = []
    for error, text in texts.items():
        problems.extend(parse_curated(text, str(paths[error]), config.repo)[1])
    if problems:
        raise ContentError(format_problems(problems))
    current = fingerprints([entries[error] for error in args.ids], source)
    for error, text in texts.items():
        updated = restamp(text, current[error], source.upstream.revision)
        if updated != text:
            paths[error].write_text(updated, encoding="utf-8")
        print(f"review: {paths[error]} stamped {current[error]} at {source.upstream.revision}", file=sys.stderr)
    return 0
