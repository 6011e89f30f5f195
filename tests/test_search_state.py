"""The search index kept between builds (`search.IndexState`): after an upstream change it takes
out and puts in only the errors of the files whose blobs changed, and its files are byte for
byte those of an index made from scratch, whatever the change did to counts, stop words and
shards."""

from __future__ import annotations

import hashlib
import json
import pickle
import textwrap

import pytest

from generator import search
from generator.extract import extract_source
from generator.files import state_bytes
from generator.model import ErrorEntry, group_sites
from generator.search import IndexState, search_files

REPO = "sgl-project/sglang"


def tree(files: dict[str, str]) -> tuple[tuple[ErrorEntry, ...], dict[str, str]]:
    """The entries of `files` (path -> source) and their blob shas."""
    sites = []
    for path, source in files.items():
        sites.extend(extract_source(textwrap.dedent(source).encode(), path))
    blobs = {path: hashlib.sha1(source.encode()).hexdigest() for path, source in files.items()}
    return group_sites(tuple(sites), REPO), blobs


FIRST = {
    "python/sglang/srt/a.py": """
        def load(cache_size, dtype):
            if cache_size < 0:
                raise ValueError(f"kv cache size must be positive, got {cache_size}")
            if dtype not in ("fp8", "bf16"):
                raise ValueError(f"unsupported kv cache dtype {dtype}")
            assert cache_size % 16 == 0, "kv cache size must be a multiple of 16"
    """,
    "python/sglang/srt/b.py": """
        class Runner:
            def start(self, port):
                if port is None:
                    raise RuntimeError("port must be set before the runner starts")
                raise NotImplementedError(f"runner on {port} is not supported yet")
    """,
    "python/sglang/srt/c.py": """
        def check(world):
            if world > 8:
                raise ValueError(f"world size {world} must not exceed 8")
            assert world, "world size must be set"
    """,
}

SECOND = {
    # Reworded, one error added and one gone.
    "python/sglang/srt/a.py": """
        def load(cache_size, dtype):
            if cache_size < 0:
                raise ValueError(f"the kv cache size must be positive, got {cache_size}")
            if dtype == "int4":
                raise ValueError("int4 kv cache dtype is not supported on this platform")
    """,
    "python/sglang/srt/b.py": FIRST["python/sglang/srt/b.py"],
    # c.py deleted, d.py new, and b.py's errors raised from d.py too.
    "python/sglang/srt/d.py": """
        def serve(port, world):
            if port is None:
                raise RuntimeError("port must be set before the runner starts")
            if world > 8:
                raise ValueError(f"world size {world} must not exceed 8 here")
    """,
}


@pytest.fixture
def incremental_only(monkeypatch):
    """An update that would make the index again fails the test: what it checks is the path
    that takes out and puts in."""

    def made_again(entries):
        raise AssertionError("the index was made again from scratch")

    return lambda state: monkeypatch.setattr(state, "_remake", made_again)


def test_update_gives_the_files_of_an_index_made_from_scratch(incremental_only) -> None:
    first, first_blobs = tree(FIRST)
    second, second_blobs = tree(SECOND)
    state = IndexState(REPO)
    assert state.update(first, first_blobs) == search_files(first, REPO)
    # Kept in the cache between builds as `build.search_files` keeps it.
    state = pickle.loads(state_bytes(state))
    incremental_only(state)
    assert state.update(second, second_blobs) == search_files(second, REPO)
    # And back: what was taken out is put in again where it was.
    assert state.update(first, first_blobs) == search_files(first, REPO)


def test_update_when_the_stop_line_moves(incremental_only, monkeypatch) -> None:
    """Words in more errors than the stop line are left out of the shards; a change of the
    error count moves the line, and the words it crosses come and go."""
    monkeypatch.setattr(search, "_stop", lambda count: count // 3)
    first, first_blobs = tree(FIRST)
    second, second_blobs = tree(SECOND)
    assert search._stop(len(first)) != search._stop(len(second))
    state = IndexState(REPO)
    state.update(first, first_blobs)
    incremental_only(state)
    assert state.update(second, second_blobs) == search_files(second, REPO)


def postings_of(files: dict[str, bytes]) -> dict[tuple[str, str], int]:
    """Each (word, id) of the token shards, with its score."""
    found = {}
    for name, data in files.items():
        if name.startswith(f"{search.INDEX_DIR}/t/"):
            for word, flat in json.loads(data).get("postings", {}).items():
                found.update(((word, flat[n]), flat[n + 1]) for n in range(0, len(flat), 2))
    return found


def test_errors_added_leave_the_others_scores_as_they_were() -> None:
    """A commit that adds errors, however long or short their messages, changes no other
    error's postings: only the shards of its own words are written again. (Scored against the
    index's average length, rounded, ten short errors of a commit moved it across a line, and
    every shard was written again.)"""
    first, _ = tree(FIRST)
    longer, _ = tree({**FIRST, "python/sglang/srt/e.py": """
        def tune(block):
            raise ValueError(
                f"the fused attention kernel cannot tile block {block} over the paged kv cache "
                "with this head dimension, page size, dtype and tensor parallel layout; pick another"
            )
    """})
    before, after = postings_of(search_files(first, REPO)), postings_of(search_files(longer, REPO))
    assert len(after) > len(before)
    assert {key: after[key] for key in before} == before


def test_files_the_site_holds_as_encoded_are_not_encoded_again(incremental_only) -> None:
    """A rebuild's index encodes again only the shards an error changed in, and those the
    output folder does not hold with the bytes they had (`holds`, by path and digest): the
    state keeps digests, not files. The rest come as None, the site's own file."""
    from generator.publish import file_digest

    first, first_blobs = tree(FIRST)
    second, second_blobs = tree(SECOND)
    state = IndexState(REPO)
    site = dict(state.update(first, first_blobs))
    state = pickle.loads(state_bytes(state))
    incremental_only(state)

    def holds(path, digest):
        return path in site and file_digest(site[path]) == digest

    del site["search/e/0.json"]
    files = state.update(second, second_blobs, holds=holds)
    expected = search_files(second, REPO)
    assert files.keys() == expected.keys()
    encoded = {path for path, data in files.items() if data is not None}
    assert all(files[path] == expected[path] for path in encoded)
    assert all(site[path] == expected[path] for path in files.keys() - encoded)
    # The shard the site lost, the manifest and the classes, and the few an error changed in.
    assert {"search/e/0.json", "search/manifest.json", "search/classes.json"} < encoded
    assert len(encoded) < len(files) / 4


def test_unchanged_blobs_keep_their_errors_untouched(incremental_only) -> None:
    """An error is made from its sites alone: with every blob the same, nothing is indexed
    again, and the files are those of the last update."""
    first, first_blobs = tree(FIRST)
    state = IndexState(REPO)
    files = state.update(first, first_blobs)
    incremental_only(state)
    put = []
    state._put = lambda entries, documents, touched: put.extend(entries)
    assert state.update(first, first_blobs) == files
    assert put == []


@pytest.mark.real
def test_update_on_real_sglang_matches_from_scratch(sglang) -> None:
    """SGLang's own errors: ten files' errors taken out (their files deleted), then put back."""
    entries = group_sites(sglang.sites, sglang.upstream.repo)
    blobs = {file.path: file.blob_sha for file in sglang.files}
    paths = sorted({site.path for entry in entries for site in entry.sites})
    gone = set(paths[:: len(paths) // 10][:10])
    fewer = group_sites(tuple(site for site in sglang.sites if site.path not in gone), sglang.upstream.repo)
    assert len(entries) - len(fewer) > 20
    state = IndexState(REPO)
    full = state.update(entries, blobs)
    assert full == search_files(entries, REPO)
    # Ten files of 4,700 go and come back: nothing is made again, however many times.
    state._remake = None
    for _ in range(3):
        assert state.update(fewer, {path: sha for path, sha in blobs.items() if path not in gone}) == search_files(fewer, REPO)
        assert state.update(entries, blobs) == full


KV_TRANSFER = {
    "python/sglang/srt/disaggregation/conn.py": """
        class KVTransferError(Exception):
            def __str__(self):
                return f"KVTransferError(bootstrap_room={self.bootstrap_room}): {self.failure_reason}"

        class Sender:
            def failure_exception(self):
                raise KVTransferError(self.bootstrap_room, self.reason or "unknown")

        class Receiver:
            def failure_exception(self):
                raise KVTransferError(self.bootstrap_room, self.reason or "unknown")
    """,
}
DECODE = "Decode transfer failed for request rank={rank} decode_req.req.rid={rid} with exception KVTransferError(bootstrap_room={room}): {reason}"
PREFILL = "Prefill transfer failed for request rank={rank} req.rid={rid} with exception KVTransferError(bootstrap_room={room}): {reason}"


def test_printed_forms_find_errors_raised_without_a_message():
    """Two raises of one class with no message text: only the curated printed forms (the log
    lines upstream wraps each in) tell which one a pasted log line is, on a site built from
    scratch and on one kept between builds as the forms change."""
    entries, blobs = tree(KV_TRANSFER)
    by_function = {entry.sites[0].function: entry.id for entry in entries}
    printed = {by_function["Receiver.failure_exception"]: (DECODE,), by_function["Sender.failure_exception"]: (PREFILL,)}
    paste = "[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce8' with exception KVTransferError(bootstrap_room=165): Failed due to an unknown reason"
    assert search.lookup(paste, search.SearchIndex.of_entries(entries, REPO)) == []
    found = search.lookup(paste, search.SearchIndex.of_entries(entries, REPO, (), search.Known(printed)))
    assert [candidate.id for candidate in found][:1] == [by_function["Receiver.failure_exception"]]
    assert found[0].match == "message"
    # The result's title is the raise statement: the note names the form the paste matched.
    assert found[0].note == f"matched as it is printed: {DECODE}"
    prefill = paste.replace("Decode", "Prefill").replace("decode_req.", "")
    assert search.lookup(prefill, search.SearchIndex.of_entries(entries, REPO, (), search.Known(printed)))[0].id == by_function["Sender.failure_exception"]
    # Kept between builds: the forms added, changed and taken away, with no blob changed.
    state = IndexState(REPO)
    state.update(entries, blobs)
    for forms in (printed, {by_function["Receiver.failure_exception"]: (PREFILL, DECODE)}, {}):
        state = pickle.loads(state_bytes(state))
        assert state.update(entries, blobs, (), search.Known(forms)) == search_files(entries, REPO, (), search.Known(forms))
