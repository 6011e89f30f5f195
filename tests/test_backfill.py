"""`errorkb backfill` on toy releases served from local files: the ledger it leaves equals the
one successive builds leave, an interrupted run continues to the same result, and a release that
cannot be read is reported and skipped."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from generator import backfill as backfill_module
from generator.backfill import backfill, join_ledgers
from generator.build import build, inputs_of
from generator.cli import main
from generator.config import Config
from generator.errors import DownloadError
from generator.history import load_changes, load_ledger
from generator.model import Change, LedgerRecord, Upstream
from generator.upstream import release_versions, version_key

SERVER_ARGS = "sglang/srt/server_args.py"
# A raiser, and a file that calls it and never changes: when the raiser raises another class,
# the caller's call site is another error though the caller's blob is the same.
RAISER = {
    "sglang/srt/utils/fail.py": """\
        def fail(message):
            raise ValueError(message)
        """,
    "sglang/srt/checks.py": """\
        from sglang.srt.utils.fail import fail

        def check_config(config):
            if config is None:
                fail("checks need a config")
        """,
}
RAISER_LATER = {**RAISER, "sglang/srt/utils/fail.py": RAISER["sglang/srt/utils/fail.py"].replace("ValueError", "RuntimeError")}

# Four releases: a wheel, an sdist only, a binary wheel only, and a wheel again. Between them a
# message is reworded, one moves to another file, one is retired and one added.
RELEASES = {
    "1.0": {
        SERVER_ARGS: """\
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
        **RAISER,
    },
    "1.1rc0": {
        SERVER_ARGS: """\
            class ServerArgs:
                def _handle_kv4_compatibility(self):
                    if not is_cuda():
                        raise RuntimeError("KV4 is not tested on non-CUDA platforms.")

                def check_tp(self):
                    if self.tp_size < 1:
                        raise ValueError(f"KV rows must match loc_2d size: {self.tp_size}")
            """,
        **RAISER,
    },
    "1.1": {
        SERVER_ARGS: """\
            class ServerArgs:
                def check_tp(self):
                    if self.tp_size < 1:
                        raise ValueError(f"KV rows must match loc_2d size: {self.tp_size}")
            """,
        "sglang/srt/arg_groups/kv_cache_hook.py": """\
            def handle_kv4_compatibility(cfg):
                if get_platform().is_cuda:
                    return
                raise RuntimeError("KV4 is not tested on non-CUDA platforms.")
            """,
        **RAISER_LATER,
    },
    "1.1.post1": {
        SERVER_ARGS: """\
            class ServerArgs:
                def check_tp(self):
                    if self.tp_size < 1:
                        raise ValueError(f"KV rows must match loc_2d size: {self.tp_size}")

                def check_dp(self):
                    assert self.dp_size >= 1, "dp_size must be positive"
            """,
        "sglang/srt/arg_groups/kv_cache_hook.py": """\
            def handle_kv4_compatibility(cfg):
                if get_platform().is_cuda:
                    return
                raise RuntimeError("KV4 is not tested on non-CUDA platforms.")
            """,
        **RAISER_LATER,
    },
}
KINDS = {"1.0": "wheel", "1.1rc0": "sdist", "1.1": "binary", "1.1.post1": "wheel"}
VERSIONS = list(RELEASES)
DAYS = ["1.0", "1.0.post1", "1.0.post2", "1.1rc0", "1.1", "1.1.post1"]
# An index nothing answers at: every listing and archive comes from local files.
CONFIG = Config(index_url="http://127.0.0.1:9/simple")


def _archive(kind: str, version: str, files: dict[str, str]) -> tuple[str, bytes]:
    files = {"sglang/__init__.py": "", **{path: textwrap.dedent(text) for path, text in files.items()}}
    buffer = io.BytesIO()
    if kind == "sdist":
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for path, text in sorted(files.items()):
                data = text.encode()
                info = tarfile.TarInfo(f"sglang-{version}/{path}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return f"sglang-{version}.tar.gz", buffer.getvalue()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in sorted(files.items()):
            archive.writestr(path, text)
    tag = "cp311-cp311-manylinux_2_34_x86_64" if kind == "binary" else "py3-none-any"
    return f"sglang-{version}-{tag}.whl", buffer.getvalue()


def publish(root: Path, releases: dict[str, dict[str, str] | tuple[str, bytes]], cache: Path) -> Path:
    """The releases as archives under `root/index`, listed in `cache` as the package index would
    list them (each on its own day: `DAYS`), so that nothing is asked of the network; returns the cache."""
    # Any request that did go out would fail: tests never use the network.
    entries = []
    for version, files in releases.items():
        filename, data = files if isinstance(files, tuple) else _archive(KINDS.get(version, "wheel"), version, files)
        archive = root / "index" / filename
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(data)
        entries.append({
            "filename": filename, "url": archive.as_uri(), "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
            "upload-time": f"2026-01-{DAYS.index(version) + 1:02d}T12:00:00.000000Z", "yanked": False,
        })
    listing = cache / "pypi" / "sglang-index.json"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": "sglang", "versions": list(releases), "files": entries}))
    # What `release_versions` records of each release, for builds that run before any backfill.
    release_versions("sglang", CONFIG, cache)
    return cache


def history_bytes(content: Path) -> dict[str, bytes]:
    return {str(p.relative_to(content)): p.read_bytes() for p in sorted(content.rglob("*")) if p.is_file()}


def run_backfill(content: Path, cache: Path, start: str = "1.0", end: str = "1.1.post1", report=lambda step: None):
    return backfill(CONFIG, content, cache, start, end, "sglang", jobs=1, report=report)


def successive_builds(tmp_path: Path, cache: Path, versions: list[str]) -> Path:
    content = tmp_path / "built-content"
    for version in versions:
        build(CONFIG, inputs_of(CONFIG, f"pypi:sglang=={version}", tmp_path / "site", content, cache), jobs=1)
    return content


@pytest.fixture
def index(tmp_path) -> Path:
    return publish(tmp_path, RELEASES, tmp_path / "cache")


def test_versions_sort_as_pep_440_says():
    versions = ["0.5.0", "0.5.0rc1", "0.5.0.post1", "0.4.10", "0.4.9.post3", "0.5.0rc0", "0.5.10rc0", "0.5.9", "1.0.dev1", "1.0a1"]
    assert sorted(versions, key=version_key) == [
        "0.4.9.post3", "0.4.10", "0.5.0rc0", "0.5.0rc1", "0.5.0", "0.5.0.post1", "0.5.9", "0.5.10rc0", "1.0.dev1", "1.0a1",
    ]


def test_listing_comes_from_the_cache_when_it_has_the_release(index):
    # The cached listing has 1.1.post1: no request goes out (the index URL would fail).
    assert release_versions("sglang", CONFIG, index, wanted="1.1.post1") == ("1.0", "1.1rc0", "1.1", "1.1.post1")
    with pytest.raises(DownloadError, match="cannot read the index"):
        release_versions("sglang", CONFIG, index, wanted="2.0")


def test_backfill_leaves_the_ledger_successive_builds_leave(tmp_path, index):
    content = tmp_path / "content"
    steps = []
    result = run_backfill(content, index, report=steps.append)
    built = successive_builds(tmp_path, index, VERSIONS)
    assert history_bytes(content) == history_bytes(built)
    assert [(s.version, s.revision, s.files, s.skipped) for s in steps] == [
        ("1.0", "v1.0", 4, ""), ("1.1rc0", "v1.1rc0", 4, ""), ("1.1", "v1.1", 5, ""), ("1.1.post1", "v1.1.post1", 5, ""),
    ]
    # At 1.1 the raiser raises another class: its own site and the call site of the unchanged
    # file are new errors, the old ones retired.
    assert [dict(s.changes) for s in steps] == [{}, {"reworded": 1, "retired": 1}, {"added": 2, "moved": 1, "retired": 2}, {"added": 1}]
    # Each blob is parsed once: 1.1.post1 only has a new server_args.py.
    assert [s.parsed for s in steps] == [4, 1, 3, 1]
    assert result.resumed == 0


def test_backfill_keeps_what_the_current_ledger_holds(tmp_path, index):
    # The content folder was built at the last release only, and holds an id the backfill
    # never sees (an id of earlier id rules, moved to the KV4 error).
    content = successive_builds(tmp_path, index, ["1.1.post1"])
    ledger = load_ledger(content)
    kv4 = next(r for r in ledger.values() if r.message and r.message.startswith("KV4"))
    old = LedgerRecord("0123456789abcdef", "moved", "v1.1.post1", "v1.1.post1", "raise", "RuntimeError", "KV4 old", "p.py", 1, "f",
                       moved_to=kv4.id, retired_in="v1.1.post1")
    shard = content / "ledger" / "0.jsonl"
    moved = {"id": old.id, "status": "moved", "first_seen": "v1.1.post1", "kind": "raise", "exception": "RuntimeError",
             "message": "KV4 old", "path": "p.py", "line": 1, "function": "f", "moved_to": kv4.id, "retired_in": "v1.1.post1",
             "last_seen": "v1.1.post1"}
    shard.write_text((shard.read_text() if shard.exists() else "") + json.dumps(moved, sort_keys=True) + "\n")
    run_backfill(content, index)
    joined = load_ledger(content)
    alone = tmp_path / "alone"
    run_backfill(alone, publish(tmp_path / "again", RELEASES, tmp_path / "cache2"))
    backfilled = load_ledger(alone)
    assert joined.keys() == backfilled.keys() | {old.id}
    assert joined[old.id].moved_to == kv4.id
    assert {k: v for k, v in joined.items() if k != old.id} == backfilled
    # Running it again changes nothing.
    before = history_bytes(content)
    run_backfill(content, index)
    assert history_bytes(content) == before


def test_an_interrupted_backfill_continues_to_the_same_ledger(tmp_path, index, monkeypatch):
    fold = backfill_module.fold_release
    folded = []

    def interrupted(version, *args):
        if version == "1.1" and not folded.count("stop"):
            folded.append("stop")
            raise KeyboardInterrupt
        folded.append(version)
        return fold(version, *args)

    monkeypatch.setattr(backfill_module, "fold_release", interrupted)
    content = tmp_path / "content"
    with pytest.raises(KeyboardInterrupt):
        run_backfill(content, index)
    assert not content.exists()  # nothing is written into content/ until the end
    result = run_backfill(content, index)
    assert folded == ["1.0", "1.1rc0", "stop", "1.1", "1.1.post1"]
    assert result.resumed == 2
    assert [s.version for s in result.steps] == VERSIONS
    uninterrupted = tmp_path / "uninterrupted"
    monkeypatch.setattr(backfill_module, "fold_release", fold)
    run_backfill(uninterrupted, publish(tmp_path / "again", RELEASES, tmp_path / "cache2"))
    assert history_bytes(content) == history_bytes(uninterrupted)


def test_an_unreadable_release_is_reported_and_skipped(tmp_path, capsys):
    releases = {
        "1.0": RELEASES["1.0"],
        "1.0.post1": ("sglang-1.0.post1-py3-none-any.whl", b"not a zip archive"),
        "1.0.post2": ("sglang-1.0.post2-py3-none-any.whl", _wheel_without_package()),
        "1.1": RELEASES["1.1"],
    }
    cache = publish(tmp_path, releases, tmp_path / "cache")
    content = tmp_path / "content"
    settings = tmp_path / "errorkb.toml"
    settings.write_text(f'[errorkb]\nsource = "pypi:sglang==1.1"\nindex_url = "{CONFIG.index_url}"\n')
    code = main(["--config", str(settings), "backfill", "--from", "1.0", "--content", str(content), "--cache-dir", str(cache), "--jobs", "1"])
    out, err = capsys.readouterr()
    assert code == 3
    skipped = [line for line in err.splitlines() if line.startswith("errorkb: skipped")]
    assert len(skipped) == 2
    assert skipped[0].startswith("errorkb: skipped sglang 1.0.post1: ") and "unreadable archive" in skipped[0]
    assert skipped[1].startswith("errorkb: skipped sglang 1.0.post2: ") and "no sglang/__init__.py" in skipped[1]
    assert [line.split()[0] for line in out.splitlines()] == ["1.0", "1.1", "total:"]
    assert "2 releases read (1.0 to 1.1), 2 skipped" in out
    # The ledger is the one of the two releases that could be read.
    expected = tmp_path / "expected"
    run_backfill(expected, publish(tmp_path / "again", {v: RELEASES[v] for v in ("1.0", "1.1")}, tmp_path / "cache2"), end="1.1")
    assert load_ledger(content) == load_ledger(expected)
    assert [c.id for c in load_changes(content)] == [c.id for c in load_changes(expected)]


def _wheel_without_package() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("other/__init__.py", "raise ValueError('x')\n")
    return buffer.getvalue()


def test_a_failed_download_stops_the_run_and_the_next_run_continues(tmp_path, index):
    listing = index / "pypi" / "sglang-index.json"
    good = listing.read_text()
    broken = json.loads(good)
    broken["files"][2]["url"] = (tmp_path / "index" / "missing.whl").as_uri()
    listing.write_text(json.dumps(broken))
    (index / "pypi" / "sglang-1.1.json").unlink()  # recorded again from the broken listing
    content = tmp_path / "content"
    with pytest.raises(DownloadError, match="download failed"):
        run_backfill(content, index)
    # The index lists the archive where it is again.
    listing.write_text(good)
    (index / "pypi" / "sglang-1.1.json").unlink()
    result = run_backfill(content, index)
    assert result.resumed == 2
    assert history_bytes(content) == history_bytes(successive_builds(tmp_path, index, VERSIONS))


def test_join_retires_what_a_later_ledger_never_saw():
    def record(error_id, status="active", first="v1", **fields):
        return LedgerRecord(error_id, status, first, "v2", "raise", "ValueError", error_id, "p.py", 1, "f", code="c", pinned=first, **fields)

    backfilled = {"a": record("a"), "b": record("b")}
    current = {"a": record("a", first="sha"), "c": record("c", first="sha")}
    end = Upstream("r", "pypi:sglang==2", "v2", "2026-01-02T00:00:00Z")
    built = Upstream("r", "git:x@sha", "sha", "2026-01-05T00:00:00Z")
    joined = join_ledgers(backfilled, (), current, (), end, built)
    assert (joined.records["a"].first_seen, joined.records["a"].pinned) == ("v1", "v1")
    assert (joined.records["b"].status, joined.records["b"].retired_in) == ("retired", "sha")
    assert joined.records["c"] == current["c"]
    assert joined.changes == (Change("b", "sha", "2026-01-05T00:00:00Z", "retired", "b"),)


def test_join_takes_the_backfills_changes_at_a_release_it_folded():
    def record(error_id, status="active", first="v1"):
        return LedgerRecord(error_id, status, first, "v2", "raise", "ValueError", error_id, "p.py", 1, "f", code="c", pinned=first)

    backfilled = {"a": record("a"), "b": record("b", first="v2")}
    current = {"a": record("a", first="v2"), "b": record("b", first="v2"), "old": record("old", "moved", first="v2")}
    end = built = Upstream("r", "pypi:sglang==2", "v2", "2026-01-02T00:00:00Z")
    mine = (Change("b", "v2", end.date, "added", "b"),)
    # The current ledger was first built at v2 by older code, then again: `a` looked added, `old` rekeyed.
    theirs = (Change("a", "v2", end.date, "added", "a"), Change("old", "v2", end.date, "rekeyed", None, "a"), Change("b", "v2", end.date, "added", "b"))
    joined = join_ledgers(backfilled, mine, current, theirs, end, built, folded={"v1", "v2"})
    assert [(c.id, c.change) for c in joined.changes] == [("old", "rekeyed"), ("b", "added")]
    assert joined.records["old"] == current["old"]


def test_workers_reading_ahead_leave_what_one_process_leaves(tmp_path, index):
    """With worker processes reading the next releases and parsing their new blobs while one
    is folded, the ledger, each release's step and the blobs parsed for it are those of a run
    in one process; a release that cannot be read is skipped there too."""
    releases = {**RELEASES, "1.1rc0": ("sglang-1.1rc0-py3-none-any.whl", b"not a zip archive")}
    one, two = [], []
    backfill(CONFIG, tmp_path / "one", publish(tmp_path / "a", releases, tmp_path / "cache-a"), "1.0", "1.1.post1", "sglang", jobs=1, report=one.append)
    backfill(CONFIG, tmp_path / "two", publish(tmp_path / "b", releases, tmp_path / "cache-b"), "1.0", "1.1.post1", "sglang", jobs=2, report=two.append)
    assert history_bytes(tmp_path / "two") == history_bytes(tmp_path / "one")
    assert [s.version for s in two if s.skipped] == ["1.1rc0"] and "unreadable archive" in two[1].skipped
    assert [(s.version, s.files, s.parsed, s.errors, s.changes) for s in two] == [(s.version, s.files, s.parsed, s.errors, s.changes) for s in one]


def test_a_download_failing_ahead_stops_the_run_after_the_releases_before_it(tmp_path, index):
    """The workers read releases ahead of the one being folded: a later release's failed
    download must not stop the releases before it from being folded and kept."""
    listing = index / "pypi" / "sglang-index.json"
    good = listing.read_text()
    broken = json.loads(good)
    broken["files"][2]["url"] = (tmp_path / "index" / "missing.whl").as_uri()
    listing.write_text(json.dumps(broken))
    (index / "pypi" / "sglang-1.1.json").unlink()
    folded = []
    with pytest.raises(DownloadError, match="download failed"):
        backfill(CONFIG, tmp_path / "content", index, "1.0", "1.1.post1", "sglang", jobs=2, report=folded.append)
    assert [s.version for s in folded] == ["1.0", "1.1rc0"]
    listing.write_text(good)
    (index / "pypi" / "sglang-1.1.json").unlink()
    result = backfill(CONFIG, tmp_path / "content", index, "1.0", "1.1.post1", "sglang", jobs=2)
    assert result.resumed == 2
    assert history_bytes(tmp_path / "content") == history_bytes(successive_builds(tmp_path, index, VERSIONS))
