"""`errorkb lookup`: the errors a pasted message or traceback most likely is, best first."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from generator.commands.common import add_source_options, cache_dir_of, config_of, source_of
from generator.errors import ErrorkbError
from generator.model import group_sites
from generator.pipeline import extract_upstream

if TYPE_CHECKING:
    from generator.search import Candidate, SearchIndex

EXIT_NOTHING = 1


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "lookup",
        help="find the error page for a pasted message or traceback",
        description="Find the errors a pasted message or whole traceback most likely is, best first. "
        "TEXT may be '-' or left out to read standard input.",
        epilog="Exit codes: 0 found, 1 nothing matched or bad input.",
    )
    parser.add_argument("text", nargs="?", default="-", metavar="TEXT", help="the error as seen ('-' or none: stdin)")
    parser.add_argument("--json", action="store_true", help="print a JSON list of candidates, best first")
    parser.add_argument("--limit", type=int, default=5, metavar="N", help="at most N candidates (default 5)")
    parser.add_argument("--site", type=Path, metavar="DIR", help="read the search index of a built site")
    add_source_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.search import lookup

    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        raise ErrorkbError("lookup: nothing to look up (give TEXT, or pipe it on stdin)")
    if args.limit < 1:
        raise ErrorkbError(f"lookup: --limit must be at least 1, got {args.limit}")
    if args.site is not None and args.source:
        raise ErrorkbError("lookup: give --site or --source, not both")
    candidates = lookup(text, index_of(args), limit=args.limit)
    if args.json:
        sys.stdout.write(json.dumps([record(c) for c in candidates], indent=2, ensure_ascii=False) + "\n")
    else:
        for candidate in candidates:
            print(f"{candidate.score:6.2f}  {HOW[candidate.match]}{candidate.title}")
            print(f"        {candidate.exception or 'unknown exception'} · {candidate.where} · {candidate.page}")
    if not candidates:
        print("errorkb: lookup: no error matches this text", file=sys.stderr)
        return EXIT_NOTHING
    return 0


# How each result was found, as the home page's search box says it (templates/static/search.js).
HOW = {
    "message": "exact match: ",
    "beginning": "matches the beginning of: ",
    "traceback": "raised where the traceback points: ",
    "words": "similar: ",
}


def index_of(args: argparse.Namespace) -> SearchIndex:
    """The index of the built site given, else one built in memory from the source."""
    from generator.search import SearchIndex

    if args.site is not None:
        if not (args.site / "search" / "manifest.json").is_file():
            raise ErrorkbError(f"{args.site}: no search/manifest.json; is it a site built by errorkb build?")
        return SearchIndex.of_site(args.site)
    from generator.content import printed_forms, read_content

    config = config_of(args)
    cache_dir = cache_dir_of(args, config)
    extraction = extract_upstream(source_of(args, config), cache_dir)
    repo = extraction.upstream.repo
    # The printed forms of the curated entries in the configured content folder; a file with
    # problems is `errorkb check`'s to report, not a lookup's.
    files, _ = read_content(Path(config.content), repo, cache_dir)
    printed = printed_forms({error: file.curated for error, file in files.items()})
    return SearchIndex.of_entries(group_sites(extraction.sites, repo), repo, extraction.classes, printed)


def record(candidate: Candidate) -> dict:
    """A candidate as SPEC's JSON: `id`, `message`, `score`, what a page shows, and how the
    paste matched it (`match`: `message`, `beginning` when the paste is only the message's
    beginning, `traceback`, `words`)."""
    return {
        "id": candidate.id,
        "message": candidate.message,
        "score": candidate.score,
        "title": candidate.title,
        "exception": candidate.exception,
        "kind": candidate.kind,
        "where": candidate.where,
        "page": candidate.page,
        "match": candidate.match,
    }
