"""The ledger across real commits: moves keep ids, rewordings become aliases, removals retire,
curated text follows its error, and `errorkb diff` says all of it."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import pytest

from generator.cli import main
from generator.config import Config
from generator.errors import ContentError
from generator.history import (
    LedgerVersions,
    changed_ledger_files,
    touched_ids,
    EarlierPlaces,
    versions_of,
    ledger_facts,
    carry_curated,
    compare,
    ledger_files,
    load_changes,
    load_ledger,
    resolve,
    update_ledger,
    version_texts,
    write_history,
)
from generator.model import Curated, Place, group_sites
from generator.pipeline import extract_upstream
from generator.upstream import open_source
from tests.conftest import make_repo

V1 = {
    "python/sglang/srt/server_args.py": """\
        class ServerArgs:
            def _handle_kv4_compatibility(self):
                if not is_cuda():
                    raise RuntimeError("KV4 is not tested on non-CUDA platforms.")

            def check_tp(self):
                if self.tp_size < 1:
                    raise ValueError(f"dense KV rows must match loc_2d size: {self.tp_size}")

            def check_pp(self):
                raise NotImplementedError("pipeline parallel is not supported with LoRA")
        """,
}
V2 = {
    # The KV4 check moves to another file and function; the tp message is reworded;
    # the pp check is deleted.
    "python/sglang/srt/server_args.py": """\
        class ServerArgs:
            def check_tp(self):
                if self.tp_size < 1:
                    raise ValueError(f"KV rows must match loc_2d size: {self.tp_size}")
        """,
    "python/sglang/srt/arg_groups/kv_cache_hook.py": """\
        def handle_kv4_compatibility(cfg):
            if get_platform().is_cuda:
                return
            raise RuntimeError("KV4 is not tested on non-CUDA platforms.")
        """,
}


def entries_at(repo, revision, cache):
    extraction = extract_upstream(open_source(f"git:{repo}@{revision}", Config(), cache), cache, jobs=1)
    return extraction.upstream, group_sites(extraction.sites, extraction.upstream.repo)


@pytest.fixture
def history(tmp_path):
    shas = make_repo(tmp_path / "up", [V1, V2])
    cache = tmp_path / "cache"
    up1, first = entries_at(tmp_path / "up", shas[0], cache)
    up2, second = entries_at(tmp_path / "up", shas[1], cache)
    one = update_ledger({}, first, up1)
    two = update_ledger(one.records, second, up2)
    return shas, first, second, one, two


def by_message(entries, text):
    [entry] = [e for e in entries if e.message and text in e.message]
    return entry


def test_first_build_records_every_id_without_calling_them_changes(history):
    shas, first, _, one, _ = history
    assert set(one.records) == {e.id for e in first}
    assert one.changes == ()
    assert {(r.status, r.first_seen, r.last_seen) for r in one.records.values()} == {("active", shas[0], shas[0])}


def test_a_move_keeps_the_id_and_records_the_new_place(history):
    shas, first, second, _, two = history
    old, new = by_message(first, "KV4"), by_message(second, "KV4")
    assert old.id == new.id
    record = two.records[new.id]
    assert (record.status, record.path, record.function, record.first_seen) == (
        "active",
        "python/sglang/srt/arg_groups/kv_cache_hook.py",
        "handle_kv4_compatibility",
        shas[0],
    )
    [moved] = [c for c in two.changes if c.change == "moved"]
    assert (moved.id, moved.detail) == (new.id, "python/sglang/srt/server_args.py:4 (ServerArgs._handle_kv4_compatibility)")
    # Its versions name the place it was raised before, from its first release to the move.
    versions = versions_of(two.records, two.changes)[new.id]
    assert versions.places == (Place("python/sglang/srt/server_args.py", 4, "ServerArgs._handle_kv4_compatibility", shas[0], shas[1], shas[0]),)
    assert versions.here_since == shas[1]


def test_each_run_of_releases_at_one_line_is_a_place_and_survives_the_ledger_files(history, tmp_path):
    """Issue #17: where an error was raised in each range of releases, line by line. KV4 moves
    to kv_cache_hook.py, then down its file, then is not raised by one release and comes back:
    its versions list server_args.py:4, then kv_cache_hook.py:4, then :6 apart from the gap,
    and the place it is at now since the release that brought it back."""
    shas, _, second, _, two = history
    kv4 = by_message(second, "KV4").id
    hook = V2["python/sglang/srt/arg_groups/kv_cache_hook.py"]
    shifted = {**V2, "python/sglang/srt/arg_groups/kv_cache_hook.py": "import os\n\n" + textwrap.dedent(hook)}
    gone = {**V2, "python/sglang/srt/arg_groups/kv_cache_hook.py": "import os\n"}
    more = make_repo(tmp_path / "later", [shifted, gone, shifted])
    records = two.records
    for sha in more:
        upstream, entries = entries_at(tmp_path / "later", sha, tmp_path / "cache")
        records = update_ledger(records, entries, upstream).records
    # Through the ledger's files and back, as a build reads it.
    for name, data in ledger_files(records).items():
        (tmp_path / "content" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "content" / name).write_bytes(data)
    # (An active record's last release is the build's, which `upstream.json` names: not here.)
    read = {error: replace(record, last_seen=records[error].last_seen) for error, record in load_ledger(tmp_path / "content").items()}
    assert read == records
    versions = versions_of(read)[kv4]
    hook_path = "python/sglang/srt/arg_groups/kv_cache_hook.py"
    assert [(p.path, p.line, p.first, p.last, p.moved_in) for p in versions.places] == [
        ("python/sglang/srt/server_args.py", 4, shas[0], shas[0], shas[1]),
        (hook_path, 4, shas[1], shas[1], more[0]),
        (hook_path, 6, more[0], more[0], more[2]),
    ]
    assert (versions.here_since, read[kv4].line) == (more[2], 6)
    # The search index knows each earlier line with its releases: a traceback from the first
    # release's layout names it.
    assert [place[2:] for place in EarlierPlaces(versions_of(read))[kv4]] == [(4, shas[0]), (4, shas[1]), (6, more[0])]


def later_revisions(repo):
    """Four commits after V2, in `repo`: the hook's check moved down its file, the hook gone,
    back, and a second rewording of the KV rows check."""
    hook = V2["python/sglang/srt/arg_groups/kv_cache_hook.py"]
    shifted = {**V2, "python/sglang/srt/arg_groups/kv_cache_hook.py": "import os\n\n" + textwrap.dedent(hook)}
    gone = {**V2, "python/sglang/srt/arg_groups/kv_cache_hook.py": "import os\n"}
    reworded = {
        **shifted,
        "python/sglang/srt/server_args.py": V2["python/sglang/srt/server_args.py"].replace("KV rows must match", "KV rows must equal"),
    }
    return make_repo(repo, [shifted, gone, shifted, reworded])


def test_a_rebuild_works_out_again_only_the_versions_that_can_change(history, tmp_path):
    """Issue #17's rebuilds: the texts by which pages find their versions changed are kept
    from the build before for the ids whose records did not change, and are the same as all
    worked out anew, through a move down the file, a gap, a comeback and a second rewording
    (an id moved into one moved again, whose earlier ids' versions then belong to another)."""
    shas, _, second, _, two = history
    more = later_revisions(tmp_path / "later")
    records, changes = two.records, two.changes
    texts = version_texts({}, records, LedgerVersions(records, changes), None)
    for sha in more:
        upstream, entries = entries_at(tmp_path / "later", sha, tmp_path / "cache")
        update = update_ledger(records, entries, upstream)
        changes = update.changes + changes
        kept = version_texts(records, update.records, LedgerVersions(update.records, changes), texts)
        texts = version_texts({}, update.records, LedgerVersions(update.records, changes), None)
        assert kept == texts
        records = update.records
    # The second rewording moved the first's old id on to the newest: its versions say both.
    newest = next(record for record in records.values() if record.status == "active" and "must equal" in (record.message or ""))
    assert [wording.message[:18] for wording in LedgerVersions(records, changes)[newest.id].wordings] == ["dense KV rows must", "KV rows must match"]


def test_a_kept_search_index_learns_what_the_ledger_says_as_one_made_anew(history, tmp_path):
    """Issue #17's search of old wordings, in a rebuild: the index kept from the build before
    works out again only the ledger's facts of the ids whose versions or records changed
    (`history.LedgerFacts`), and gives the files an index made from scratch gives, through a
    move down the file, a retirement, a comeback and a second rewording."""
    from generator.search import IndexState, Known, search_files

    shas, _, _, one, _ = history
    more = later_revisions(tmp_path / "later")
    records, changes = one.records, one.changes
    state = IndexState("sgl-project/sglang")
    revisions = [(tmp_path / "up", shas[1])] + [(tmp_path / "later", sha) for sha in more]
    for number, (repo, sha) in enumerate(revisions):
        extraction = extract_upstream(open_source(f"git:{repo}@{sha}", Config(), tmp_path / "cache"), tmp_path / "cache", jobs=1)
        entries = group_sites(extraction.sites, extraction.upstream.repo)
        update = update_ledger(records, entries, extraction.upstream)
        changes = update.changes + changes
        versions = LedgerVersions(update.records, changes)
        texts = version_texts({}, update.records, versions, None)
        kept = dict(state.ledger.keys)
        files = state.update_ledger(entries, extraction.made_from(), (), {}, update.records, versions, texts)
        retired, known = Known.of_ledger({}, ledger_facts(update.records, versions), versions)
        assert files == search_files(entries + retired, "sgl-project/sglang", (), known)
        if number:
            # Only what the commit changed was worked out again: the ids whose lines changed,
            # and those their versions read.
            learned = {error for error, key in state.ledger.keys.items() if kept.get(error) != key}
            assert learned and len(learned) < len(update.records) / 2
        records = update.records
    assert known.retired and known.wordings and known.places
    # A ledger edited by hand: an error no longer raised said to be at another line, its
    # versions the same.
    gone = next(error for error, record in records.items() if record.status == "retired")
    records = {**records, gone: replace(records[gone], line=records[gone].line + 40)}
    versions = LedgerVersions(records, changes)
    files = state.update_ledger(entries, extraction.made_from(), (), {}, records, versions, version_texts({}, records, versions, None))
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    assert files == search_files(entries + retired, "sgl-project/sglang", (), known)


def test_a_rewording_becomes_an_alias_of_the_new_id(history):
    shas, first, second, _, two = history
    old, new = by_message(first, "dense KV rows"), by_message(second, "KV rows must match")
    assert old.id != new.id
    assert (two.records[old.id].status, two.records[old.id].moved_to, two.records[old.id].retired_in) == (
        "moved",
        new.id,
        shas[1],
    )
    assert two.records[new.id].aliases == (old.id,)
    assert resolve(two.records, old.id) == new.id
    assert [(c.change, c.id, c.detail) for c in two.changes if c.change == "reworded"] == [("reworded", old.id, new.id)]


def test_a_removed_error_is_retired_with_its_last_revision_and_place(history):
    shas, first, _, _, two = history
    gone = by_message(first, "pipeline parallel")
    record = two.records[gone.id]
    assert (record.status, record.last_seen, record.retired_in, record.path, record.line) == (
        "retired",
        shas[0],
        shas[1],
        "python/sglang/srt/server_args.py",
        11,
    )
    assert record.message == "pipeline parallel is not supported with LoRA"


def test_every_id_ever_published_still_resolves(history):
    _, first, second, _, two = history
    current = {e.id for e in second}
    for entry in first:
        final = resolve(two.records, entry.id)
        assert final in current or two.records[final].status == "retired"


def test_an_error_that_comes_back_is_active_again(tmp_path):
    shas = make_repo(tmp_path / "up", [V1, V2, V1])
    cache = tmp_path / "cache"
    records = {}
    for sha in shas:
        upstream, entries = entries_at(tmp_path / "up", sha, cache)
        records = update_ledger(records, entries, upstream).records
    _, original = entries_at(tmp_path / "up", shas[0], cache)
    assert {records[e.id].status for e in original} == {"active"}
    # The wording of the middle revision is now the alias, pointing back at the original.
    [middle] = [r for r in records.values() if r.status != "active"]
    assert (middle.message, middle.status) == ("KV rows must match loc_2d size: {self.tp_size}", "moved")
    assert records[middle.moved_to].aliases == (middle.id,)
    assert records[middle.id].aliases == ()


def test_unrelated_new_message_in_another_function_is_not_an_alias(tmp_path):
    shas = make_repo(
        tmp_path / "up",
        [
            {"python/sglang/a.py": "def f():\n    raise ValueError('tp size must be positive')\n"},
            {"python/sglang/a.py": "def g():\n    raise ValueError('tp size must be positive!')\n"},
        ],
    )
    records = {}
    for sha in shas:
        upstream, entries = entries_at(tmp_path / "up", sha, tmp_path / "cache")
        records = update_ledger(records, entries, upstream).records
    assert sorted(r.status for r in records.values()) == ["active", "retired"]


def test_curated_text_follows_the_alias_and_waits_for_review(history):
    _, first, second, _, two = history
    old, new = by_message(first, "dense KV rows"), by_message(second, "KV rows must match")
    written = Curated(old.id, f"content/errors/{old.id}.yaml", old.message, "Means.", (), None, (), None, (), None)
    carried = carry_curated({old.id: written}, two.records)
    assert carried[old.id] is written
    assert (carried[new.id].id, carried[new.id].explanation, carried[new.id].review) == (new.id, "Means.", True)


def test_ledger_round_trips_through_small_sorted_files(history, tmp_path):
    shas, _, _, _, two = history
    write_history(tmp_path / "content", two.records, two.changes)
    # Active records do not repeat the revision of the last build: a new revision leaves
    # the lines of untouched errors as they were.
    stored = [json.loads(line) for f in sorted((tmp_path / "content/ledger").iterdir()) for line in f.read_text().splitlines()]
    assert {(row["status"], "last_seen" in row) for row in stored} == {("active", False), ("moved", True), ("retired", True)}
    (tmp_path / "content/upstream.json").write_text(json.dumps({"revision": shas[1]}))
    files = sorted((tmp_path / "content" / "ledger").iterdir())
    assert all(f.name[0] in "0123456789abcdef" and f.suffix == ".jsonl" for f in files)
    for path in files:
        ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
        assert ids == sorted(ids) and all(i.startswith(path.stem) for i in ids)
    assert load_ledger(tmp_path / "content") == two.records
    assert load_changes(tmp_path / "content") == two.changes
    before = {f: f.stat().st_mtime_ns for f in files}
    write_history(tmp_path / "content", two.records, two.changes)
    assert {f: f.stat().st_mtime_ns for f in files} == before


def test_a_broken_ledger_line_is_reported_with_file_and_line(tmp_path):
    folder = tmp_path / "ledger"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "a1"}\nnot json\n\n{"id": "a2"} {"id": "a3"}\n')
    with pytest.raises(ContentError) as error:
        load_ledger(tmp_path)
    lines = str(error.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{folder / 'a.jsonl'}:1: ledger record:")
    assert lines[1] == f"{folder / 'a.jsonl'}:2: ledger record: not valid JSON at column 1"
    assert lines[2] == f"{folder / 'a.jsonl'}:4: ledger record: extra data at column 13"


def test_compare_and_the_diff_command(history, tmp_path, capsys):
    shas, first, second, _, _ = history
    difference = compare(first, second)
    assert [e.message for e in difference.added] == []
    assert [e.message for e in difference.retired] == ["pipeline parallel is not supported with LoRA"]
    assert [(a.message, b.message) for a, b in difference.reworded] == [
        ("dense KV rows must match loc_2d size: {self.tp_size}", "KV rows must match loc_2d size: {self.tp_size}")
    ]
    assert [b.message for _, b in difference.moved] == ["KV4 is not tested on non-CUDA platforms."]
    repo = tmp_path / "up"
    code = main(["diff", f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[1]}", "--json", "--cache-dir", str(tmp_path / "c")])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (document["from"], document["to"]) == (shas[0], shas[1])
    assert [len(document[k]) for k in ("added", "retired", "reworded", "moved", "changed")] == [0, 1, 1, 1, 0]
    assert document["moved"][0]["new"]["path"] == "python/sglang/srt/arg_groups/kv_cache_hook.py"
    main(["diff", f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[1]}", "--cache-dir", str(tmp_path / "c")])
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"{shas[0]} -> {shas[1]}: 0 added, 1 retired, 1 reworded, 1 moved, 0 changed"
    assert "      was: dense KV rows must match loc_2d size: {self.tp_size}" in text


def test_changed_means_same_id_and_place_but_different_guards(tmp_path):
    shas = make_repo(
        tmp_path / "up",
        [
            {"python/sglang/a.py": "def f(x):\n    if x > 1:\n        raise ValueError('too big')\n"},
            {"python/sglang/a.py": "def f(x):\n    if x > 2:\n        raise ValueError('too big')\n"},
        ],
    )
    _, first = entries_at(tmp_path / "up", shas[0], tmp_path / "cache")
    _, second = entries_at(tmp_path / "up", shas[1], tmp_path / "cache")
    assert [b.sites[0].conditions for _, b in compare(first, second).changed] == [("x > 2",)]


def test_writing_the_ledger_again_reuses_the_lines_of_unchanged_records(history, tmp_path):
    shas, _, _, _, two = history
    content = tmp_path / "content"
    write_history(content, two.records, two.changes)
    (content / "upstream.json").write_text(json.dumps({"revision": shas[1]}))
    fresh = {f.name: f.read_bytes() for f in sorted((content / "ledger").iterdir())}
    lines: dict = {}
    records = load_ledger(content, lines)
    assert records == two.records and lines.keys() == records.keys()
    # As read, the lines give the same files; a changed record gets a line of its own.
    assert ledger_files(records, lines) == {f"ledger/{name}": data for name, data in fresh.items()}
    error, record = sorted(records.items())[0]
    changed = {**records, error: replace(record, message="Reworded after all")}
    assert ledger_files(changed, lines) == ledger_files(changed)
    assert b"Reworded after all" in ledger_files(changed, lines)[f"ledger/{error[0]}.jsonl"]


def test_a_rebuild_encodes_only_the_ledger_lines_it_changes(history, tmp_path):
    """A rebuild writes the ledger from its files as read: a file none of whose records
    changed stays as it was read, byte for byte (a hand-written line too); in the others only
    the changed and new records' lines are encoded. What it writes reads back as the records."""
    shas, _, _, _, two = history
    content = tmp_path / "content"
    write_history(content, two.records, two.changes)
    (content / "upstream.json").write_text(json.dumps({"revision": shas[1]}))
    read = {f"ledger/{f.name}": f.read_bytes() for f in sorted((content / "ledger").iterdir())}
    records = load_ledger(content)
    (first, record), (last, other) = sorted(records.items())[0], sorted(records.items())[-1]
    assert first[0] != last[0]
    # A line written by hand, the same record, in the file of the last id.
    path = f"ledger/{last[0]}.jsonl"
    read[path] = read[path].replace(b'", "', b'",  "')
    changed = {**records, first: replace(record, message="Reworded after all")}
    touched = touched_ids(records, changed)
    assert touched == {first}
    files = changed_ledger_files(changed, touched, read)
    assert files[path] == read[path]
    assert files == {**ledger_files(changed), path: read[path]}
    for name, data in files.items():
        (content / name).write_bytes(data)
    assert load_ledger(content) == changed


def test_ids_the_id_rules_changed_are_moved_or_split_and_none_is_lost(tmp_path):
    """The ledger knows the ids of the earlier rules: a message in a variable had none (a
    location id), `{x=}` placeholders keyed `{}`. Each such id moves to its error's id now, or,
    where several errors shared it, becomes a split record listing them; none is retired."""
    from generator.extract import extract_source
    from generator.model import LedgerRecord, Upstream, error_id

    source = (
        "def init(self):\n"
        "    msg = 'Not enough memory.'\n"
        "    raise RuntimeError(msg)\n"
        "def warmup(res):\n"
        "    assert res.ok, f'{res=}, {res.text=}'\n"
        "    assert res.size, f'{res.size=}, {res.limit=}'\n"
    ).encode()
    repo = "sgl-project/sglang"
    entries = group_sites(extract_source(source, "python/sglang/srt/m.py"), repo)
    by_message = {entry.message: entry.id for entry in entries}
    location = error_id(repo, "RuntimeError", "@python/sglang/srt/m.py:init:0")
    shared = error_id(repo, "AssertionError", "{}, {}")
    previous = {
        error: LedgerRecord(error, "active", "v1", "v1", kind, exception, message, "python/sglang/srt/m.py", line, function)
        for error, kind, exception, message, line, function in (
            (location, "raise", "RuntimeError", None, 3, "init"),
            (shared, "assert", "AssertionError", "{res=}, {res.text=}", 5, "warmup"),
        )
    }
    upstream = Upstream(repo, "v2", "v2", "2026-01-02T00:00:00Z")
    update = update_ledger(previous, entries, upstream)
    moved = update.records[location]
    assert moved.status == "moved" and moved.moved_to == by_message["Not enough memory."]
    split = update.records[shared]
    assert split.status == "split"
    assert split.split_into == tuple(sorted((by_message["{res=}, {res.text=}"], by_message["{res.size=}, {res.limit=}"])))
    assert {c.change for c in update.changes if c.id in previous} == {"rekeyed", "split"}
    assert not any(record.status == "retired" for record in update.records.values())
    # And the ledger says so in its files, read back the same.
    write_history(tmp_path, update.records, update.changes)
    assert load_ledger(tmp_path)[shared].split_into == split.split_into


def test_a_message_read_from_the_last_of_several_assignments_moves_its_old_id_to_it_alone(tmp_path):
    """SGLang's tokenizer loader raised `err_msg` in two `except` branches; the second raise's
    message, assigned there too, was read only once the extractor took the last assignment on
    its path. Its old location id moves to its new id, never to the first raise, whose id stayed
    though its site had that location key under the very first rules."""
    from generator.extract import extract_source
    from generator.model import LedgerRecord, Upstream, error_id

    path, repo = "python/sglang/srt/t.py", "sgl-project/sglang"
    source = (
        "def load(name):\n"
        "    try:\n"
        "        return open_it(name)\n"
        "    except TypeError as e:\n"
        "        err_msg = 'Use the fast tokenizer.'\n"
        "        raise RuntimeError(err_msg) from e\n"
        "    except ValueError as e:\n"
        "        err_msg = 'Set --trust-remote-code.'\n"
        "        raise RuntimeError(err_msg) from e\n"
    ).encode()
    entries = group_sites(extract_source(source, path), repo)
    fast, custom = (next(e.id for e in entries if e.message == text) for text in ("Use the fast tokenizer.", "Set --trust-remote-code."))
    location = error_id(repo, "RuntimeError", f"@{path}:load:0")
    previous = {
        fast: LedgerRecord(fast, "active", "v1", "v1", "raise", "RuntimeError", "Use the fast tokenizer.", path, 6, "load"),
        location: LedgerRecord(location, "active", "v1", "v1", "raise", "RuntimeError", None, path, 9, "load"),
    }
    update = update_ledger(previous, entries, Upstream(repo, "v2", "v2", "2026-01-02T00:00:00Z"))
    assert (update.records[location].status, update.records[location].moved_to) == ("moved", custom)
    assert update.records[fast].status == "active" and location not in update.records[fast].aliases
    assert [(c.change, c.id, c.detail) for c in update.changes if c.id in previous] == [("rekeyed", location, custom)]


def test_an_id_one_release_gave_and_took_back_says_nothing_of_when_an_error_began():
    """Ids the id rules made and unmade within builds of one release (first seen and retired in
    it) moved into errors that release already raised under older ids: the error's first
    release, and its places, are those of the older ids."""
    from generator.model import LedgerRecord

    path = "python/sglang/srt/t.py"
    records = {
        "new": LedgerRecord("new", "active", "v0.5.23", "v0.5.23", "raise", "RuntimeError", "Set --trust-remote-code.", path, 9, "load", aliases=("old", "phantom")),
        "old": LedgerRecord("old", "moved", "v0.5.11", "v0.5.23", "raise", "RuntimeError", None, path, 9, "load", moved_to="new", retired_in="v0.5.23"),
        "phantom": LedgerRecord("phantom", "moved", "v0.5.23", "v0.5.23", "raise", "RuntimeError", None, path, 9, "load", moved_to="old", retired_in="v0.5.23"),
    }
    assert versions_of(records)["new"].first == "v0.5.11"


def test_a_retired_assert_without_a_message_is_titled_by_its_place_for_search():
    """Where the ledger keeps no condition (182 old records), a retired bare `assert` is named
    by its exception and function in search results, not "assert None"."""
    from generator.history import search_facts
    from generator.model import LedgerRecord

    record = LedgerRecord("gone", "retired", "v0.5.6", "v0.5.6.post2", "assert", "AssertionError", None, "python/sglang/srt/mem_cache/m.py", 324, "MambaRadixCache.__init__", retired_in="v0.5.7")
    found = search_facts(record, None)
    assert found.retired.title == "AssertionError in MambaRadixCache.__init__"
    assert found.note == "no longer raised: SGLang 0.5.6.post2, retired in 0.5.7"


def test_a_retired_message_with_a_self_documenting_value_needs_its_name_in_the_paste():
    """`f"{n=} ..."` prints `n=` before the value. The ledger keeps the message as text, and a
    retired error's template is read back from it: `{n=}` must not become a bare value that
    any text fills, or every paste ending "must be divisible by ..." is an exact match of it."""
    from generator.model import LedgerRecord
    from generator.search import Known, SearchIndex, lookup

    path = "python/sglang/srt/layers/quantization/fp8_utils.py"
    records = {
        "gone": LedgerRecord("gone", "retired", "v0.5.9", "v0.5.17", "assert", "AssertionError", "{n=} must be divisible by {block_n}", path, 120, "linear", retired_in="v0.5.18"),
    }
    versions = versions_of(records)
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    index = SearchIndex.of_entries(retired, "sgl-project/sglang", (), known)
    [found] = lookup("AssertionError: n=96 must be divisible by 128", index)
    assert (found.id, found.match) == ("gone", "message")
    assert [r.match for r in lookup("ValueError: KDA num_heads (64) must be divisible by global tp_size (3)", index)] != ["message"]


def test_an_error_retired_after_a_rewording_keeps_its_earlier_wording_and_releases():
    """The ledger's chains end in retired ids too: an assert reworded in 0.5.7 and removed in
    0.5.21. A user of 0.5.4 pastes the first wording; the lookup finds the error by it, and its
    versions run from the first id's release to the last one's, not only the last id's own."""
    from generator.model import LedgerRecord, Wording
    from generator.search import Known, SearchIndex, lookup

    path = "python/sglang/srt/mem_cache/mamba_radix_cache.py"
    old = "Incorrect LRU list, {self.mamba=}, x: {x.id=} != x_lru: {x_lru.id=}"
    records = {
        "first": LedgerRecord("first", "moved", "v0.5.3.post2", "v0.5.6.post2", "assert", "AssertionError", old, path, 295, "LRUList.sanity_check", moved_to="last", retired_in="v0.5.7"),
        "last": LedgerRecord("last", "retired", "v0.5.7", "v0.5.20", "assert", "AssertionError", old + ", {x.last_access_time=}", path, 413, "LRUList.sanity_check", aliases=("first",), retired_in="v0.5.21"),
    }
    versions = versions_of(records)
    found = versions["last"]
    assert (found.first, found.last, found.retired_in) == ("v0.5.3.post2", "v0.5.20", "v0.5.21")
    assert found.wordings == (Wording(old, "v0.5.3.post2", "v0.5.6.post2", "v0.5.7"),)
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    index = SearchIndex.of_entries(retired, "sgl-project/sglang", (), known)
    [hit, *_] = lookup("AssertionError: Incorrect LRU list, self.mamba=True, x: x.id=12500 != x_lru: x_lru.id=11444", index)
    assert (hit.id, hit.match) == ("last", "message")
    assert "raised by SGLang 0.5.3.post2 to 0.5.6.post2" in hit.note


def test_a_bare_assert_that_gained_a_message_is_found_by_its_old_statement():
    """`_force_track_h`'s assert was bare up to 0.5.18 (`assert i % chunk_size == 0`) and has a
    message since (`supersedes` links the two): the statement the old tracebacks printed is the
    error's earlier wording, so a paste of it finds the error, saying which releases raised it."""
    from generator.model import LedgerRecord, Wording
    from generator.search import Known, SearchIndex, lookup

    path = "python/sglang/srt/managers/schedule_batch.py"
    function = "ScheduleBatch.prepare.<locals>._force_track_h"
    new = "The force track calculation needs a chunk-aligned offset. But i={i} chunk_size={chunk_size}"
    records = {
        "bare": LedgerRecord("bare", "moved", "v0.5.18", "v0.5.18", "assert", "AssertionError", None, path, 2645, function, moved_to="worded", retired_in="v0.5.19", condition="i % chunk_size == 0"),
        "worded": LedgerRecord("worded", "retired", "v0.5.19", "v0.5.22", "assert", "AssertionError", new, path, 2777, function, retired_in="v0.5.23", condition="(i - prefix_len) % chunk_size == 0"),
    }
    versions = versions_of(records)
    assert versions["worded"].wordings == (Wording("assert i % chunk_size == 0", "v0.5.18", "v0.5.18", "v0.5.19"),)
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    index = SearchIndex.of_entries(retired, "sgl-project/sglang", (), known)
    paste = """  File "sglang/srt/managers/schedule_batch.py", line 2654, in _force_track_h
      assert i % chunk_size == 0
             ^^^^^^^^^^^^^^^^^^^
  AssertionError"""
    [hit, *_] = lookup(paste, index)
    assert (hit.id, hit.match) == ("worded", "message")
    assert "raised by SGLang 0.5.18; reworded in 0.5.19" in hit.note


def test_a_removed_bare_assert_is_found_by_the_statement_an_old_traceback_prints(tmp_path):
    """Most asserts have no message: a traceback shows `assert <condition>` above a bare
    `AssertionError`. The ledger keeps the condition, so a paste from a release that still
    raised it finds it by that statement once it is gone, at whatever line that release had."""
    from generator.search import Known, SearchIndex, lookup

    path = "python/sglang/srt/layers/attention/flashattention_backend.py"
    old = {path: "class FlashAttentionBackend:\n    def forward_extend(self):\n        assert not get_global_server_args().disable_chunked_prefix_cache\n"}
    new = {path: "class FlashAttentionBackend:\n    def forward_extend(self):\n        return None\n"}
    shas = make_repo(tmp_path / "up", [old, new])
    up1, first = entries_at(tmp_path / "up", shas[0], tmp_path / "cache")
    up2, second = entries_at(tmp_path / "up", shas[1], tmp_path / "cache")
    records = update_ledger(update_ledger({}, first, up1).records, second, up2).records
    [gone] = first
    assert records[gone.id].status == "retired"
    assert records[gone.id].condition == "not get_global_server_args().disable_chunked_prefix_cache"
    # Read back from the ledger's files as a later build reads them.
    for relative, data in ledger_files(records).items():
        (tmp_path / "content" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "content" / relative).write_bytes(data)
    records = load_ledger(tmp_path / "content")
    versions = versions_of(records)
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    index = SearchIndex.of_entries(retired, "sgl-project/sglang", (), known)
    paste = """Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/attention/flashattention_backend.py", line 834, in forward_extend
    assert not get_global_server_args().disable_chunked_prefix_cache
AssertionError"""
    [found, *_] = lookup(paste, index)
    assert (found.id, found.match) == (gone.id, "traceback")
    assert found.title == "assert not get_global_server_args().disable_chunked_prefix_cache"


def _two_revisions(tmp_path, old: dict, new: dict):
    """The entries of two commits of upstream (`old`, then `new`), the ledger after both, and
    the search index of the second with what the ledger keeps of the first."""
    from generator.search import Known, SearchIndex

    shas = make_repo(tmp_path / "up", [old, new])
    up1, first = entries_at(tmp_path / "up", shas[0], tmp_path / "cache")
    up2, second = entries_at(tmp_path / "up", shas[1], tmp_path / "cache")
    records = update_ledger(update_ledger({}, first, up1).records, second, up2).records
    versions = versions_of(records)
    retired, known = Known.of_ledger({}, ledger_facts(records, versions), versions)
    return first, second, records, SearchIndex.of_entries(second + retired, "sgl-project/sglang", (), known)


def test_of_sites_alike_the_one_an_earlier_release_raised_at_the_traceback_line_goes_first(tmp_path):
    """sglang#9652: `init_new` raises `NotImplementedError` at several places; a traceback of
    0.5.1 names its line, where that release raised one of them, since moved down the file.
    That one goes first, where the ids' order decided before."""
    from generator.search import lookup

    path = "python/sglang/srt/eplb/expert_distribution.py"
    body = "def init_new(mode):\n    if mode == 'a':\n        raise NotImplementedError\n    if mode == 'b':\n        raise NotImplementedError\n"
    old = {path: body}
    new = {path: "import os\n\n\n" + body}
    first, second, records, index = _two_revisions(tmp_path, old, new)
    [a, b] = sorted(second, key=lambda entry: entry.sites[0].line)
    paste = """  File "/sglang/python/sglang/srt/eplb/expert_distribution.py", line 5, in init_new
    raise NotImplementedError
NotImplementedError"""
    found = lookup(paste, index)
    assert [hit.id for hit in found[:2]] == [b.id, a.id]
    assert "the traceback's line is where SGLang" in found[0].note


def test_an_exact_old_wording_comes_before_the_beginning_of_a_new_one(tmp_path):
    """A user of 0.5.19 pastes the DeepEP v2 message of that release, which a later one removed
    and wrote anew elsewhere, unpaired: the retired error explains the whole paste and the new
    one only its beginning, so the retired one comes first (sglang#39408)."""
    from generator.search import lookup

    path = "python/sglang/srt/arg_groups/moe_hook.py"
    old = {path: 'def validate(architecture, validated):\n    raise ValueError(f"DeepEP v2 MoE is not validated for {architecture!r}; supported architectures are {sorted(validated)}. Use --moe-a2a-backend deepep.")\n'}
    new = {path: 'def check_registered(architecture):\n    raise ValueError(f"DeepEP v2 MoE is not validated for {architecture!r}. The model package must register its architecture first.")\n'}
    first, second, records, index = _two_revisions(tmp_path, old, new)
    [gone], [now] = first, second
    assert (records[gone.id].status, records[now.id].status) == ("retired", "active")
    paste = "ValueError: DeepEP v2 MoE is not validated for 'Qwen3_5MoeForConditionalGeneration'; supported architectures are ['DeepseekV3ForCausalLM']. Use --moe-a2a-backend deepep."
    assert [(found.id, found.match) for found in lookup(paste, index)][:2] == [(gone.id, "message"), (now.id, "beginning")]


def test_a_statement_in_functions_of_that_name_in_several_other_files_is_no_sign_of_where(tmp_path):
    """sglang#2270: a 0.4.0 traceback through `FusedMoE.__init__`'s bare assert, removed since.
    Three `__init__`s of another file check the same statement today; the frame's file, line and
    statement point at the retired one, which comes first."""
    from generator.search import lookup

    moe = "python/sglang/srt/layers/fused_moe_triton/layer.py"
    linear = "python/sglang/srt/layers/linear.py"
    checks = "".join(f"class {name}:\n    def __init__(self):\n        assert self.quant_method is not None\n" for name in ("ReplicatedLinear", "ColumnParallelLinear", "RowParallelLinear"))
    old = {moe: "class FusedMoE:\n    def __init__(self):\n        assert self.quant_method is not None\n", linear: checks}
    new = {moe: "class FusedMoE:\n    def __init__(self):\n        self.quant_method = None\n", linear: checks}
    first, second, records, index = _two_revisions(tmp_path, old, new)
    [gone] = [entry for entry in first if entry.sites[0].path == moe]
    assert records[gone.id].status == "retired" and len(second) == 3
    paste = """    self.experts = FusedMoE(
  File "/home/.local/lib/python3.10/site-packages/sglang/srt/layers/fused_moe_triton/layer.py", line 3, in __init__
    assert self.quant_method is not None
AssertionError"""
    assert lookup(paste, index)[0].id == gone.id


def test_a_traceback_of_an_assert_that_moved_file_lists_the_one_raised_now_first(tmp_path):
    """A bare assert's id holds its file: moved to another file, the old id is retired and a new
    one added. A traceback from before the move points at both (the old by its file and line, the
    new by its function and statement): the one raised now comes first, as for a message both
    explain, and the retired one follows."""
    from generator.search import lookup

    body = "class SWAComponent:\n    def build_hicache_transfers(self, cd):\n        assert cd.host_value is not None or cd.value is not None\n"
    old = {"python/sglang/srt/mem_cache/swa_component.py": body}
    new = {"python/sglang/srt/mem_cache/swa_component.py": None, "python/sglang/srt/mem_cache/components/swa.py": body}
    first, second, records, index = _two_revisions(tmp_path, old, new)
    [gone], [now] = first, second
    assert (records[gone.id].status, records[now.id].status) == ("retired", "active")
    paste = """Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/sglang/srt/mem_cache/swa_component.py", line 3, in build_hicache_transfers
    assert cd.host_value is not None or cd.value is not None
AssertionError"""
    assert [found.id for found in lookup(paste, index)][:2] == [now.id, gone.id]


def test_an_earlier_wording_is_known_by_its_releases_and_found_by_lookup(history):
    """A user on the release before a rewording pastes the old message: the lookup puts the
    new id first, as an exact match of its earlier wording, and says which releases raised
    that wording and which reworded it; the page and document know the same releases."""
    from generator.model import Versions, Wording
    from generator.search import Known, SearchIndex, lookup

    shas, first, second, _, two = history
    old, new = by_message(first, "dense KV rows"), by_message(second, "KV rows must match")
    gone = by_message(first, "pipeline parallel")
    versions = versions_of(two.records)
    # Where the earlier wording was raised is where the error was, up to the rewording.
    was = Place(old.sites[0].path, old.sites[0].line, old.sites[0].function, shas[0], shas[1], shas[0])
    assert versions[new.id] == Versions(shas[0], None, "", (Wording(old.message, shas[0], shas[0], shas[1]),), (was,), shas[1])
    assert versions[gone.id] == Versions(shas[0], shas[0], shas[1])
    kv4 = versions[by_message(second, "KV4").id]
    assert (kv4.first, kv4.last, kv4.wordings, kv4.here_since) == (shas[0], None, (), shas[1])
    repo = "sgl-project/sglang"
    paste = "ValueError: dense KV rows must match loc_2d size: 3"
    _, known = Known.of_ledger({}, ledger_facts(two.records, versions), versions)
    [found, *_] = lookup(paste, SearchIndex.of_entries(second, repo, (), known))
    assert (found.id, found.match) == (new.id, "message")
    assert found.note == f"matched an earlier wording, raised by SGLang {shas[0]}; reworded in {shas[1]}"


def test_a_curated_supersedes_pairs_a_retired_id_the_ledger_could_not(history):
    """A curator says an error continues a retired one (the text changed too much for the
    ledger to pair them): the retired id moves to it, its last message becomes an earlier
    wording, and a paste of that message finds the error. Ids that are not retired fail with
    every problem listed."""
    from generator.errors import ContentError
    from generator.history import merge_superseded
    from generator.search import Known, SearchIndex, lookup

    shas, first, second, _, two = history
    gone, kept = by_message(first, "pipeline parallel"), by_message(second, "KV4")
    merged = merge_superseded(two.records, {kept.id: (gone.id,)})
    assert (merged[gone.id].status, merged[gone.id].moved_to, merged[kept.id].aliases) == ("moved", kept.id, (gone.id,))
    assert merge_superseded(merged, {kept.id: (gone.id,)}) == merged  # already moved there: the same
    versions = versions_of(merged)
    assert [w.message for w in versions[kept.id].wordings] == ["pipeline parallel is not supported with LoRA"]
    paste = "NotImplementedError: pipeline parallel is not supported with LoRA"
    _, known = Known.of_ledger({}, ledger_facts(merged, versions), versions)
    [found, *_] = lookup(paste, SearchIndex.of_entries(second, "sgl-project/sglang", (), known))
    assert found.id == kept.id and found.note.startswith("matched an earlier wording")
    with pytest.raises(ContentError) as failed:
        merge_superseded(two.records, {kept.id: ("0123456789abcdef", by_message(second, "KV rows").id)})
    assert str(failed.value).splitlines() == [
        f"{kept.id}: supersedes: 0123456789abcdef is not a retired id of the ledger (unknown)",
        f"{kept.id}: supersedes: {by_message(second, 'KV rows').id} is not a retired id of the ledger (active)",
    ]


def test_an_old_traceback_points_at_where_an_error_was_raised_before_it_moved(history):
    """A traceback from a release before the move: its raising frame is the error's old place
    (server_args.py:4 in ServerArgs._handle_kv4_compatibility), which the index holds from the
    change list, so the error is found as raised there, though its file moved since."""
    from generator.search import Known, SearchIndex, lookup

    shas, _, second, _, two = history
    kv4 = by_message(second, "KV4")
    paste = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/sglang/srt/server_args.py", line 4, in _handle_kv4_compatibility\n'
        '    raise RuntimeError("KV4 is not tested on non-CUDA platforms.")\n'
        "RuntimeError: <the message was cut off>\n"
    )
    versions = versions_of(two.records, two.changes)
    with_places = lookup(paste, SearchIndex.of_entries(second, "sgl-project/sglang", (), Known(places=EarlierPlaces(versions))))
    assert (with_places[0].id, with_places[0].match) == (kv4.id, "traceback")
    without = lookup(paste, SearchIndex.of_entries(second, "sgl-project/sglang"))
    assert not without or without[0].match != "traceback"


def test_the_change_list_is_a_file_per_revision_and_one_whole_file_is_split_losing_nothing(history, tmp_path):
    """Each revision's changes are a small file of their own (a build adds or changes one), read
    back newest first; a content folder from before, with the whole list in `changes.jsonl`,
    is read the same and split by the next write."""
    from generator.history import CHANGES_NAME, change_line, changes_file, history_files, write_files

    shas, _, _, _, two = history
    content = tmp_path / "content"
    write_history(content, two.records, two.changes)
    assert sorted(p.name for p in (content / "changes").iterdir()) == [f"{shas[1]}.jsonl"]
    assert load_changes(content) == two.changes
    # As earlier builds left it: one file, newest first.
    for path in (content / "changes").iterdir():
        path.unlink()
    (content / CHANGES_NAME).write_bytes(changes_file(change_line(c) for c in two.changes))
    assert load_changes(content) == two.changes
    write_files(content, history_files(two.records, load_changes(content)))
    assert not (content / CHANGES_NAME).exists() and load_changes(content) == two.changes
