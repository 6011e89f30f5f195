"""The `errorkb` command: one subcommand per module in `generator.commands`.

Exit codes: 0 success; 1 a problem with the input (one line on stderr); 2 bad usage;
3 finished, but some upstream files were skipped or content needs attention (listed on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from generator import __version__
from generator.commands import COMMANDS
from generator.errors import EXIT_ERROR, EXIT_OK, ErrorkbError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="errorkb",
        description="SGLang's errors, extracted from its source, as a static site and JSON API.",
        epilog="Exit codes: 0 ok, 1 bad input (one line on stderr), 2 bad usage, "
        "3 done but something was skipped or needs attention.",
    )
    parser.add_argument("--version", action="version", version=f"errorkb {__version__}")
    parser.add_argument("--config", metavar="FILE", help="settings file (default: ./errorkb.toml)")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ErrorkbError as error:
        print(f"errorkb: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("errorkb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


def run() -> None:
    """The `errorkb` command (and `python -m generator`): `main`, then the process ends at once.
    Everything a command writes is closed by then, and what is left for the interpreter's
    teardown to free one by one (the build's caches of titles, templates and modules) is a
    visible share of a rebuild (bench/README.md)."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass  # output closed early (`errorkb lookup ... | head`): nothing more to say
    os._exit(code)
