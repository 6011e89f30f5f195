"""Options and set-up shared by the content commands (`check`, `scaffold`, `review`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.commands.common import cache_dir_of
from generator.config import Config
from generator.model import ErrorEntry, group_sites
from generator.pipeline import extract_upstream
from generator.upstream import Source


def add_content_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--content", metavar="DIR", type=Path, help="content folder (default: from errorkb.toml)")


def content_of(args: argparse.Namespace, config: Config) -> Path:
    return args.content or config.content


def entries_of(args: argparse.Namespace, config: Config, source: Source) -> dict[str, ErrorEntry]:
    """Every error of the source by id, from the cached extraction."""
    extraction = extract_upstream(source, cache_dir_of(args, config))
    return {entry.id: entry for entry in group_sites(extraction.sites, config.repo)}
