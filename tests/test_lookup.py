"""`errorkb lookup`: a built site's index or a source, text or stdin, JSON or text out."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path

import pytest

from generator.cli import main
from generator.extract import extract_source
from generator.model import group_sites
from generator.search import INDEX_VERSION, search_files

from tests import conftest

REPO = "sgl-project/sglang"
SOURCE = """
def check(kv_cache_dtype, found):
    if kv_cache_dtype not in CHOICES:
        raise ValueError(f"HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    assert found is not None
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    sites = extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/arg_groups/hisparse_hook.py")
    entries = group_sites(tuple(sites), REPO)
    for path, data in search_files(entries, REPO).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    return tmp_path


PASTED = "ValueError: HiSparse requires one of ('bfloat16',) KV cache dtypes, but got --kv-cache-dtype=fp8_e5m2."


def test_lookup_json_from_a_site(site: Path, capsys) -> None:
    assert main(["lookup", "--site", str(site), "--json", PASTED]) == 0
    (best, *_) = json.loads(capsys.readouterr().out)
    assert best["message"] == "HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}."
    assert len(best["id"]) == 16 and best["score"] > 2
    assert best["page"] == f"errors/{best['id']}/" and best["match"] == "message"


def test_lookup_text_names_title_id_and_page(site: Path, capsys) -> None:
    assert main(["lookup", "--site", str(site), "--limit", "1", PASTED]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("  exact match: HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    page = lines[1].split(" · ")[-1]
    assert re.fullmatch("errors/[0-9a-f]{16}/", page)
    assert lines[1].strip() == f"ValueError · hisparse_hook.py in check · {page}"


def test_lookup_says_a_paste_is_a_message_beginning(site: Path, capsys) -> None:
    cut = "ValueError: HiSparse requires one of ('bfloat16',) KV cache dty"
    assert main(["lookup", "--site", str(site), "--json", cut]) == 0
    (best, *_) = json.loads(capsys.readouterr().out)
    assert (best["match"], best["message"]) == ("beginning", "HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    assert main(["lookup", "--site", str(site), "--limit", "1", cut]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("  matches the beginning of: HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")


def test_lookup_reads_a_traceback_on_stdin(site: Path, capsys, monkeypatch) -> None:
    traceback = """\
    Traceback (most recent call last):
      File "/venv/lib/python3.12/site-packages/sglang/srt/arg_groups/hisparse_hook.py", line 5, in check
        assert found is not None
    AssertionError
    """
    monkeypatch.setattr("sys.stdin", io.StringIO(textwrap.dedent(traceback)))
    assert main(["lookup", "--site", str(site), "--json"]) == 0
    (best, *_) = json.loads(capsys.readouterr().out)
    assert best["message"] is None and best["title"] == "assert found is not None"


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        pytest.param(["completely unrelated words"], "errorkb: lookup: no error matches this text", id="nothing-matches"),
        pytest.param(["   "], "errorkb: lookup: nothing to look up (give TEXT, or pipe it on stdin)", id="empty"),
        pytest.param(["--limit", "0", "x"], "errorkb: lookup: --limit must be at least 1, got 0", id="bad-limit"),
    ],
)
def test_lookup_fails_with_one_line(site: Path, capsys, argv: list[str], reason: str) -> None:
    assert main(["lookup", "--site", str(site), *argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == reason


def test_lookup_json_prints_an_empty_list_when_nothing_matches(site: Path, capsys) -> None:
    assert main(["lookup", "--site", str(site), "--json", "completely unrelated words"]) == 1
    assert json.loads(capsys.readouterr().out) == []


def test_lookup_in_a_folder_that_is_not_a_site(tmp_path: Path, capsys) -> None:
    assert main(["lookup", "--site", str(tmp_path), "x"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"errorkb: {tmp_path}: no search/manifest.json; is it a site built by errorkb build?"
    )


def test_lookup_with_a_corrupt_index(site: Path, capsys) -> None:
    for path in (site / "search" / "t").iterdir():
        path.write_text("{not json")
    assert main(["lookup", "--site", str(site), PASTED]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"errorkb: {site}/search/t/") and "unreadable search index" in line


def test_lookup_with_an_index_of_another_version(site: Path, capsys) -> None:
    manifest = site / "search" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"version":', '"version":1000,"was":'))
    assert main(["lookup", "--site", str(site), PASTED]) == 1
    assert capsys.readouterr().err.strip() == (
        f"errorkb: {site}/search/manifest.json: not a version {INDEX_VERSION} search index; rebuild the site"
    )


@pytest.mark.real
def test_lookup_from_the_source(capsys) -> None:
    argv = ["lookup", "--source", f"pypi:sglang=={conftest.DEFAULT_VERSION}", "--cache-dir", str(conftest.test_cache_dir()), "--json"]
    assert main([*argv, PASTED]) == 0
    (best, *_) = json.loads(capsys.readouterr().out)
    assert best["message"].startswith("HiSparse requires one of {HISPARSE_KV_CACHE_DTYPES} KV cache dtypes")
