"""History that loses nothing: the ledger of every id ever published, rewordings paired into
aliases, retirements, and the changes between two revisions.

The ledger lives in the repository (`content/ledger/<first hex digit>.jsonl`, one record per
line, sorted by id) so that a deleted `site/` or a fresh machine still knows every page it
ever published. `build` updates it after the new site is in place; the maintainer commits it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import operator
import re
import shutil
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import NamedTuple

from generator.errors import ContentError
from generator.cache import kept
from generator.files import read_cache, state_bytes, write_atomic, write_cache
from generator.model import Change, Curated, ErrorEntry, LedgerRecord, Place, Site, Upstream, Versions, Wording, error_id, place_releases, release_name, release_span

LEDGER_FOLDER = "ledger"
# The change list, a file per revision under this folder (`changes/v0.5.23.jsonl`), each
# revision's changes in the order a build made them; `CHANGES_NAME` is the one file it was.
CHANGES_FOLDER = "changes"
CHANGES_NAME = "changes.jsonl"
UPSTREAM_NAME = "upstream.json"

# Measured between SGLang 0.5.18 and 0.5.19 (311 ids disappeared, 2,468 appeared): among
# disappeared messages whose best candidate sits in the same qualified function, pairs at a
# similarity of 0.6 and above were rewordings on reading every one (`dense KV rows must match
# ...` -> `KV rows must match ...` scores 0.93, the Rust MM pipeline message 0.97), while below
# 0.6 about half were different checks that replaced the old one. Candidates that only share
# the function's bare name (another class or module) are unrelated far more often between 0.45
# and 0.75 (`zmq_context is required ...` -> `A ProcessGroup is required ...` scores 0.46), so
# they need 0.8.
SAME_FUNCTION_SIMILARITY = 0.6
SAME_NAME_SIMILARITY = 0.8

_RECORD_FIELDS = tuple(f.name for f in fields(LedgerRecord))
_FIELD_NAMES = frozenset(_RECORD_FIELDS)
_DEFAULTS = {f.name: f.default for f in fields(LedgerRecord) if f.default is not MISSING}
_NO_DEFAULT = object()
_scan_json = json.JSONDecoder().scan_once


# -- Storage ------------------------------------------------------------------------------------


def load_ledger(content: Path, lines: dict[str, tuple[tuple, str]] | None = None) -> dict[str, LedgerRecord]:
    """Every record of `content/ledger/`, by id; `ContentError` listing every bad line.

    Active records are stored without `last_seen` (it is the revision of the last build, in
    `upstream.json`), so a new upstream revision rewrites only the lines of errors it changed.
    `lines`, when given, receives each record's line and what it says (`_line_key`), so that
    writing the ledger again encodes only the records that changed."""
    return _ledger_of(content, read_ledger_files(content), lines)


def read_ledger_files(content: Path) -> dict[str, bytes]:
    """The bytes of the ledger's files under `content/`, by path."""
    folder = content / LEDGER_FOLDER
    return {f"{LEDGER_FOLDER}/{p.name}": p.read_bytes() for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


def _ledger_of(content: Path, files: Mapping[str, bytes], lines: dict[str, tuple[tuple, str]] | None = None) -> dict[str, LedgerRecord]:
    """`load_ledger` of the ledger's files as read (`read_ledger_files`)."""
    latest = last_built(content)
    records: dict[str, LedgerRecord] = {}
    problems = []
    for relative, data in sorted(files.items()):
        path = content / relative
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            text = line.strip()
            if not text:
                continue
            try:
                # The decoder's scanner itself, without `json.loads`' checks around it: the
                # ledger's 27,000 lines are read on every build.
                try:
                    data, end = _scan_json(text, 0)
                except StopIteration as stop:
                    raise ValueError(f"not valid JSON at column {stop.value + 1}") from None
                if end != len(text):
                    raise ValueError(f"extra data at column {end + 1}")
                if not _FIELD_NAMES.issuperset(data):
                    raise ValueError(f"unknown field {sorted(set(data) - _FIELD_NAMES)[0]!r}")
                data.setdefault("last_seen", latest or data.get("first_seen"))
                for listed in ("aliases", "split_into"):
                    if listed in data:
                        data[listed] = tuple(data[listed])
                if "spans" in data:
                    data["spans"] = _read_spans(data["spans"], data.get("path"), data.get("function"))
                record = LedgerRecord(**data)
            except (ValueError, TypeError, AttributeError) as error:
                problems.append(f"{path}:{number}: ledger record: {error}")
                continue
            records[record.id] = record
            if lines is not None:
                lines[record.id] = (_line_key(record), line)
    if problems:
        raise ContentError("\n".join(problems))
    return records


def _read_spans(spans: object, path: object, function: object) -> tuple[tuple[str, str, int, str, str], ...]:
    """A record's `spans` as stored: each `[first, last, line, path, function]`, or `[first,
    last, line]` at the file and function of the span before it (the first: the record's own)."""
    if not isinstance(spans, list):
        raise ValueError("spans: not a list")
    read = []
    for span in spans:
        if not isinstance(span, list) or len(span) not in (3, 5) or not isinstance(span[2], int) or not all(isinstance(v, str) for v in span[:2] + span[3:]):
            raise ValueError(f"spans: {json.dumps(span)} is not [first, last, line] or [first, last, line, path, function]")
        if len(span) == 5:
            path, function = span[3], span[4]
        read.append((span[0], span[1], span[2], path, function))
    return tuple(read)


# What a record's ledger line says: every field, but `last_seen` only for a record no longer
# active (see `load_ledger`). Compared as one tuple, taken in C.
_LINE_FIELDS = operator.attrgetter(*(name for name in _RECORD_FIELDS if name != "last_seen"))


def _line_key(record: LedgerRecord) -> tuple:
    return (_LINE_FIELDS(record), None if record.status == "active" else record.last_seen)


def ledger_files(records: Mapping[str, LedgerRecord], known: Mapping[str, tuple[tuple, str]] | None = None, lines: dict[str, tuple[tuple, str]] | None = None) -> dict[str, bytes]:
    """The ledger as files under `ledger/`: one per first hex digit of the id, so that no file
    grows large, each record one sorted-key JSON line without default values. `known` holds
    lines as read (`load_ledger`): a record whose line says what it says keeps that line.
    `lines`, when given, receives each record's line as `load_ledger` would read it back."""
    made = ledger_lines(records, known)
    if lines is not None:
        lines.update(made)
    shards: dict[str, list[str]] = {}
    for error_id in sorted(records):
        shards.setdefault(error_id[0], []).append(made[error_id][1])
    return {f"{LEDGER_FOLDER}/{digit}.jsonl": ("\n".join(texts) + "\n").encode() for digit, texts in shards.items()}


def ledger_lines(records: Mapping[str, LedgerRecord], known: Mapping[str, tuple[tuple, str]] | None = None) -> dict[str, tuple[tuple, str]]:
    """Each record's ledger line, by id, with what it says (as `load_ledger` gives them):
    lines in `known` that still say what their record says are kept, the others encoded."""
    known = known or {}
    lines = {}
    for error_id, record in records.items():
        key = _line_key(record)
        line = known.get(error_id)
        if line is None or line[0] != key:
            line = (key, _ledger_line(record))
        lines[error_id] = line
    return lines


def _ledger_line(record: LedgerRecord) -> str:
    """A record as a line of the ledger: sorted-key JSON without default values."""
    # getattr rather than asdict, which deep-copies: 27,000 records on every build.
    data = {k: v for k in _RECORD_FIELDS if _DEFAULTS.get(k, _NO_DEFAULT) != (v := getattr(record, k))}
    if data["status"] == "active":
        del data["last_seen"]
    for listed in ("aliases", "split_into"):
        if listed in data:
            data[listed] = list(data[listed])
    if "spans" in data:
        # A span at the file and function of the span before it (the first: the record's own)
        # says only its releases and line.
        at, data["spans"] = (record.path, record.function), []
        for span in record.spans:
            data["spans"].append(list(span[:3]) if span[3:] == at else list(span))
            at = span[3:]
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


# A line's id: in a JSON string a quote is escaped, so only the key reads like this.
_LINE_ID = re.compile(r'"id": "([^"\\]+)"')


def changed_ledger_files(records: Mapping[str, LedgerRecord], changed: Collection[str], read: Mapping[str, bytes]) -> dict[str, bytes]:
    """`ledger_files` of `records`, given the ledger's files as the build read them (`read`,
    by path) and the ids whose lines say something else now (`changed`: the records read
    differ by `_line_key`, or are new): a file holding none of them stays as read, and the
    others keep the lines read of the ids not changed. A rebuild changes a few dozen of
    36,000 lines, so that no cache of every line (44 MB) is written and read on every build."""
    shards: dict[str, list[str]] = {}
    for error_id in sorted(records):
        shards.setdefault(error_id[0], []).append(error_id)
    files = {}
    for digit, ids in shards.items():
        path = f"{LEDGER_FOLDER}/{digit}.jsonl"
        before = read.get(path)
        if before is not None and changed.isdisjoint(ids):
            files[path] = before
            continue
        lines = {}
        for line in (before or b"").decode("utf-8", errors="replace").splitlines():
            if (found := _LINE_ID.search(line)) is not None:
                lines[found.group(1)] = line
        texts = [lines[error_id] if error_id not in changed and error_id in lines else _ledger_line(records[error_id]) for error_id in ids]
        files[path] = ("\n".join(texts) + "\n").encode()
    return files


def write_history(
    content: Path, records: Mapping[str, LedgerRecord], changes: Iterable[Change], known: Mapping[str, tuple[tuple, str]] | None = None
) -> None:
    """Write the ledger and the change list into `content/`, each file atomically, touching
    only files whose bytes change. `known`: the lines as read (see `ledger_files`)."""
    write_files(content, history_files(records, changes, known))


def history_files(
    records: Mapping[str, LedgerRecord],
    changes: Iterable[Change],
    known: Mapping[str, tuple[tuple, str]] | None = None,
    cache_dir: Path | None = None,
    revision: str | None = None,
    fresh: tuple[Change, ...] | None = None,
    earlier: Mapping[str, bytes] | None = None,
    texts: Mapping[str, str] | None = None,
    ledger: Mapping[str, bytes] | None = None,
    touched: Collection[str] | None = None,
) -> dict[str, bytes]:
    """The ledger's files (`ledger_files`) and the change list's (`changes_files`), by path
    under `content/`. With the `ledger`'s files as read and the ids whose lines change
    (`touched`), only those lines are encoded (`changed_ledger_files`). With `cache_dir` and
    the `revision` the build records as built, what `load_history` will read back from these
    files is kept in the cache under their digest, so the next build need not parse them,
    with the `texts` of the records' versions, for the next build to work out again only
    those of the ids it changes (`version_texts`). With `fresh` (this build's changes, all of
    its revision), only those are encoded, the others' files being those read (`earlier`,
    their bytes by path)."""
    files = changed_ledger_files(records, touched, ledger) if ledger is not None and touched is not None else ledger_files(records, known)
    changes = tuple(changes)
    if fresh is None:
        files.update(changes_files(changes))
    else:
        files.update(earlier or {})
        for path, data in changes_files(fresh).items():
            files[path] = data + (earlier or {}).get(path, b"")
    if cache_dir is not None:
        path = _history_cache(cache_dir, files, revision)
        write_cache(path, state_bytes((dict(records), changes, texts)))
        # Only the newest is kept: a build reads the one its content folder's files name.
        for other in path.parent.glob(path.name.split("-", 1)[0] + "-*.pickle"):
            if other != path:
                other.unlink(missing_ok=True)
        # Where earlier versions kept the ledger's lines, 44 MB a build.
        shutil.rmtree(cache_dir / "history-lines", ignore_errors=True)
    return files


def load_history(content: Path, cache_dir: Path | None = None) -> tuple[dict[str, LedgerRecord], tuple[Change, ...]]:
    """`load_ledger` and `load_changes` of `content/`; with `cache_dir`, read from the cache
    when the last build kept them for files with these bytes (`history_files`)."""
    read = _read_history(content, cache_dir)
    return read.records, read.changes


class _ReadHistory(NamedTuple):
    """`load_history`, with the ledger's and the change list's files as read (by path) and
    the texts of the records' versions the build that wrote them kept (`version_texts`; None
    when the records were read from the files)."""

    records: dict[str, LedgerRecord]
    changes: tuple[Change, ...]
    texts: dict[str, str] | None
    ledger: dict[str, bytes]
    change_files: dict[str, bytes]


def _read_history(content: Path, cache_dir: Path | None) -> _ReadHistory:
    ledger, change_files = read_ledger_files(content), read_changes_files(content)
    if cache_dir is not None:
        kept_history = read_cache(_history_cache(cache_dir, {**ledger, **change_files}, last_built(content)), tuple)
        if kept_history is not None:
            return _ReadHistory(*kept_history, ledger, change_files)
    return _ReadHistory(_ledger_of(content, ledger), _changes_of(content, change_files), None, ledger, change_files)


def _history_cache(cache_dir: Path, files: Mapping[str, bytes], revision: str | None) -> Path:
    """Where the parsed history of these ledger and change-list bytes is kept (`history/`),
    named by their digest and the revision `upstream.json` names."""
    digest = hashlib.sha256(repr(revision).encode())
    for name in sorted(files):
        if name == CHANGES_NAME or name.startswith((f"{LEDGER_FOLDER}/", f"{CHANGES_FOLDER}/")):
            digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    # The records' classes, and the texts of their versions (`version_texts`), come from `model`.
    return kept(cache_dir, "history", [__file__, sys.modules[LedgerRecord.__module__].__file__], suffix="-" + digest.hexdigest()[:24])


def changes_path(revision: str) -> str:
    """Where a revision's changes are, under `content/`: `changes/v0.5.23.jsonl`."""
    return f"{CHANGES_FOLDER}/{revision.replace('/', '_')}.jsonl"


def changes_files(changes: Iterable[Change]) -> dict[str, bytes]:
    """The change list as files, one per revision, each revision's changes in their order."""
    grouped: dict[str, list[str]] = {}
    for change in changes:
        grouped.setdefault(changes_path(change.revision), []).append(change_line(change))
    return {path: changes_file(lines) for path, lines in grouped.items()}


def read_changes_files(content: Path) -> dict[str, bytes]:
    """The bytes of the change list's files under `content/`, by path; and of the one file it
    was (`changes.jsonl`), which the next write replaces."""
    folder = content / CHANGES_FOLDER
    files = {f"{CHANGES_FOLDER}/{p.name}": p.read_bytes() for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}
    single = content / CHANGES_NAME
    if single.exists():
        files[CHANGES_NAME] = single.read_bytes()
    return files


def newest_first(changes: Iterable[Change]) -> tuple[Change, ...]:
    """Changes by revision, newest first (by date, then version, then name), each revision's
    in the order given: the order the change list is read back in whatever its files."""
    from generator.upstream import version_key

    return tuple(sorted(changes, key=lambda c: (c.date, version_key(release_name(c.revision)), c.revision), reverse=True))


def change_line(change: Change) -> str:
    """One change as its line of `changes.jsonl`."""
    return json.dumps(asdict(change), sort_keys=True, ensure_ascii=False)


def changes_file(lines: Iterable[str]) -> bytes:
    """`changes.jsonl` from its lines (`change_line`), newest first."""
    lines = list(lines)
    return ("\n".join(lines) + "\n").encode() if lines else b""


def write_files(content: Path, files: Mapping[str, bytes]) -> None:
    """`history_files` into `content/` (see `write_history`); the ledger's and change list's
    files it does not hold are removed, once the others are written (the one change file of
    earlier builds, `changes.jsonl`, is then in the per-revision files)."""
    for relative, data in files.items():
        target = content / relative
        if target.exists() and target.read_bytes() == data:
            continue
        if not data and not target.exists():
            continue
        write_atomic(target, data)
    for name in (LEDGER_FOLDER, CHANGES_FOLDER):
        folder = content / name
        for stale in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
            if f"{name}/{stale.name}" not in files:
                stale.unlink()
    if CHANGES_NAME not in files:
        (content / CHANGES_NAME).unlink(missing_ok=True)


def last_built(content: Path) -> str | None:
    """The upstream revision the last build described, from `content/upstream.json`."""
    try:
        return json.loads((content / UPSTREAM_NAME).read_text(encoding="utf-8"))["revision"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_changes(content: Path) -> tuple[Change, ...]:
    """The change list, newest first (`newest_first`), as the builds so far recorded it: the
    files of `changes/`, and `changes.jsonl` where earlier builds kept it whole."""
    return _changes_of(content, read_changes_files(content))


def _changes_of(content: Path, files: Mapping[str, bytes]) -> tuple[Change, ...]:
    """`load_changes` of the change list's files as read (`read_changes_files`)."""
    changes = []
    for relative, data in files.items():
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    changes.append(Change(**json.loads(line)))
                except (ValueError, TypeError) as error:
                    raise ContentError(f"{content / relative}:{number}: change record: {error}") from None
    return newest_first(changes)


# -- Updating the ledger ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerUpdate:
    """The ledger after one build, and what changed at this revision (empty for the first)."""

    records: dict[str, LedgerRecord]
    changes: tuple[Change, ...]


def update_ledger(
    previous: Mapping[str, LedgerRecord],
    entries: tuple[ErrorEntry, ...],
    upstream: Upstream,
    blobs: Mapping[str, str] | None = None,
    codes: Mapping[str, str] | None = None,
) -> LedgerUpdate:
    """Fold one revision's errors into the ledger: new ids are added, ids seen again stay
    active, vanished ids are paired with new ones as rewordings (aliases) or retired.

    `blobs` maps each upstream path to its blob sha; with it, each record's `code` says where
    its code is (`code_fingerprint`, or `codes` by id where already known), and its pin
    (`pinned`, `pinned_date`) stays at the revision where that last changed, so its page and
    links stay the same until then."""
    revision = upstream.revision
    blobs = blobs or {}
    codes = codes or {}
    current = {entry.id: entry for entry in entries}
    records: dict[str, LedgerRecord] = {}
    changes: list[Change] = []
    first_build = not previous

    def change(error_id: str, kind: str, message: str | None, detail: str = "") -> None:
        if not first_build:
            changes.append(Change(error_id, revision, upstream.date, kind, message, detail))

    vanished = [r for r in previous.values() if r.status == "active" and r.id not in current]
    appeared = [e for e in entries if e.id not in previous or previous[e.id].status != "active"]
    # Ids the id rules changed (a message read from its variable, `{expr=}` keeping its text)
    # go to the errors whose sites had them; the rest may be rewordings.
    # Only an error that appeared can be one a vanished id became: the site of an error whose id
    # stayed may have had a vanished id's key under the earlier rules too.
    rekeyed = legacy_ids(appeared, upstream.repo, {r.id for r in vanished})
    pairs = {old: new[0] for old, new in rekeyed.items() if len(new) == 1}
    pairs.update(pair_rewordings([r for r in vanished if r.id not in rekeyed], appeared))
    reworded_to = set(pairs.values())
    for entry in entries:
        old = previous.get(entry.id)
        record = _record_of(entry, upstream, old, blobs, codes.get(entry.id))
        records[entry.id] = record
        if (old is None or old.status != "active") and entry.id not in reworded_to:
            change(entry.id, "added", entry.title)
        elif old is not None and (old.path, old.function) != (record.path, record.function):
            change(entry.id, "moved", entry.title, f"{old.path}:{old.line} ({old.function or 'module'})")
    for old in vanished:
        new_id = pairs.get(old.id)
        if len(rekeyed.get(old.id, ())) > 1:
            records[old.id] = replace(old, status="split", split_into=rekeyed[old.id], retired_in=revision, aliases=())
            change(old.id, "split", old.message, " ".join(rekeyed[old.id]))
        elif new_id is not None:
            records[old.id] = replace(old, status="moved", moved_to=new_id, retired_in=revision, aliases=())
            target = records[new_id]
            aliases = tuple(sorted({*target.aliases, old.id, *old.aliases}))
            records[new_id] = replace(target, aliases=aliases)
            change(old.id, "rekeyed" if old.id in rekeyed else "reworded", old.message, new_id)
        else:
            records[old.id] = replace(old, status="retired", retired_in=revision)
            change(old.id, "retired", old.message)
    for record in previous.values():
        if record.id not in records:
            records[record.id] = record
    for record in list(records.values()):
        if not record.pinned:
            # A page no longer active stays as it was when it left; one from a ledger older
            # than pins is pinned to this revision once, and stays there.
            records[record.id] = replace(record, pinned=revision, pinned_date=upstream.date)
    for record in list(records.values()):
        if record.status == "active" and record.aliases:
            kept = tuple(a for a in record.aliases if records.get(a) is None or records[a].status != "active")
            records[record.id] = replace(record, aliases=kept)
    return LedgerUpdate(records, tuple(sorted(changes, key=lambda c: (c.change, c.id))))


def _record_of(entry: ErrorEntry, upstream: Upstream, old: LedgerRecord | None, blobs: Mapping[str, str], code: str | None = None) -> LedgerRecord:
    site = entry.sites[0]
    revision = upstream.revision
    code = code or code_fingerprint(entry, blobs)
    if old is not None and old.code == code and old.pinned:
        pinned, pinned_date = old.pinned, old.pinned_date
    else:
        pinned, pinned_date = revision, upstream.date
    spans, since = (), ""
    if old is not None:
        spans, since = old.spans, old.since
        if old.status != "active" or (old.line, old.path, old.function) != (site.line, site.path, site.function):
            # It left the place it was at: that place closes at the last release there.
            spans = (*spans, (since or old.first_seen, old.last_seen, old.line, old.path, old.function))
            since = revision
    return LedgerRecord(
        id=entry.id,
        status="active",
        first_seen=old.first_seen if old else revision,
        last_seen=revision,
        kind=entry.kind,
        exception=entry.exception,
        message=entry.message,
        path=site.path,
        line=site.line,
        function=site.function,
        aliases=old.aliases if old else (),
        code=code,
        pinned=pinned,
        pinned_date=pinned_date,
        spans=spans,
        since=since,
        condition=site.assert_condition if site.kind == "assert" else None,
    )


def code_fingerprint(entry: ErrorEntry, blobs: Mapping[str, str]) -> str:
    """Where an error's code is: each site's path, lines and the blob sha of its file, sorted
    and hashed. Equal fingerprints at two revisions mean every line a page shows is the same."""
    places = sorted(f"{site.path}\0{site.line}\0{site.end_line}\0{blobs.get(site.path, '')}" for site in entry.sites)
    return hashlib.sha256("\n".join(places).encode()).hexdigest()[:12]


def places(sites: Iterable[Site], blobs: Mapping[str, str]) -> tuple[tuple[str, int, int, str | None], ...]:
    """Where sites are: path, lines and the blob sha of the file. A site is a pure function of
    its place and the extractor, so what is computed from sites alone can be kept by places."""
    return tuple((site.path, site.line, site.end_line, blobs.get(site.path)) for site in sites)


def merge_superseded(records: Mapping[str, LedgerRecord], supersedes: Mapping[str, tuple[str, ...]], strict: bool = True) -> dict[str, LedgerRecord]:
    """The ledger with each retired id a curated entry says its error continues (`supersedes`:
    the error's id -> those ids) recorded as moved to it, as a rewording the ledger paired
    itself is: its page leads to the error, and its last message becomes an earlier wording.
    Ids already moved there stay. `ContentError` lists every id that is not a retired id of the
    ledger, or an error that is not raised now; not `strict` (a build), those are left out, as
    a ledger without the history they name (another upstream, a first build) is no error of
    the content: `check` reports them against the committed ledger."""
    merged = dict(records)
    problems = []
    for error, olds in sorted(supersedes.items()):
        target = merged.get(error)
        if target is None or target.status != "active":
            problems.append(f"{error}: supersedes: the error itself is not raised at this revision")
            continue
        for old in olds:
            record = merged.get(old)
            if record is not None and record.status == "moved" and resolve(merged, old) == error:
                continue
            if record is None or record.status != "retired":
                problems.append(f"{error}: supersedes: {old} is not a retired id of the ledger ({record.status if record else 'unknown'})")
                continue
            merged[old] = replace(record, status="moved", moved_to=error)
            target = merged[error] = replace(target, aliases=tuple(sorted({*target.aliases, old})))
    if problems and strict:
        raise ContentError("\n".join(problems))
    return merged


def pinned_upstream(record: LedgerRecord, upstream: Upstream) -> Upstream:
    """The upstream a record's page names and links to: its pin, or `upstream` without one.
    Only the repo, revision and date are kept, since nothing else may differ between builds
    that leave the page as it was."""
    if not record.pinned:
        return upstream
    return Upstream(repo=upstream.repo, source="", revision=record.pinned, date=record.pinned_date)


def pinned_upstreams(records: Mapping[str, LedgerRecord], upstream: Upstream) -> dict[str, Upstream]:
    """`pinned_upstream` of every record, by id: one `Upstream` per pin, as 27,000 records share a
    few dozen pins."""
    made: dict[tuple[str, str], Upstream] = {}
    pins = {}
    for error, record in records.items():
        pin = (record.pinned, record.pinned_date)
        found = made.get(pin)
        if found is None:
            found = made[pin] = pinned_upstream(record, upstream)
        pins[error] = found
    return pins


def legacy_ids(entries: Iterable[ErrorEntry], repo: str, wanted: Collection[str]) -> dict[str, tuple[str, ...]]:
    """Of the `wanted` ids, those some site had under the earlier id rules (`Site.legacy_key`):
    each with the ids, sorted, of the errors whose sites had it."""
    found: dict[str, set[str]] = {}
    for entry in entries:
        for site in entry.sites:
            if site.legacy_key is not None:
                old = error_id(repo, site.exception or "", site.legacy_key)
                if old in wanted:
                    found.setdefault(old, set()).add(entry.id)
    return {old: tuple(sorted(new)) for old, new in sorted(found.items())}


def pair_rewordings(vanished: list[LedgerRecord], appeared: list[ErrorEntry]) -> dict[str, str]:
    """Old id -> new id for vanished messages that were reworded: the same exception, the same
    function (or one with the same bare name), similar text. Each new id takes at most one old
    id, best pairs first."""
    by_exception: dict[str | None, list[ErrorEntry]] = {}
    for entry in appeared:
        if entry.message is not None:
            by_exception.setdefault(entry.exception, []).append(entry)
    candidates = []
    for old in vanished:
        if old.message is None:
            continue
        for new in by_exception.get(old.exception, ()):
            functions = {site.function for site in new.sites}
            if old.function in functions:
                threshold = SAME_FUNCTION_SIMILARITY
            elif _bare(old.function) in {_bare(f) for f in functions}:
                threshold = SAME_NAME_SIMILARITY
            else:
                continue
            score = similarity(old.message, new.message, threshold)
            if score >= threshold:
                candidates.append((-score, old.id, new.id))
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for _, old_id, new_id in sorted(candidates):
        if old_id not in pairs and new_id not in taken:
            pairs[old_id] = new_id
            taken.add(new_id)
    return pairs


def similarity(old: str, new: str, at_least: float = 0.0) -> float:
    """How alike two message templates read, from 0 to 1 (difflib's ratio on the text); or,
    when difflib's cheap upper bounds of that ratio already fall below `at_least`, that bound.
    The ratio itself costs a search for matching blocks, the bounds only a count of lengths and
    of characters: a backfill compares thousands of candidates, most of them far apart."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for bound in (matcher.real_quick_ratio, matcher.quick_ratio):
        if (score := bound()) < at_least:
            return score
    return matcher.ratio()


def _bare(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def resolve(records: Mapping[str, LedgerRecord], error_id: str) -> str:
    """Where an id's page lives now: follow `moved_to` to the end (cycles stop)."""
    seen = {error_id}
    record = records.get(error_id)
    while record is not None and record.status == "moved" and record.moved_to and record.moved_to not in seen:
        error_id = record.moved_to
        seen.add(error_id)
        record = records.get(error_id)
    return error_id


def _moved_places(moved: list[Change], first: str) -> tuple[tuple[Place, ...], str]:
    """Where an id was raised before each of its moves the change list records (`moved`: each
    detail is the old `path:line (function)`), oldest first, each with the release that first
    raised it there (the id's `first` release for the first place); and the release of the
    last move: since when it is where it is now."""
    from generator.upstream import version_key

    places, since = [], first
    for change in sorted(moved, key=lambda c: (c.date, version_key(release_name(c.revision)), c.revision)):
        where, _, function = change.detail.rpartition(" (")
        path, _, line = where.rpartition(":")
        function = function.removesuffix(")")
        places.append(Place(path, int(line) if line.isdigit() else 0, "" if function == "module" else function, since, change.revision))
        since = change.revision
    return tuple(places), since


def versions_of(records: Mapping[str, LedgerRecord], changes: Iterable[Change] = ()) -> dict[str, Versions]:
    """By id, the releases that raised it (`LedgerVersions`), every id worked out."""
    return dict(LedgerVersions(records, changes))


class LedgerVersions(Mapping):
    """By id, the releases that raised it (`model.Versions`): an error's first release is that
    of the oldest earlier id the ledger paired into it (followed through every move), and its
    earlier wordings are their messages, each said once over all the releases of the ids that
    had it, whether it is raised now or was retired after its last rewording (a user of a
    release before that pastes the earlier wording); a moved id's are its own. With the change
    list, each id also gets the places it was raised in before it moved (`_moved_places`).

    An id moved into another was raised before it, so the further back along the moves, the
    older: that orders the ids of one error whatever names its revisions have (a commit's
    tells nothing), and versions order ids equally far back.

    An id's versions are worked out when first asked for: a rebuild's pages ask for those of a
    few hundred ids of 36,000 (`version_texts` tells which changed), and only the search index,
    in another process, for all of them. Iterated in the order of the ids."""

    def __init__(self, records: Mapping[str, LedgerRecord], changes: Iterable[Change] = ()) -> None:
        from generator.upstream import version_key

        def depth(record: LedgerRecord) -> int:
            steps, seen = 0, {record.id}
            while record.status == "moved" and record.moved_to and record.moved_to not in seen:
                steps += 1
                seen.add(record.moved_to)
                record = records.get(record.moved_to)
                if record is None:
                    break
            return steps

        self.records = records
        # By active id, its earlier ids, each with its order: older first.
        earlier: dict[str, list[tuple[tuple, LedgerRecord]]] = {}
        for record in records.values():
            if record.status != "moved":
                continue
            # An id that one release both gave and took back (the id rules changed between two
            # builds of it) was never the id of a release: it says nothing of when or where.
            if record.retired_in == record.first_seen:
                continue
            target = records.get(resolve(records, record.id))
            if target is not None and target.status in ("active", "retired"):
                earlier.setdefault(target.id, []).append(((-depth(record), version_key(release_name(record.first_seen)), record.id), record))
        self._earlier = {error: [found for _, found in sorted(older, key=operator.itemgetter(0))] for error, older in earlier.items()}
        self._moves: dict[str, list[Change]] = {}
        for change in changes:
            if change.change == "moved" and change.detail:
                self._moves.setdefault(change.id, []).append(change)
        self._found: dict[str, Versions] = {}

    def __getitem__(self, error: str) -> Versions:
        found = self._found.get(error)
        if found is None:
            found = self._found[error] = self._versions(self.records[error])
        return found

    def __iter__(self):
        return iter(sorted(self.records))

    def __len__(self) -> int:
        return len(self.records)

    def _versions(self, record: LedgerRecord) -> Versions:
        error = record.id
        if record.spans or record.since:
            moved, here = record_places(record)
        elif error in self._moves:
            moved, here = _moved_places(self._moves[error], record.first_seen)
        else:
            moved, here = (), None
        older = self._earlier.get(error, [])
        if record.status != "active" and not (record.status == "retired" and older):
            return Versions(record.first_seen, record.last_seen, record.retired_in or "", (), moved, here)
        if older:
            moved, here = joined_places(older, record, moved, here)
        # One wording over all the ids that had it: from the oldest's first release to the
        # newest's last, and the release that reworded that one. A message the same release
        # also raised under another id (the id rules changed between two builds of it) is no
        # earlier wording.
        spans: dict[str, list[str]] = {}
        current = record.seen_message
        for found in older:
            # A bare assert's earlier wording is the statement its tracebacks printed.
            message = found.seen_message
            if message is None or message == current or found.retired_in == found.last_seen:
                continue
            span = spans.setdefault(message, [found.first_seen, found.last_seen, found.retired_in or ""])
            span[1], span[2] = found.last_seen, found.retired_in or ""
        first = older[0].first_seen if older else record.first_seen
        wordings = tuple(Wording(message, *span) for message, span in spans.items())
        if record.status == "retired":
            return Versions(first, record.last_seen, record.retired_in or "", wordings, moved, here)
        return Versions(first, None, "", wordings, moved, here)


def versions_text(versions: Versions | None) -> str:
    """A short digest of what `versions` say, which a page's inputs compare (`version_texts`)."""
    return hashlib.blake2b(repr(versions).encode(), digest_size=8).hexdigest()


def version_texts(
    previous: Mapping[str, LedgerRecord],
    records: Mapping[str, LedgerRecord],
    versions: Mapping[str, Versions],
    kept: Mapping[str, str] | None,
    touched: frozenset[str] | None = None,
) -> dict[str, str]:
    """`versions_text` of each id's `versions`, the ledger being `records`. With `kept`, the
    texts of the `previous` records (as the build that wrote those kept them), only the ids
    whose versions can differ are worked out: each whose record says something else
    (`touched`, else `touched_ids`), and the ids those records led to, before and after (an
    id's versions read the records of its earlier ids). A rebuild changes a few dozen of 36,000."""
    if kept is None:
        return {error: versions_text(versions[error]) for error in records}
    touched = touched_ids(previous, records) if touched is None else touched
    again = touched | {resolve(previous, error) for error in touched if error in previous} | {resolve(records, error) for error in touched}
    return {error: kept[error] if error not in again and error in kept else versions_text(versions[error]) for error in records}


def touched_ids(previous: Mapping[str, LedgerRecord], records: Mapping[str, LedgerRecord]) -> frozenset[str]:
    """The ids of `records` that `previous` lacks or whose ledger lines say something else
    (`_line_key`): what a build changed in the ledger."""
    return frozenset(error for error, record in records.items() if (old := previous.get(error)) is not record and (old is None or _line_key(old) != _line_key(record)))


def record_places(record: LedgerRecord) -> tuple[tuple[Place, ...], str | None]:
    """Where one id was raised before where it is now (its `spans`), oldest first, each until
    the release that next raised it elsewhere; and since when it is where it is (None when it
    never moved)."""
    if not record.spans:
        return (), None
    here = record.since or record.first_seen
    starts = [span[0] for span in record.spans[1:]] + [here]
    places = tuple(Place(path, line, function, first, start, last) for (first, last, line, path, function), start in zip(record.spans, starts))
    return places, here


def joined_places(older: list[LedgerRecord], record: LedgerRecord, own: tuple[Place, ...], here: str | None) -> tuple[tuple[Place, ...], str | None]:
    """The places of an error over its earlier ids (`older`, oldest first: each raised it with
    an earlier wording) and its own, oldest first, and since when it is where it is now. An
    earlier id's last place is where it was until reworded; the same place on both sides of a
    rewording is one place."""
    places: list[Place] = []
    for found in older:
        earlier, since = record_places(found)
        last = Place(found.path, found.line, found.function, since or found.first_seen, found.retired_in or "", found.last_seen)
        places.extend((*earlier, last))
    places.extend(own)
    merged: list[Place] = []
    for place in places:
        before = merged[-1] if merged else None
        if before is not None and (before.path, before.line, before.function) == (place.path, place.line, place.function) and before.moved_in == place.first:
            merged[-1] = replace(before, moved_in=place.moved_in, last=place.last)
        else:
            merged.append(place)
    here = here or record.first_seen
    if merged and (merged[-1].path, merged[-1].line, merged[-1].function) == (record.path, record.line, record.function) and merged[-1].moved_in == here:
        here = merged.pop().first or here
    return tuple(merged), here if merged else None


def revisions_of(records: Mapping[str, LedgerRecord]) -> tuple[str, ...]:
    """Every revision the ledger names as the first that raised an id, the last that raised one
    no longer raised, or the one that retired or moved it, sorted: the releases pages link to.
    (An active id's last is the newest build's, which changed nothing by that alone.)"""
    named = set()
    for record in records.values():
        named.add(record.first_seen)
        if record.status != "active":
            named.update((record.last_seen, record.retired_in))
    return tuple(sorted(named - {None, ""}))


def _retired_entry(record: LedgerRecord, found: Versions | None) -> tuple[ErrorEntry, str]:
    """An error no longer raised as an entry a search index takes (its last message, exception
    and place, as the ledger keeps them), with what a lookup says of it: the releases that
    raised it. A user of an old release pastes its words; the page the search finds says it
    is gone and since when."""
    from generator.content import printed_template

    template = printed_template(record.message) if record.message is not None else None
    site = Site(record.kind, record.exception, template, record.path, record.line, record.line, record.function, (), (), record.condition, record.line, record.line)
    span = release_span(found.first, found.last) if found and found.last else release_name(record.last_seen)
    note = f"no longer raised: SGLang {span}" + (f", retired in {release_name(record.retired_in)}" if record.retired_in else "")
    return ErrorEntry(record.id, record.kind, record.exception, template, (site,), record.message), note


def _indexed_places(found: Versions) -> tuple[tuple[str, str, int, str], ...]:
    return tuple((p.path, p.function, p.line, place_releases(p)) for p in found.places)


class EarlierPlaces(Mapping):
    """By id, where earlier releases raised it before it moved (path, function, line), each with
    the releases that raised it there, for the search index: a traceback from one of those
    releases points there, and its line says which. Worked out from `versions` when asked for:
    a rebuild's search index asks for those of the few errors it puts in again."""

    def __init__(self, versions: Mapping[str, Versions]) -> None:
        self.versions = versions

    def __getitem__(self, error: str) -> tuple[tuple[str, str, int, str], ...]:
        found = self.versions.get(error)
        if found is None or not found.places:
            raise KeyError(error)
        return _indexed_places(found)

    def __iter__(self):
        return (error for error, found in self.versions.items() if found.places)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _indexed_wordings(found: Versions) -> tuple[tuple[str, str], ...]:
    """An active id's earlier wordings (`versions_of`) as forms a lookup finds it by, each with
    what the lookup says of it: the releases that raised it and the one that reworded it."""
    return tuple((wording.message, f"matched an earlier wording, raised by {wording.releases}") for wording in found.wordings)


class SearchFacts(NamedTuple):
    """What a search index knows of one id from the ledger beyond its places (`EarlierPlaces`):
    an error no longer raised as an entry, with what a lookup says of it; and its earlier
    wordings, as forms a lookup finds it by."""

    retired: ErrorEntry | None
    note: str
    wordings: tuple[tuple[str, str], ...]


def search_facts(record: LedgerRecord, found: Versions | None) -> SearchFacts | None:
    """`SearchFacts` of one id, from its record and its versions; None when there are none."""
    entry, note = _retired_entry(record, found) if record.status == "retired" and record.path else (None, "")
    wordings = _indexed_wordings(found) if found is not None else ()
    if entry is None and not wordings:
        return None
    return SearchFacts(entry, note, wordings)


class LedgerFacts:
    """`search_facts` of every id of the ledger, kept between builds with the search index's
    state (`search.IndexState`), each with what it was made from: the digest of the id's
    versions (`version_texts`) and, for an error no longer raised, its last message, place and
    releases. A rebuild works out again only the facts of the ids whose digests changed, a few
    dozen of 36,000, instead of every id's versions and every retired error's template; and
    the ids it returns are those whose earlier places may have changed too."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.facts: dict[str, SearchFacts] = {}

    def update(self, records: Mapping[str, LedgerRecord], versions: Mapping[str, Versions], texts: Mapping[str, str]) -> set[str]:
        """Bring the facts to `records`, whose `versions` digest as `texts`; the ids whose facts
        were made again, and those no longer in the ledger."""
        keys, changed = {}, set()
        for error, record in records.items():
            key = texts[error]
            if record.status == "retired":
                key = f"{key}\0{record.path}\0{record.line}\0{record.function}\0{record.kind}\0{record.exception}\0{record.message}\0{record.last_seen}\0{record.retired_in}\0{record.condition}"
            keys[error] = key
            if self.keys.get(error) != key:
                changed.add(error)
                found = search_facts(record, versions.get(error))
                if found is None:
                    self.facts.pop(error, None)
                else:
                    self.facts[error] = found
        for error in self.keys.keys() - keys.keys():
            changed.add(error)
            self.facts.pop(error, None)
        self.keys = keys
        return changed


def ledger_facts(records: Mapping[str, LedgerRecord], versions: Mapping[str, Versions]) -> dict[str, SearchFacts]:
    """`search_facts` of every id of `records` that has some, made from scratch."""
    return {error: found for error, record in records.items() if (found := search_facts(record, versions.get(error))) is not None}


def carry_curated(curated: Mapping[str, Curated], records: Mapping[str, LedgerRecord]) -> dict[str, Curated]:
    """Curated content of reworded ids, carried to their new id and marked for review; a new
    id that has its own file keeps it. Nothing is dropped: the old file stays where it is."""
    carried = dict(curated)
    for error_id in sorted(curated):
        record = records.get(error_id)
        if record is None or record.status != "moved":
            continue
        target = resolve(records, error_id)
        if target not in carried:
            carried[target] = replace(curated[error_id], id=target, review=True)
    return carried


# -- Comparing two revisions --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    """What changed between two revisions' errors."""

    added: tuple[ErrorEntry, ...]
    retired: tuple[ErrorEntry, ...]
    reworded: tuple[tuple[ErrorEntry, ErrorEntry], ...]
    moved: tuple[tuple[ErrorEntry, ErrorEntry], ...]
    changed: tuple[tuple[ErrorEntry, ErrorEntry], ...]


def compare(before: tuple[ErrorEntry, ...], after: tuple[ErrorEntry, ...], revision: str = "") -> Difference:
    """Errors added, retired, reworded (old -> new), moved (same id, another file or function)
    and changed (same id and place, but its guards, context or interpolations changed)."""
    old = {e.id: e for e in before}
    new = {e.id: e for e in after}
    vanished = [_as_record(e, revision) for e in before if e.id not in new]
    appeared = [e for e in after if e.id not in old]
    pairs = pair_rewordings(vanished, appeared)
    reworded = tuple((old[a], new[b]) for a, b in sorted(pairs.items()))
    paired_new = set(pairs.values())
    moved, changed = [], []
    for error_id in sorted(set(old) & set(new)):
        a, b = old[error_id], new[error_id]
        if _places(a) != _places(b):
            moved.append((a, b))
        elif _code(a) != _code(b):
            changed.append((a, b))
    return Difference(
        added=tuple(e for e in appeared if e.id not in paired_new),
        retired=tuple(old[r.id] for r in vanished if r.id not in pairs),
        reworded=reworded,
        moved=tuple(moved),
        changed=tuple(changed),
    )


def _as_record(entry: ErrorEntry, revision: str) -> LedgerRecord:
    return _record_of(entry, Upstream(repo="", source="", revision=revision, date=""), None, {})


def _places(entry: ErrorEntry) -> frozenset[tuple[str, str]]:
    return frozenset((site.path, site.function) for site in entry.sites)


def _code(entry: ErrorEntry) -> frozenset[tuple]:
    return frozenset(_site_code(site) for site in entry.sites)


def _site_code(site: Site) -> tuple:
    template = site.template.text if site.template else None
    return (site.path, site.function, site.conditions, site.context, site.assert_condition, template)


# -- One build's history ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BuildHistory:
    """What a build publishes about the past: the updated ledger, the records of pages that are
    no longer active (moved ones pointing straight at their final id), and every change so far,
    newest first; and what writing the ledger back reads (`history_files`)."""

    records: dict[str, LedgerRecord]
    inactive: tuple[LedgerRecord, ...]
    changes: tuple[Change, ...]
    # The ledger's files as read, by path, and the ids whose lines change (`touched_ids`): a
    # rebuild encodes those lines only (`changed_ledger_files`).
    ledger: Mapping[str, bytes] = field(default_factory=dict)
    # The changes this build made (None: encode them all), and the bytes of the change
    # list's files it read, which hold the rest as written: 47,000 lines are not encoded
    # again on every build.
    fresh: tuple[Change, ...] | None = None
    earlier: Mapping[str, bytes] = field(default_factory=dict)
    # The releases of every id (`LedgerVersions`), and a digest of each (`version_texts`),
    # which the cache keeps with the ledger: by it, a rebuild finds the few that changed.
    versions: Mapping[str, Versions] = field(default_factory=dict)
    version_texts: Mapping[str, str] = field(default_factory=dict)
    touched: frozenset[str] | None = None


def build_history(
    content: Path,
    entries: tuple[ErrorEntry, ...],
    upstream: Upstream,
    blobs: Mapping[str, str] | None = None,
    codes: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    supersedes: Mapping[str, tuple[str, ...]] | None = None,
) -> BuildHistory:
    """Fold this revision into the ledger stored in `content/` (read, not yet written);
    `blobs` maps each upstream path to its blob sha, `codes` ids to their code fingerprints
    where already known (see `update_ledger`); `supersedes` the retired ids curated entries say
    their errors continue (`merge_superseded`)."""
    previous, changes, kept, ledger, earlier = _read_history(content, cache_dir)
    update = update_ledger(previous, entries, upstream, blobs, codes)
    records = merge_superseded(update.records, supersedes or {}, strict=False)
    update = LedgerUpdate(records, update.changes)
    inactive = tuple(
        replace(record, moved_to=resolve(update.records, record.id)) if record.status == "moved" else record
        for _, record in sorted(update.records.items())
        if record.status != "active"
    )
    every_change = newest_first(update.changes + changes)
    versions = LedgerVersions(records, every_change)
    touched = touched_ids(previous, records)
    texts = version_texts(previous, records, versions, kept, touched)
    if CHANGES_NAME in earlier:
        # Written whole by earlier builds: split by revision this once.
        return BuildHistory(update.records, inactive, every_change, ledger, versions=versions, version_texts=texts, touched=touched)
    return BuildHistory(update.records, inactive, every_change, ledger, update.changes, earlier, versions, texts, touched)


def save_history(content: Path, history: BuildHistory, upstream: Upstream, files: Mapping[str, bytes] | None = None) -> None:
    """Write the ledger, the change list and the revision built, once the site is in place;
    `files`: `history_files` of `history` when already made."""
    write_files(content, files if files is not None else history_files(history.records, history.changes))
    document = {"date": upstream.date, "repo": upstream.repo, "revision": upstream.revision, "source": upstream.source}
    data = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
    target = content / UPSTREAM_NAME
    if not target.exists() or target.read_bytes() != data:
        write_atomic(target, data)
