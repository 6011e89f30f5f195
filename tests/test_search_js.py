"""templates/static/search.js ranks as generator/search.py does: run under Node on the same
index files and the same pastes (the built-in pasted set and the real reports too), it reads
them alike and returns the same errors in the same order, matched the same way."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest

from generator.extract import extract_source
from generator.model import group_sites
from generator.search import SearchIndex, bucket, lookup, parse_paste, search_files, squash, tokens

SEARCH_JS = Path(__file__).parent.parent / "templates" / "static" / "search.js"
PASTED = Path(__file__).parent / "data" / "pasted.json"
REPORTS = Path(__file__).parent / "data" / "real_reports.json"
REPO = "sgl-project/sglang"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

DRIVER = """
const fs = require("fs");
const path = require("path");
const api = require(process.argv[2]);
const root = process.argv[3];
const request = JSON.parse(fs.readFileSync(0, "utf8"));
const index = api.openIndex((name) => Promise.resolve(JSON.parse(fs.readFileSync(path.join(root, "search", name), "utf8"))));
(async () => {
  const out = { lookups: [], pastes: [], buckets: [], squashed: [], tokens: [] };
  for (const text of request.pastes) {
    let early = null;
    out.lookups.push({ results: await api.lookup(text, index, 10, (ready) => { early = ready; }), early });
    out.pastes.push(api.parsePaste(text));
  }
  for (const key of request.keys) {
    out.buckets.push(api.bucket(key, 1024));
    out.squashed.push(api.squash(key));
    out.tokens.push(api.tokens(key));
  }
  process.stdout.write(JSON.stringify(out));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def write_site(root: Path, entries, classes=()) -> Path:
    for path, data in search_files(entries, REPO, classes).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def run_node(tmp_path: Path, site: Path, pastes: list[str], keys: list[str]) -> dict:
    driver = tmp_path / "driver.cjs"
    driver.write_text(DRIVER)
    done = subprocess.run(
        [NODE, str(driver), str(SEARCH_JS), str(site)],
        input=json.dumps({"pastes": pastes, "keys": keys}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_same_ranking(python_results, js_results, paste: str) -> None:
    assert [r["id"] for r in js_results] == [c.id for c in python_results], paste[:80]
    for mine, theirs in zip(python_results, js_results):
        assert theirs["score"] == pytest.approx(mine.score, abs=2e-6)
        assert (theirs["title"], theirs["message"], theirs["exception"], theirs["kind"], theirs["where"], theirs["match"]) == (
            mine.title,
            mine.message,
            mine.exception,
            mine.kind,
            mine.where,
            mine.match,
        )
        assert theirs["note"] == mine.note, paste[:80]


KEYS = ["hisparse", "kv", "é-ü", "sglang/srt/x.py", "  a\u00a0b\u2003c\n", "Fp8_E5M2 got 128 x2"]

SOURCE = """
def check(kv_cache_dtype, found):
    if kv_cache_dtype not in CHOICES:
        raise ValueError(f"HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    assert found is not None
    raise KeyError(f"missing layer {found}")
"""

PASTES = [
    "ValueError: HiSparse requires one of ('bfloat16',) KV cache dtypes, but got --kv-cache-dtype=fp8.",
    "KeyError: 'missing layer 3'",
    'Traceback (most recent call last):\n  File "/v/sglang/srt/x.py", line 5, in check\n    assert found is not None\n           ^^^^^\nAssertionError',
    "/v/sglang/srt/x.py:9: UserWarning: something odd\n  warnings.warn(x)",
    "[log] worker: RuntimeError: HiSparse requires one of x KV cache dtypes, but got --kv-cache-dtype=y. tail",
    "nothing to see here",
    "sglang-1  | [2026-01-01 10:00:00 TP0] KeyError: 'missing layer 3'",
    "future: <Task finished name='Task-1' coro=<f()> exception=KeyError('missing layer 4')>\nasyncio.exceptions.CancelledError",
    '{"object":"error","message":"HiSparse requires one of [\\"a\\"] KV cache dtypes, but got --kv-cache-dtype=\\u00e9x.","code":400}',
    "BadRequestError: Error code: 400 - {'message': 'HiSparse requires one of x KV cache dtypes, but got --kv-ca",
    "HiSparse requires one of",
    'Traceback (most recent call last):\n  File "/v/sglang/srt/old/y.py", line 50, in check\n    assert found is not None\nAssertionError',
    'Traceback (most recent call last):\n  File "/v/sglang/srt/x.py", line 3, in check\n    raise Val',
    "    assert found is not None\n           ^^^^^\nAssertionError",
    "AssertionError: assert found is not None",
    "ERROR worker died\nAssertionError",
    'Traceback (most recent call last):\n  File ".../srt/x.py", line 5, in check\n    assert found is not None\n  File "/usr/lib/python3.10/x.py", line 3, in f\n    x()\nAssertionError',
    'File "\u2026/x.py", line 6, in check\n    raise KeyError(f"missing layer {found}")\nKeyError: \'missing layer 2\'',
    'Traceback (most recent call last):\n  File "/v/sglang/srt/x.py", line 5, in check\n    assert other is None\nAssertionError',
    "".join(f"line {n} word{n} x\n" for n in range(3000)) + "KeyError: 'missing layer 7'",
    "",
]


def test_small_index_agrees(tmp_path: Path) -> None:
    entries = group_sites(tuple(extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/x.py")), REPO)
    site = write_site(tmp_path / "site", entries)
    out = run_node(tmp_path, site, PASTES, KEYS)
    index = SearchIndex.of_site(site)
    for paste, js in zip(PASTES, out["lookups"]):
        assert_same_ranking(lookup(paste, index), js["results"], paste)
    for paste, js in zip(PASTES, out["pastes"]):
        mine = json.loads(json.dumps(asdict(parse_paste(paste))))
        assert js == mine
    assert out["buckets"] == [bucket(key, 1024) for key in KEYS]
    assert out["squashed"] == [squash(key) for key in KEYS]
    assert out["tokens"] == [tokens(key) for key in KEYS]


def test_a_traceback_from_an_earlier_release_names_its_releases_alike(tmp_path: Path) -> None:
    """Issue #17: a traceback whose raising line is where earlier releases raised an error says
    which releases those were, in the browser as in `errorkb lookup`; a line no release raised
    it at says nothing of releases."""
    from generator.search import Known

    entries = group_sites(tuple(extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/x.py")), REPO)
    [assert_id] = [e.id for e in entries if e.kind == "assert"]
    known = Known(places={assert_id: (("python/sglang/srt/old/y.py", "check", 50, "0.4.6 to 0.4.7"), ("python/sglang/srt/x.py", "check", 9, "0.4.8"))})
    site = tmp_path / "site"
    for path, data in search_files(entries, REPO, (), known).items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
    frame = 'Traceback (most recent call last):\n  File "/v/sglang/srt/{}", line {}, in check\n    assert found is not None\nAssertionError'
    pastes = [frame.format("old/y.py", 50), frame.format("x.py", 9), frame.format("old/y.py", 51)]
    out = run_node(tmp_path, site, pastes, [])
    index = SearchIndex.of_site(site)
    notes = []
    for paste, js in zip(pastes, out["lookups"]):
        mine = lookup(paste, index)
        assert_same_ranking(mine, js["results"], paste)
        assert mine[0].id == assert_id
        notes.append(mine[0].note)
    assert notes == [
        "the traceback's line is where SGLang 0.4.6 to 0.4.7 raised it",
        "the traceback's line is where SGLang 0.4.8 raised it",
        "",
    ]


def test_class_weighing_agrees(tmp_path: Path) -> None:
    from generator.extract import extract_file
    from generator.raisers import exception_classes
    from tests.test_search import CLASS_FITS, CLASSES_SOURCE

    path = "python/sglang/srt/x.py"
    classes = exception_classes({path: extract_file(CLASSES_SOURCE.encode(), path)}, [path])
    site = write_site(tmp_path / "site", group_sites(extract_source(CLASSES_SOURCE.encode(), path), REPO), classes)
    pastes = [case.values[0] for case in CLASS_FITS] + ["TypeError: no layer named x here", "KVTransferError: no layer named x here"]
    out = run_node(tmp_path, site, pastes, [])
    index = SearchIndex.of_site(site)
    for paste, js in zip(pastes, out["lookups"]):
        assert_same_ranking(lookup(paste, index), js["results"], paste)


def test_early_results_are_the_first_final_results(tmp_path: Path) -> None:
    entries = group_sites(tuple(extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/x.py")), REPO)
    site = write_site(tmp_path / "site", entries)
    (js,) = run_node(tmp_path, site, PASTES[:1], [])["lookups"]
    assert js["early"] and [r["id"] for r in js["early"]] == [r["id"] for r in js["results"][: len(js["early"])]]


@pytest.mark.real
def test_pasted_set_agrees_with_python(sglang, tmp_path: Path) -> None:
    entries = group_sites(sglang.sites, sglang.upstream.repo)
    site = write_site(tmp_path / "site", entries, sglang.classes)
    pastes = [case["paste"] for case in json.loads(PASTED.read_text(encoding="utf-8"))]
    pastes += [case["paste"] for case in json.loads(REPORTS.read_text(encoding="utf-8"))]
    out = run_node(tmp_path, site, pastes, [])
    index = SearchIndex.of_site(site)
    for paste, js in zip(pastes, out["lookups"]):
        assert_same_ranking(lookup(paste, index), js["results"], paste)
