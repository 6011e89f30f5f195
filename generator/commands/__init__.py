"""The subcommands of `errorkb`, one module each with `add_parser(subcommands)`.

Each parser sets `run` (taking the parsed arguments, returning the exit code) as its default.
Every module here is imported for the parser, by a build too: what only a command's `run` needs,
and a build does not (pydantic and ruamel.yaml, through `generator.schema`; the search index; the
flag checks), that `run` imports.
"""

from generator.commands import backfill, build, callers, check, diff, extract, lookup, review, scaffold, serve

COMMANDS = (extract, build, backfill, check, scaffold, review, lookup, callers, diff, serve)
