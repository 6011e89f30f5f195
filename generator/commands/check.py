"""`errorkb check`: is the curated content valid, still true (its evidence quoted from the code
at the pinned revision), and how much is there? Families (`content/families/`) are checked as
entries are, and each is listed with its members; one that matches nothing, or two that claim
an error without different priorities, are invalid content.

With `--run-examples`, each entry's example fix that is a server command is also run against
the pinned SGLang release (`generator.examples`), one line per entry, and the fresh record of
what reproduced is held against `content/reproduced.json` (`--write` stores it instead).

Exit codes: 0 all good; 1 invalid content (every problem listed, conflicting or empty families
included); 3 valid, but some entries are orphaned or stale (stale ones pass with `--allow-stale`);
4 an example that ran failed (these pass with `--allow-failing-examples`), or the stored record of
reproduced examples is not what this run found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from generator.audit import (
    Coverage,
    content_orphans,
    evidence_problems,
    review_problems,
    coverage,
    extraction_problems,
    find_stale,
    fingerprints,
)
from generator.commands.common import add_source_options, config_of, source_of
from generator.commands.content_options import add_content_option, content_of, entries_of
from generator.content import ContentProblem, read_content, read_families
from generator.errors import EXIT_PARTIAL, ContentError, ErrorkbError
from generator.history import load_ledger


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "check",
        help="validate curated content against upstream; print coverage, stale and orphaned entries",
        description="Validate every content file and family (schema, message against its id's template, links, "
        "flags and their values, code blocks, evidence), list entries whose code changed since they were "
        "written (stale) and files whose id no longer exists (orphaned), list each family's members, and "
        "print coverage (by an entry, by a family, neither).",
        epilog="Exit codes: 0 ok; 1 invalid content (or families that conflict or match nothing); 3 orphaned or stale entries; 4 an example failed, or "
        "content/reproduced.json differs from this run of them (--run-examples).",
    )
    add_source_options(parser)
    add_content_option(parser)
    parser.add_argument("--allow-stale", action="store_true", help="list stale entries but exit 0 for them")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument(
        "--modules", type=int, default=15, metavar="N", help="modules to list in the coverage table (default 15)"
    )
    examples = parser.add_argument_group("example fixes")
    examples.add_argument(
        "--run-examples",
        action="store_true",
        help="run each example fix that is a server command against the pinned SGLang release (in a venv "
        "made once in the cache) and compare what reproduced with content/reproduced.json",
    )
    examples.add_argument("--write", action="store_true", help="with --run-examples: store what reproduced in content/reproduced.json")
    examples.add_argument(
        "--allow-failing-examples",
        action="store_true",
        help="with --run-examples: list examples that ran and failed but exit 0 for them (the record must still match)",
    )
    examples.add_argument(
        "--sglang-python", metavar="PATH", type=Path, help="with --run-examples: an interpreter that has SGLang, instead of the venv"
    )
    examples.add_argument(
        "--model-configs", metavar="DIR", type=Path, help="folders <org>--<name>/config.json standing in for hub models (default: from errorkb.toml)"
    )
    parser.set_defaults(run=run)


def superseded_problems(files: dict, ledger: dict) -> list[ContentProblem]:
    """Each `supersedes` id that is not a retired id of the ledger (nor one already moved to
    the entry), as the build would refuse it (`history.merge_superseded`)."""
    from generator.history import merge_superseded

    problems = []
    for error, file in sorted(files.items()):
        if file.curated.supersedes:
            try:
                merge_superseded(ledger, {error: file.curated.supersedes})
            except ContentError as failed:
                problems.extend(ContentProblem(file.curated.path, file.line("supersedes"), "supersedes", line.split(": ", 2)[-1]) for line in str(failed).splitlines())
    return problems


def run(args: argparse.Namespace) -> int:
    from generator.flags import Arguments, diffusion_arguments, flag_problems, server_arguments
    from generator.model import DIFFUSION_CODE

    alone = [name for name in ("write", "allow_failing_examples", "sglang_python", "model_configs") if getattr(args, name)]
    if alone and not args.run_examples:
        raise ErrorkbError(f"--{alone[0].replace('_', '-')} needs --run-examples")
    config = config_of(args)
    folder = content_of(args, config)
    source = source_of(args, config)
    entries = entries_of(args, config, source)
    files, invalid = read_content(folder, config.repo)
    family_files, invalid_families = read_families(folder, repo=config.repo)
    ledger = load_ledger(folder)
    arguments = server_arguments(source)
    curated = {error: file.curated for error, file in files.items() if error in entries}
    diffusion = {error for error in curated if DIFFUSION_CODE in entries[error].sites[0].path}
    assignment = assign_families(family_files, entries, curated)
    problems = [
        *invalid,
        *invalid_families,
        *extraction_problems(files, entries, ledger),
        *extraction_problems(family_files, entries, ledger),
        *evidence_problems(files, source),
        *evidence_problems(family_files, source),
        *review_problems(folder, files, family_files),
        # An entry for the diffusion server's code may name that server's flags too (its code
        # is also run by the language server's commands: both are accepted).
        *flag_problems({e: f for e, f in files.items() if e not in diffusion}, arguments),
        *flag_problems(
            {e: f for e, f in files.items() if e in diffusion},
            Arguments.of([*arguments.by_field.values(), *diffusion_arguments(source).by_field.values()]),
        ),
        *flag_problems(family_files, arguments),
        *(ContentProblem(path, family_files[name].line("match"), "match", problem) for name, path, problem in family_problems(assignment, family_files)),
        *superseded_problems(files, ledger),
    ]
    orphans = content_orphans(folder, entries, ledger)
    current = fingerprints([entries[error] for error in curated], source)
    stale = find_stale(curated, current, source.upstream.revision)
    covered = coverage([entry for entry in entries.values() if entry.scope == "product"], curated, assignment.by_error)
    for line in [*map(str, problems), *map(str, orphans), *map(str, stale)]:
        print(line, file=sys.stderr)
    ran, failed_examples = run_examples(args, config, folder, curated, entries) if args.run_examples else ([], False)
    if args.json:
        report = {
            "revision": source.upstream.revision,
            "coverage": covered.as_json(),
            "problems": [str(p) for p in problems],
            "orphans": [{"id": o.id, "path": o.path, "moved_to": o.moved_to} for o in orphans],
            "stale": [{"id": s.id, "path": s.path, "written_for": s.written_for} for s in stale],
            "families": [
                {
                    "name": name,
                    "path": family_files[name].curated.path,
                    "title": family_files[name].curated.title,
                    "members": list(ids),
                    "explains": [error for error in ids if _explained_by(assignment, error) == name],
                }
                for name, ids in sorted(assignment.members.items())
            ],
        }
        if args.run_examples:
            report["examples"] = [
                {"id": r.id, "outcome": r.outcome, "detail": r.detail, "after": r.after, "sglang": r.sglang} for r in ran
            ]
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print_coverage(covered, args.modules)
        print_families(assignment, entries)
    print(
        f"check: {len(files) + len({p.path for p in invalid})} files, {len(problems)} problems, {len(orphans)} orphaned, {len(stale)} stale; "
        f"{covered.curated}/{covered.total} errors curated ({covered.percent:.2f}%), {covered.family} more explained by "
        f"{len(family_files) + len({p.path for p in invalid_families})} families, at {source.upstream.revision}",
        file=sys.stderr,
    )
    if problems:
        return 1
    if orphans or (stale and not args.allow_stale):
        return EXIT_PARTIAL
    if failed_examples:
        return 4
    return 0


def run_examples(args: argparse.Namespace, config, folder: Path, curated: dict, entries: dict) -> tuple[list, bool]:
    """Run the example fixes, print one line each and a summary, and store or compare the record;
    the results, and whether any that ran failed or the stored record differs."""
    from generator import examples
    from generator.commands.common import cache_dir_of

    python: Path | str
    if args.sglang_python is not None:
        python = args.sglang_python if args.sglang_python.exists() else f"{args.sglang_python} does not exist"
    else:
        try:
            python = examples.sglang_venv(cache_dir_of(args, config), log=lambda line: print(line, file=sys.stderr))
        except (ErrorkbError, OSError) as error:
            python = str(error)
    results = examples.run_examples(curated, entries, args.model_configs or config.model_configs, python, config.path_prefix)
    for result in results:
        print(f"example {result}", file=sys.stderr)
    counts = {outcome: sum(r.outcome == outcome for r in results) for outcome in examples.OUTCOMES}
    summary = ", ".join(f"{count} {outcome}" for outcome, count in counts.items() if count)
    print(f"examples: {len(results)} entries with an example fix: {summary or 'none'}", file=sys.stderr)
    fresh = examples.record_of(results, curated)
    unmade = isinstance(python, str) or any(r.detail.startswith("venv could not be made") for r in results)
    if args.write and unmade:
        print("examples: the record was not written: no example could run", file=sys.stderr)
        return results, True
    if args.write:
        path = examples.write_record(folder, fresh)
        print(f"examples: wrote {len(fresh)} reproduced examples to {path}", file=sys.stderr)
        stored_differs = False
    else:
        stored = examples.read_record(folder)
        stored_differs = stored != fresh
        if stored_differs:
            changed = sorted(error for error in stored.keys() | fresh.keys() if stored.get(error) != fresh.get(error))
            print(
                f"examples: {folder / examples.RECORD_NAME} differs from this run for {len(changed)} entries "
                f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}); run `errorkb check --run-examples --write`",
                file=sys.stderr,
            )
    return results, stored_differs or (not args.allow_failing_examples and any(result.failed for result in results))


def assign_families(family_files: dict, entries: dict, curated: dict):
    """Which family explains each error of `entries` that has no entry in `curated`."""
    from generator.families import assign

    return assign((file.curated for _, file in sorted(family_files.items())), entries.values(), curated)


def family_problems(assignment, family_files: dict) -> list[tuple[str, str, str]]:
    """(name, path, problem) of the families that conflict or claim nothing."""
    from generator.families import conflict_lines

    families = {name: file.curated for name, file in family_files.items()}
    by_path = {family.path: name for name, family in families.items()}
    return [(by_path[path], path, problem) for path, problem in conflict_lines(assignment, families)]


def print_families(assignment, entries: dict) -> None:
    """Each family with how many errors it claims, and how many of them (product errors
    without an entry) its text explains."""
    for name, ids in sorted(assignment.members.items()):
        explains = sum(1 for error in ids if _explained_by(assignment, error) == name and entries[error].scope == "product")
        print(f"family {name}: {len(ids)} members, explains {explains} product errors")


def _explained_by(assignment, error: str) -> str | None:
    family = assignment.by_error.get(error)
    return family.name if family is not None else None


def print_coverage(covered: Coverage, most: int) -> None:
    """Overall coverage, then the modules with curated entries, most curated first."""
    print(f"coverage: {covered.curated}/{covered.total} errors curated ({covered.percent:.2f}%)")
    print(f"  explained by an entry: {covered.curated}, by a family: {covered.family}, neither: {covered.neither}")
    shown = sorted((m for m in covered.modules if m.curated), key=lambda m: (-m.curated, m.module))[:most]
    for module in shown:
        print(f"  {module.curated:4d}/{module.total:<5d} {module.module}")
