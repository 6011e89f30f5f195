"""`errorkb lookup`: the errors a pasted message or traceback most likely is, best first."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from generator.commands.common import add_source_options, cache_dir_of, config_of, source_of
from generator.errors import ErrorkbError
from generator.model import group_sites, release_name
from generator.pipeline import extract_upstream
from generator.upstream import version_key

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
    parser.add_argument(
        "--version", metavar="V",
        help="the SGLang release the error came from (as 0.4.6): errors that release raised come first, each with the wording it used, "
        "as the ledger knows them (default: the release the paste names, as in `sglang==0.4.6`, a path's `sglang-0.4.6` or "
        "check_env's `sglang: 0.4.6`)",
    )
    add_source_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from generator.search import lookup, paste_version

    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        raise ErrorkbError("lookup: nothing to look up (give TEXT, or pipe it on stdin)")
    if args.limit < 1:
        raise ErrorkbError(f"lookup: --limit must be at least 1, got {args.limit}")
    if args.site is not None and args.source:
        raise ErrorkbError("lookup: give --site or --source, not both")
    if args.version is not None and version_key(args.version.removeprefix("v"))[0]:
        raise ErrorkbError(f"lookup: --version {args.version} is not a release number such as 0.4.6")
    index = index_of(args)
    named = None
    if args.version is None:
        # The release the paste itself names, if any, read as --version would be.
        args.version = named = paste_version(text)
    if args.version is None:
        candidates = lookup(text, index, limit=args.limit)
        at: dict[str, str | None] = {}
    else:
        # The errors that release raised first, each in the order the lookup gave; the wording
        # it used, where it was another.
        candidates = lookup(text, index, limit=max(args.limit * 4, 20))
        at = releases_at(args, [c.id for c in candidates], args.version)
        candidates = sorted(candidates, key=lambda c: c.id not in at)[: args.limit]
    if args.json:
        sys.stdout.write(json.dumps([record(c, at if args.version else None) for c in candidates], indent=2, ensure_ascii=False) + "\n")
    else:
        if named is not None:
            print(f"(SGLang {named}, the release the paste names)")
        for candidate in candidates:
            print(f"{candidate.score:6.2f}  {HOW[candidate.match]}{candidate.title}")
            if candidate.note:
                print(f"        {candidate.note}")
            if args.version is not None:
                wording = at.get(candidate.id)
                raised = f"raised by {args.version}" if candidate.id in at else f"not raised by {args.version}, as far as the ledger knows"
                print(f"        {raised}" + (f", worded: {wording}" if wording else ""))
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
    from generator.search import Known, SearchIndex

    if args.site is not None:
        if not (args.site / "search" / "manifest.json").is_file():
            raise ErrorkbError(f"{args.site}: no search/manifest.json; is it a site built by errorkb build?")
        return SearchIndex.of_site(args.site)
    from generator.content import printed_forms, read_content
    from generator.history import ledger_facts, load_changes, load_ledger, versions_of

    config = config_of(args)
    cache_dir = cache_dir_of(args, config)
    extraction = extract_upstream(source_of(args, config), cache_dir)
    repo = extraction.upstream.repo
    # The printed forms of the curated entries in the configured content folder; a file with
    # problems is `errorkb check`'s to report, not a lookup's.
    files, _ = read_content(Path(config.content), repo, cache_dir)
    printed = printed_forms({error: file.curated for error, file in files.items()})
    # And what the ledger knows of earlier releases: the wordings of each error, and the
    # errors no longer raised.
    records = load_ledger(Path(config.content))
    versions = versions_of(records, load_changes(Path(config.content)))
    retired, known = Known.of_ledger(printed, ledger_facts(records, versions), versions)
    entries = group_sites(extraction.sites, repo)
    return SearchIndex.of_entries(entries + retired, repo, extraction.classes, known)


def releases_at(args: argparse.Namespace, ids: list[str], version: str) -> dict[str, str | None]:
    """Of `ids`, those the release `version` raised, as the ledger in the content folder knows
    them: each with the message that release raised it with, when an earlier one (else None)."""
    from generator.history import load_ledger, versions_of

    versions = versions_of(load_ledger(Path(config_of(args).content)))
    wanted = version_key(version.removeprefix("v"))
    found = {}
    for error in ids:
        known = versions.get(error)
        if known is None or not _within(known.first, known.last, wanted):
            continue
        found[error] = next((w.message for w in known.wordings if _within(w.first, w.last, wanted)), None)
    return found


def _within(first: str, last: str | None, wanted: tuple) -> bool:
    """Whether a release is between two revisions (`last` None: up to now), as versions order."""
    if version_key(release_name(first)) > wanted:
        return False
    return last is None or wanted <= version_key(release_name(last))


def record(candidate: Candidate, at: dict[str, str | None] | None = None) -> dict:
    """A candidate as SPEC's JSON: `id`, `message`, `score`, what a page shows, and how the
    paste matched it (`match`: `message`, `beginning` when the paste is only the message's
    beginning, `traceback`, `words`), and `note`: what the form it matched was, when not the
    error's message now (an earlier wording, with its releases; a curated printed form, as
    written), else null."""
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
        "note": candidate.note or None,
        # With --version: whether that release raised it, and the wording it used if another.
        **({"raised_at_version": candidate.id in at, "wording_at_version": at.get(candidate.id)} if at is not None else {}),
    }
