"""The search box in a real browser: headless Chromium opens a page with the home page's
markup and `?q=`, and search.js fills the results from the site's index files."""

from __future__ import annotations

import functools
import html
import re
import shutil
import subprocess
import textwrap
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from generator.extract import extract_source
from generator.model import group_sites
from generator.search import search_files

SEARCH_JS = Path(__file__).parent.parent / "templates" / "static" / "search.js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REPO = "sgl-project/sglang"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

# The markup the home page is built with (see issue 4); the site root is one level up.
PAGE = """<!doctype html><html lang="en" data-root="../"><head><meta charset="utf-8"><title>errorkb</title>
<script src="../static/search.js" defer></script></head><body><main>
<form role="search" id="search-form" action="../"><label for="search-input">Error message or traceback</label><textarea id="search-input" name="q"></textarea><button type="submit">Search</button></form><div id="search-results" aria-live="polite"></div>
</main></body></html>"""

SOURCE = """
def check(kv_cache_dtype):
    raise ValueError(f"HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path):
    entries = group_sites(tuple(extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/x.py")), REPO)
    for path, data in search_files(entries, REPO).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    (tmp_path / "static").mkdir()
    shutil.copy(SEARCH_JS, tmp_path / "static" / "search.js")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "index.html").write_text(PAGE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/home/", entries
    server.shutdown()
    server.server_close()


def rendered(url: str) -> str:
    done = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<div id="search-results"[^>]*>(.*?)</div>', done.stdout, re.S)
    assert found, done.stdout[-2000:]
    return found.group(1)


def test_pasted_message_in_the_address_lands_on_its_page(served) -> None:
    url, entries = served
    pasted = "ValueError: HiSparse requires one of ('bfloat16',) KV cache dtypes, but got --kv-cache-dtype=fp8_e5m2."
    results = rendered(url + "?q=" + urllib.parse.quote(pasted))
    (entry,) = entries
    first = re.search(r'<a href="([^"]+)">([^<]+)</a>', results)
    assert first is not None, results
    assert first.group(1) == f"../errors/{entry.id}/"
    assert html.unescape(first.group(2)) == entry.title


def test_nothing_found_is_said(served) -> None:
    url, _ = served
    assert "No error matches this text" in rendered(url + "?q=" + urllib.parse.quote("cooking pasta at home"))


def test_each_result_says_how_it_matched(served) -> None:
    """An exact template match is labelled as such, apart from an error found by some of its
    words only."""
    url, _ = served
    exact = rendered(url + "?q=" + urllib.parse.quote("HiSparse requires one of ('bf16',) KV cache dtypes, but got --kv-cache-dtype=fp8."))
    assert re.search(r'<li><span class="search-result-how search-result-message">exact match: </span><a ', exact), exact
    similar = rendered(url + "?q=" + urllib.parse.quote("hisparse kv cache dtypes wrong"))
    assert re.search(r'<li><span class="search-result-how search-result-words">similar: </span><a ', similar), similar
