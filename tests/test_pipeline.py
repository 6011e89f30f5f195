"""Extraction over a tree: the per-blob cache, skipped files, and `errorkb extract`."""

from __future__ import annotations

import json
import sqlite3

import pytest

from generator import pipeline
from generator.cache import SiteCache
from generator.cli import main
from generator.config import Config
from generator.upstream import open_source
from tests.conftest import make_repo

FILES = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/server_args.py": """\
        class ServerArgs:
            def check(self):
                if self.tp_size < 1:
                    raise ValueError(f"tp_size must be positive, got {self.tp_size}")
                assert self.dp_size
        """,
    "python/sglang/srt/copy.py": """\
        def check(tp_size):
            raise ValueError(f"tp_size must be positive, got {tp_size}")
        """,
    "python/sglang/broken.py": "def f(:\n",
}


@pytest.fixture
def repo(tmp_path):
    shas = make_repo(tmp_path / "up", [FILES, {"python/sglang/srt/new.py": "import warnings\nwarnings.warn('new')\n"}])
    return tmp_path / "up", shas


def extract(repo_path, revision, cache):
    return pipeline.extract_upstream(open_source(f"git:{repo_path}@{revision}", Config(), cache), cache, jobs=1)


def test_skipped_file_is_reported_and_the_run_goes_on(repo, tmp_path):
    path, (first, _) = repo
    extraction = extract(path, first, tmp_path / "cache")
    assert [str(p) for p in extraction.problems] == ["python/sglang/broken.py: syntax error at line 1: invalid syntax"]
    assert [(s.path, s.line) for s in extraction.sites] == [
        ("python/sglang/srt/copy.py", 2),
        ("python/sglang/srt/server_args.py", 4),
        ("python/sglang/srt/server_args.py", 5),
    ]


def test_warm_run_parses_nothing_and_a_commit_parses_only_what_changed(repo, tmp_path, monkeypatch):
    path, (first, second) = repo
    cold = extract(path, first, tmp_path / "cache")
    parsed = []
    real = pipeline._extract_blob
    monkeypatch.setattr(pipeline, "_extract_blob", lambda p, data: parsed.append(p) or real(p, data))
    assert extract(path, first, tmp_path / "cache").sites == cold.sites
    assert parsed == []
    extract(path, second, tmp_path / "cache")
    assert parsed == ["python/sglang/srt/new.py"]


def test_corrupt_cache_entry_is_treated_as_missing(repo, tmp_path):
    path, (first, _) = repo
    cold = extract(path, first, tmp_path / "cache")
    (store,) = (tmp_path / "cache" / "sites").glob("*.sqlite")
    with sqlite3.connect(store) as db:
        assert db.execute("UPDATE entries SET value = ?", ('{"sites": [["raise", trunc',)).rowcount > 1
    assert extract(path, first, tmp_path / "cache").sites == cold.sites
    # A store that is no database at all (cut short, overwritten) is made anew.
    for path_in_store in (tmp_path / "cache" / "sites").iterdir():
        path_in_store.write_bytes(b"\x80\x04corrupt\xff" * 100)
    assert extract(path, first, tmp_path / "cache").sites == cold.sites
    assert all(SiteCache(tmp_path / "cache", pipeline.extractor_version()).holds(file.blob_sha) for file in cold.files)


def test_identical_blobs_at_two_paths_keep_their_own_paths(tmp_path):
    text = "def f(x):\n    assert x\n"
    make_repo(tmp_path / "up", [{"python/sglang/a.py": text, "python/sglang/b.py": text}])
    sites = extract(tmp_path / "up", "main", tmp_path / "cache").sites
    assert [s.path for s in sites] == ["python/sglang/a.py", "python/sglang/b.py"]
    assert sites[0].id("r") != sites[1].id("r")


def test_parallel_workers_give_the_same_result(tmp_path):
    files = {f"python/sglang/m{i}.py": f"def f{i}(x):\n    raise ValueError(f'bad {{x}} in {i}')\n" for i in range(20)}
    make_repo(tmp_path / "up", [files])
    source = open_source(f"git:{tmp_path / 'up'}@main", Config(), tmp_path)
    serial = pipeline.extract_upstream(source, tmp_path / "one", jobs=1)
    parallel = pipeline.extract_upstream(source, tmp_path / "two", jobs=2)
    assert parallel.sites == serial.sites and len(serial.sites) == 20


def test_a_commit_parsed_in_a_worker_while_the_cache_is_read_gives_the_same_sites(tmp_path):
    """With two jobs, the files the cache lacks are parsed in a worker while this process reads
    the others' entries; an entry there but unreadable is parsed after them."""
    files = {f"python/sglang/m{i}.py": f"def f{i}(x):\n    raise ValueError(f'bad {{x}} in {i}')\n" for i in range(30)}
    edited = {**files, **{f"python/sglang/m{i}.py": f"def g{i}(x):\n    assert x, 'now {i}'\n" for i in range(0, 30, 3)}}
    first, second = make_repo(tmp_path / "up", [files, edited])
    cache = tmp_path / "cache"
    pipeline.extract_upstream(open_source(f"git:{tmp_path / 'up'}@{first}", Config(), cache), cache, jobs=2)
    (store,) = (cache / "sites").glob("*.sqlite")
    with sqlite3.connect(store) as db:
        db.execute("UPDATE entries SET value = '{' WHERE key = (SELECT min(key) FROM entries)")
    warm = pipeline.extract_upstream(open_source(f"git:{tmp_path / 'up'}@{second}", Config(), cache), cache, jobs=2)
    fresh = pipeline.extract_upstream(open_source(f"git:{tmp_path / 'up'}@{second}", Config(), tmp_path / "fresh"), tmp_path / "fresh", jobs=1)
    assert warm.sites == fresh.sites and len(warm.sites) == 30
    assert sum(site.kind == "assert" for site in warm.sites) == 10


def test_extract_command_prints_spec_fields_and_exit_3_when_something_was_skipped(repo, tmp_path, capsys):
    path, (first, _) = repo
    code = main(["extract", "--source", f"git:{path}@{first}", "--cache-dir", str(tmp_path / "cache")])
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 3
    assert rows[1] == {
        "id": rows[0]["id"],
        "kind": "raise",
        "exception": "ValueError",
        "message": "tp_size must be positive, got {self.tp_size}",
        "path": "python/sglang/srt/server_args.py",
        "line": 4,
        "end_line": 4,
        "function": "ServerArgs.check",
        "conditions": ["self.tp_size < 1"],
        "checks_passed": [],
        "context": [],
        "assert_condition": None,
        "snippet": [1, 5],
        "url": f"https://github.com/sgl-project/sglang/blob/{first}/python/sglang/srt/server_args.py#L4",
        "scope": "product",
    }
    assert rows[2]["message"] is None and rows[2]["assert_condition"] == "self.dp_size"
    assert err.splitlines() == [
        "errorkb: skipped python/sglang/broken.py: syntax error at line 1: invalid syntax",
        f"extract: 4 files, 3 sites (2 raise, 1 assert, 0 warning), 1 skipped; git:{path}@{first} at {first}",
    ]


def test_extract_command_bad_source_is_one_line_and_exit_1(tmp_path, capsys):
    assert main(["extract", "--source", "git:/no/such/repo@main", "--cache-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "errorkb: git:/no/such/repo: not a git repository\n"


RAISING = {
    "python/sglang/__init__.py": "",
    # No `python/sglang/srt/__init__.py`: a namespace package, as upstream's is.
    "python/sglang/srt/utils/__init__.py": "from sglang.srt.utils.common import *\n",
    "python/sglang/srt/utils/common.py": """\
        def raise_error_or_warn(obj, strict, counter_name, message):
            if strict:
                raise ValueError(message)
        """,
    "python/sglang/srt/checker.py": """\
        from sglang.srt.utils import raise_error_or_warn
        from .utils import common

        class Checker:
            def _report_leak(self, pool_name, token_msg):
                msg = f"{pool_name} memory leak detected! {token_msg}"
                raise_error_or_warn(self, True, "count", msg)

            def check(self, n):
                common.raise_error_or_warn(self, True, "count", f"{n} pages leaked")
        """,
}


def _messages(extraction):
    return sorted((s.path.rsplit("/", 1)[-1], s.line, s.exception, s.message) for s in extraction.sites)


def test_calls_to_a_raiser_of_another_file_are_sites_through_imports_and_re_exports(tmp_path):
    make_repo(tmp_path / "up", [RAISING])
    extraction = extract(tmp_path / "up", "main", tmp_path / "cache")
    assert _messages(extraction) == [
        ("checker.py", 7, "ValueError", "{pool_name} memory leak detected! {token_msg}"),
        ("checker.py", 10, "ValueError", "{n} pages leaked"),
        ("common.py", 3, "ValueError", None),
    ]
    call = next(s for s in extraction.sites if s.line == 7)
    assert call.function == "Checker._report_leak" and call.legacy_key is None
    # The caller's sites were made from its blob and the raisers it sees.
    made = extraction.made_from()
    assert made["python/sglang/srt/checker.py"].startswith(next(f.blob_sha for f in extraction.files if f.path.endswith("checker.py")) + "-")
    assert made["python/sglang/__init__.py"] == next(f.blob_sha for f in extraction.files if f.path == "python/sglang/__init__.py")


def test_a_raiser_that_changes_changes_its_callers_sites_though_their_blobs_do_not(tmp_path):
    """The cache never serves a caller's call sites made with a raiser as it was: whatever ran
    before, the sites equal those of a cold run."""
    changed = {
        "python/sglang/srt/utils/common.py": """\
            def raise_error_or_warn(obj, strict, counter_name, message):
                raise RuntimeError(counter_name)
            """
    }
    gone = {"python/sglang/srt/utils/common.py": "def raise_error_or_warn(obj, strict, counter_name, message):\n    pass\n"}
    shas = make_repo(tmp_path / "up", [RAISING, changed, gone, RAISING])
    cache = tmp_path / "cache"
    runs = [extract(tmp_path / "up", sha, cache) for sha in shas]
    cold = [extract(tmp_path / "up", sha, tmp_path / f"cold{number}") for number, sha in enumerate(shas)]
    assert [_messages(run) for run in runs] == [_messages(run) for run in cold]
    checker = "python/sglang/srt/checker.py"
    assert [m for m in _messages(runs[1]) if m[0] == "checker.py"] == [
        ("checker.py", 7, "RuntimeError", "count"),
        ("checker.py", 10, "RuntimeError", "count"),
    ]
    assert [m for m in _messages(runs[2]) if m[0] == "checker.py"] == []
    made = [run.made_from()[checker] for run in runs]
    assert made[0] != made[1] and made[0] == made[3] and made[2] == next(f.blob_sha for f in runs[2].files if f.path == checker)
