"""Families of errors: which errors each family claims, and which family explains each error.

A family (`content/families/<name>.yaml`, read by `content.load_families`) claims every error
its `match` block describes. Its text explains each member that has no entry of its own; an
error with an entry shows the entry only. Two families that claim one error need different
explicit priorities (the higher explains it); `check` reports the pairs that have not, and the
families that claim nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
import bisect
import fnmatch

from generator.cache import BlobState
from generator.model import ErrorEntry, Family, FamilyMatch

# -- Matching --------------------------------------------------------------------------------------


def claims(match: FamilyMatch, entry: ErrorEntry, patterns: Patterns | None = None) -> bool:
    """Whether `entry` is one of the errors `match` describes: every criterion given holds,
    and `paths`, `functions` and `condition` hold at every location of the error. `patterns`
    are `match`'s compiled, when the caller has them (they remember the paths they matched).
    The cheap criteria come first: a build holds every family against every error."""
    patterns = patterns or Patterns.of(match)
    if match.exceptions and (entry.exception or "") not in match.exceptions:
        return False
    if match.kinds and entry.kind not in match.kinds:
        return False
    if match.has_message is not None and (entry.message is not None) != match.has_message:
        return False
    for site in entry.sites:
        if patterns.paths is not None and not patterns.path_matches(site.path):
            return False
        if patterns.functions is not None and not patterns.functions.fullmatch(site.function):
            return False
    if match.message is not None:
        if entry.message is None or not patterns.message.search(entry.message):
            return False
    if patterns.condition is not None:
        for site in entry.sites:
            if not any(patterns.condition.search(condition) for condition in (site.assert_condition or "", *site.conditions)):
                return False
    return not match.scopes or entry.scope in match.scopes


class Patterns:
    """A match block's regular expressions and globs, compiled once for every error it is held
    against; whether a path matches is remembered, as an error's files are shared by many."""

    __slots__ = ("message", "condition", "paths", "functions", "_paths_seen")

    def __init__(self, match: FamilyMatch) -> None:
        self.message, self.condition = (re.compile(text) if text else None for text in (match.message, match.condition))
        self.paths, self.functions = (_globs(globs) for globs in (match.paths, match.functions))
        self._paths_seen: dict[str, bool] = {}

    @classmethod
    def of(cls, match: FamilyMatch) -> Patterns:
        return cls(match)

    def path_matches(self, path: str) -> bool:
        found = self._paths_seen.get(path)
        if found is None:
            found = self._paths_seen[path] = self.paths.fullmatch(path) is not None
        return found


def _globs(globs: tuple[str, ...]) -> re.Pattern | None:
    """Globs as one regular expression (`fnmatch`'s rules: `*` crosses folders), or None."""
    return re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs)) if globs else None


def members(families: Iterable[Family], entries: Iterable[ErrorEntry]) -> dict[str, tuple[str, ...]]:
    """By family name, the ids of every error it claims, whether or not it has an entry, sorted.

    A build holds every family against some 27,000 errors, so each family is held only against
    the errors its exceptions and kinds allow and, when it names paths, only those whose first
    location starts with the literal part of one of its globs (`Candidates`)."""
    families = tuple(families)
    candidates = Candidates(entries)
    found = {}
    for family in families:
        patterns = Patterns.of(family.match)
        found[family.name] = tuple(
            sorted(entry.id for entry in candidates.of(family.match) if claims(family.match, entry, patterns))
        )
    return found


class Candidates:
    """The errors, indexed so that a match block is held only against those it may claim."""

    def __init__(self, entries: Iterable[ErrorEntry]) -> None:
        self._by_path = sorted(entries, key=lambda entry: entry.sites[0].path)
        self._paths = [entry.sites[0].path for entry in self._by_path]

    def of(self, match: FamilyMatch) -> Iterable[ErrorEntry]:
        if match.paths:
            chosen: dict[str, ErrorEntry] = {}
            for glob in match.paths:
                prefix = _WILDCARD.split(glob, 1)[0]
                start = bisect.bisect_left(self._paths, prefix)
                end = bisect.bisect_left(self._paths, prefix + "\U0010ffff", start)
                chosen.update((entry.id, entry) for entry in self._by_path[start:end])
            found: Iterable[ErrorEntry] = chosen.values()
        else:
            found = self._by_path
        if match.exceptions:
            found = [entry for entry in found if (entry.exception or "") in match.exceptions]
        if match.kinds:
            found = [entry for entry in found if entry.kind in match.kinds]
        return found


# Where a glob's literal part ends: its first wildcard.
_WILDCARD = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two families that claim the same errors without different explicit priorities: how many
    errors, and one of them."""

    first: str
    second: str
    example: str
    count: int


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which family explains each error without an entry, the members of each family (every
    error it claims), and the conflicts between families."""

    by_error: dict[str, Family]
    members: dict[str, tuple[str, ...]]
    conflicts: tuple[Conflict, ...]


def _rank(family: Family) -> tuple[float, str]:
    return (-(family.priority if family.priority is not None else float("-inf")), family.name)


def assign(
    families: Iterable[Family], entries: Iterable[ErrorEntry], curated: Iterable[str] = (), claimed: Mapping[str, tuple[str, ...]] | None = None
) -> Assignment:
    """The family that explains each error that has no curated entry (ids in `curated`), with
    conflicts: an error claimed by several families goes to the one of highest priority, and
    is a conflict unless every claimant has an explicit priority and that one's is the only
    highest. A conflict still gives the error a family (the first by priority, then name), so a
    build is the same whatever `check` says. `claimed` is `members(families, entries)` when the
    caller has it (`FamilyState`)."""
    families = tuple(families)
    by_name = {family.name: family for family in families}
    claimed = dict(claimed) if claimed is not None else members(families, entries)
    by_error: dict[str, list[Family]] = {}
    for name, ids in claimed.items():
        for error in ids:
            by_error.setdefault(error, []).append(by_name[name])
    written = set(curated)
    chosen: dict[str, Family] = {}
    pairs: dict[tuple[str, str], list[str]] = {}
    for error, claimants in sorted(by_error.items()):
        claimants.sort(key=_rank)
        if len(claimants) > 1:
            first, second = claimants[0], claimants[1]
            if first.priority is None or any(other.priority is None for other in claimants[1:]) or first.priority == second.priority:
                pairs.setdefault((first.name, second.name), []).append(error)
        if error not in written:
            chosen[error] = claimants[0]
    conflicts = tuple(Conflict(a, b, ids[0], len(ids)) for (a, b), ids in sorted(pairs.items()))
    return Assignment(chosen, claimed, conflicts)


def family_of(families: Iterable[Family], entries: Iterable[ErrorEntry], curated: Iterable[str] = ()) -> dict[str, Family]:
    """By id, the family whose text each error without an entry of its own shows."""
    return assign(families, entries, curated).by_error


class FamilyState(BlobState):
    """`members` kept between builds: given the blob shas the entries came from, an update holds
    the families only against the errors of changed files (`model.changed_errors`), as whether a
    family claims an error depends on that error's entry alone; new or edited match blocks are
    held against every error again. The result is what `members` gives."""

    def __init__(self) -> None:
        self.blobs: dict[str, str] | None = None
        self.paths: dict[str, str] = {}
        self.matches: dict[str, FamilyMatch] = {}
        self.claimed: dict[str, frozenset[str]] = {}

    def update(self, families: Iterable[Family], entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str] | None) -> dict[str, tuple[str, ...]]:
        families = tuple(families)
        changed = self.since(entries, blobs)
        matches = {family.name: family.match for family in families}
        by_id = {entry.id: entry for entry in entries}
        if changed is None:
            changed, self.claimed = set(by_id), {}
        again = [family for family in families if self.matches.get(family.name) != family.match or family.name not in self.claimed]
        if again:
            self.claimed.update((name, frozenset(ids)) for name, ids in members(again, entries).items())
        put = [by_id[error] for error in changed if error in by_id]
        done = {family.name for family in again}
        for family in families:
            if family.name in done:
                continue
            patterns = Patterns.of(family.match)
            kept = self.claimed[family.name] - changed
            self.claimed[family.name] = kept | {entry.id for entry in put if claims(family.match, entry, patterns)}
        self.matches = matches
        self.claimed = {name: self.claimed[name] for name in matches}
        for error in changed:
            entry = by_id.get(error)
            if entry is None:
                self.paths.pop(error, None)
            else:
                self.paths[error] = "\0".join(site.path for site in entry.sites)
        return {name: tuple(sorted(ids)) for name, ids in self.claimed.items()}


def conflict_lines(assignment: Assignment, families: Mapping[str, Family]) -> list[tuple[str, str]]:
    """`check`'s failures of families, as (path, problem): families that claim the same errors
    without different explicit priorities, and families that claim nothing."""
    lines = []
    for conflict in assignment.conflicts:
        lines.append(
            (
                families[conflict.first].path,
                f"claims {conflict.count} errors that family '{conflict.second}' ({families[conflict.second].path}) also claims, "
                f"e.g. {conflict.example}: give both different priorities, or narrow one's match",
            )
        )
    for name, ids in sorted(assignment.members.items()):
        if not ids:
            lines.append((families[name].path, "matches no error: widen or fix its match block, or remove the file"))
    return lines
