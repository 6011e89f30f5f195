"""The subcommands of `errorkb`, one module each with `add_parser(subcommands)`.

Each parser sets `run` (taking the parsed arguments, returning the exit code) as its default.
"""

from generator.commands import build, check, diff, extract, lookup, review, scaffold, serve

COMMANDS = (extract, build, check, scaffold, review, lookup, diff, serve)
