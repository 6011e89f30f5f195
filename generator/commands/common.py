"""Options and set-up shared by several subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from generator.config import Config, load_config
from generator.upstream import Source, open_source


def add_source_options(parser: argparse.ArgumentParser, cache: bool = True) -> None:
    parser.add_argument(
        "--source",
        metavar="SPEC",
        help="upstream to read: pypi:sglang==<version> or git:<path-or-url>@<rev> (default: from errorkb.toml)",
    )
    if cache:
        parser.add_argument("--cache-dir", metavar="DIR", type=Path, help="cache folder (an empty one means a cold run)")


def config_of(args: argparse.Namespace) -> Config:
    return load_config(Path(args.config) if args.config else None)


def cache_dir_of(args: argparse.Namespace, config: Config) -> Path:
    return getattr(args, "cache_dir", None) or config.cache_dir


def source_of(args: argparse.Namespace, config: Config) -> Source:
    return open_source(args.source or config.source, config, cache_dir_of(args, config))
