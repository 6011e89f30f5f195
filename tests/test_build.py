"""`errorkb build` end to end on small git repos: the tree, the API, determinism, incremental
writes, the lock, interruption, ledger pages and the command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from generator.build import build, inputs_of
from generator.publish import build_lock, publish
from generator.cli import main
from generator.config import Config
from generator.errors import BuildError
from generator.history import load_ledger, write_history
from generator.model import Change, LedgerRecord, error_id
from tests.conftest import make_repo

CODE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/server_args.py": '''
        def check(cfg):
            """Check the KV cache settings."""
            if cfg.kv_cache_dtype in ("nvfp4", "fp4"):
                if not is_cuda():
                    raise RuntimeError("KV4 is not tested on non-CUDA platforms.")
            if cfg.tp_size > 8:
                raise ValueError(f"--tp-size {cfg.tp_size} is too large <script>")
            assert cfg.page_size
        ''',
    "python/sglang/srt/other.py": '''
        def other(cfg):
            if cfg.kv_cache_dtype == "fp8":
                raise ValueError("fp8 KV cache needs --kv-cache-dtype support")
        ''',
}


def config() -> Config:
    return Config(repo="o/r", package="sglang", path_prefix="python/")


@pytest.fixture()
def repo(tmp_path) -> tuple[Path, list[str]]:
    root = tmp_path / "upstream"
    return root, make_repo(root, [CODE])


def run_build(tmp_path, repo, out="site", **kwargs):
    root, shas = repo
    inputs = inputs_of(config(), f"git:{root}@{shas[-1]}", tmp_path / out, tmp_path / "content", tmp_path / "cache")
    return build(config(), inputs, jobs=1, **kwargs)


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_build_writes_pages_documents_and_browse_pages(tmp_path, repo):
    result = run_build(tmp_path, repo)
    site = tmp_path / "site"
    files = tree(site)
    index = json.loads(files["api/errors/index.json"])
    assert result.errors == len(index["errors"]) == 4
    schema = json.loads(files["api/schema/error.json"])
    validator = jsonschema.Draft202012Validator(schema)
    for record in index["errors"]:
        assert f"errors/{record['id']}/index.html" in files
        document = json.loads(files[f"api/errors/{record['id']}.json"])
        validator.validate(document)
        assert document["upstream"] == {"repo": "o/r", "revision": repo[1][-1], "date": "2026-01-01T12:00:00Z"}
    kv4 = next(r for r in index["errors"] if r["message"] == "KV4 is not tested on non-CUDA platforms.")
    page = files[f"errors/{kv4['id']}/index.html"].decode()
    assert "Check the KV cache settings." in page
    assert "the platform is not CUDA" in page
    assert f"https://github.com/o/r/blob/{repo[1][-1]}/python/sglang/srt/server_args.py#L6" in page
    assert "fp8 KV cache needs --kv-cache-dtype support" in page  # related, through the shared setting
    for needed in ("index.html", "404.html", "sitemap.xml", "robots.txt", "_redirects", "modules/index.html",
                   "modules/python/sglang/srt/index.html", "exceptions/index.html", "exceptions/RuntimeError/index.html",
                   "changes/index.html", "api/changes.json", "static/style.css", "static/pygments.css"):
        assert needed in files, needed
    assert b"/api/errors/:id /api/errors/:id.json 200" in files["_redirects"]
    assert f"https://errorkb.example.org/errors/{kv4['id']}/".encode() in files["sitemap.xml"]
    home = files["index.html"].decode()
    assert ('<form role="search" id="search-form" action="./"><label for="search-input">') in home
    assert '<textarea id="search-input" name="q"></textarea><button type="submit">Search</button></form><div id="search-results" aria-live="polite"></div>' in home
    assert '<script src="static/search.js" defer></script>' in home and 'data-root=""' in home
    for path, data in files.items():
        if path.endswith(".html") and path != "404.html":
            for link in re.findall(rb'(?:href|src|action)="([^"]*)"', data):
                assert not link.startswith(b"/"), (path, link)
        if path.endswith(".json"):
            assert data.endswith(b"\n") and b"\\u00" not in data.replace(b"\\u0000", b"")


def test_two_builds_are_byte_identical_and_a_rebuild_keeps_mtimes(tmp_path, repo):
    run_build(tmp_path, repo, out="one")
    run_build(tmp_path, repo, out="two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    page = next((tmp_path / "one" / "errors").iterdir()) / "index.html"
    before = page.stat()
    os.utime(page, (1, 1))
    (tmp_path / "content").mkdir(exist_ok=True)
    (tmp_path / "content" / "notes.txt").write_text("a change of inputs forces a real rebuild\n")
    result = run_build(tmp_path, repo, out="one")
    after = page.stat()
    assert result.written == 0
    assert after.st_mtime == 1 and after.st_ino == before.st_ino
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


# Two revisions of one upstream: an error of b.py goes and another comes that shares its name
# `top_k` with an error of the unchanged a.py, so the name's count stays as it was.
TOP_K = {
    "python/sglang/__init__.py": "",
    "python/sglang/a.py": """
        def f(cfg):
            raise ValueError(f"bad top_k {cfg.top_k}")
        """,
    "python/sglang/b.py": """
        def g(cfg):
            raise ValueError(f"top_k off {cfg.top_k}")
        """,
}
TOP_K_NEXT = {"python/sglang/b.py": """
    def g(cfg):
        raise ValueError(f"other top_k {cfg.top_k}")
    """}


def test_builds_of_other_sources_sharing_one_cache_give_what_an_empty_cache_gives(tmp_path):
    """One cache folder, as every build shares `~/.cache/errorkb`: a build of one upstream,
    another's two revisions into a second folder, then a third with curated content (which
    failed with a KeyError: the related-errors state kept from the second named an id the
    third did not have); then two sources alternating into two folders. Each site must be
    byte for byte the one an empty cache gives from the same inputs."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    (a_sha,) = make_repo(a, [CODE])
    b_shas = make_repo(b, [TOP_K, TOP_K_NEXT])
    (c_sha,) = make_repo(c, [{**CODE, **TOP_K, **TOP_K_NEXT}])
    kv4 = error_id("o/r", "RuntimeError", "KV4 is not tested on non-CUDA platforms.")
    (tmp_path / "cc/errors").mkdir(parents=True)
    (tmp_path / f"cc/errors/{kv4}.yaml").write_text(
        f'id: "{kv4}"\nexception: RuntimeError\nmessage: "KV4 is not tested on non-CUDA platforms."\n'
        "explanation: A 4-bit KV cache was requested off CUDA.\nsolutions:\n  - title: Use fp8\n    body: Pass `--kv-cache-dtype fp8_e4m3`.\n"
    )
    steps = [
        (a, a_sha, "A", "ca"), (b, b_shas[0], "B", "cb"), (b, b_shas[1], "B", "cb"), (c, c_sha, "C", "cc"),
        (a, a_sha, "X", "ca"), (c, c_sha, "Y", "cc"), (c, c_sha, "X", "cc"), (a, a_sha, "Y", "ca"), (a, a_sha, "X", "ca"),
    ]
    for number, (root, sha, out, content) in enumerate(steps):
        (tmp_path / content).mkdir(exist_ok=True)
        # The build writes the ledger into the content folder: the empty-cache build gets a
        # copy of the folder as this build found it.
        fresh_content = tmp_path / f"fresh-content-{number}"
        shutil.copytree(tmp_path / content, fresh_content)
        shared = inputs_of(config(), f"git:{root}@{sha}", tmp_path / out, tmp_path / content, tmp_path / "cache")
        build(config(), shared, jobs=1)
        alone = inputs_of(config(), f"git:{root}@{sha}", tmp_path / f"fresh-{number}", fresh_content, tmp_path / f"fresh-cache-{number}")
        build(config(), alone, jobs=1)
        assert tree(tmp_path / out) == tree(tmp_path / f"fresh-{number}"), (number, out)
        assert tree(tmp_path / content) == tree(fresh_content), (number, content)


def test_pages_made_apart_come_back_only_where_the_site_differs_and_a_rebuild_restores_deleted_ones(tmp_path):
    """The browse pages, search index and shared pages are made in other processes, which send
    back as None ("the previous build's file") what the output folder already holds with the
    same bytes (`pages.as_kept`, `search.IndexState`): a file deleted from the site by hand, or
    whose bytes changed, comes back whole, and the rebuild is the site an empty cache gives."""
    from generator.pages import as_kept, site_holds
    from generator.publish import file_digest

    site = tmp_path / "site"
    site.mkdir()
    (site / "same.html").write_bytes(b"same")
    (site / "gone.html").write_bytes(b"gone")
    hashes = {name: file_digest(data) for name, data in [("same.html", b"same"), ("gone.html", b"gone"), ("other.html", b"before")]}
    (site / "gone.html").unlink()
    made = [("same.html", b"same"), ("gone.html", b"gone"), ("other.html", b"after"), ("new.html", b"new")]
    assert as_kept(lambda: made, site_holds(hashes, lambda path: (site / path).is_file())) == [
        ("same.html", None), ("gone.html", b"gone"), ("other.html", b"after"), ("new.html", b"new"),
    ]
    root = tmp_path / "up"
    shas = make_repo(root, [TOP_K, TOP_K_NEXT])
    (tmp_path / "content").mkdir()
    build(config(), inputs_of(config(), f"git:{root}@{shas[0]}", tmp_path / "out", tmp_path / "content", tmp_path / "cache"), jobs=1)
    fresh_content = tmp_path / "fresh-content"
    shutil.copytree(tmp_path / "content", fresh_content)
    for deleted in ("index.html", "search/manifest.json", "search/e/0.json", "search/t/3.json", "modules/index.html", "api/errors/index.json"):
        (tmp_path / "out" / deleted).unlink()
    build(config(), inputs_of(config(), f"git:{root}@{shas[1]}", tmp_path / "out", tmp_path / "content", tmp_path / "cache"), jobs=1)
    build(config(), inputs_of(config(), f"git:{root}@{shas[1]}", tmp_path / "fresh", fresh_content, tmp_path / "fresh-cache"), jobs=1)
    assert tree(tmp_path / "out") == tree(tmp_path / "fresh")


def test_an_error_only_sglangs_tests_raise_says_so_in_its_page_and_document(tmp_path):
    """Test-only errors keep their pages and documents, which say plainly where they come
    from; product errors carry no such notice, and coverage counts product errors only."""
    root = tmp_path / "upstream"
    test_file = {"python/sglang/test/test_cache.py": "def test_cache(out):\n    assert out.ok, 'the cache test failed'\n"}
    shas = make_repo(root, [{**CODE, **test_file}])
    run_build(tmp_path, (root, shas))
    site = tmp_path / "site"
    test_id = error_id("o/r", "AssertionError", "the cache test failed")
    kv4 = error_id("o/r", "RuntimeError", "KV4 is not tested on non-CUDA platforms.")
    assert json.loads((site / f"api/errors/{test_id}.json").read_text())["scope"] == "test"
    assert json.loads((site / f"api/errors/{kv4}.json").read_text())["scope"] == "product"
    assert "Raised only by SGLang's own tests" in (site / f"errors/{test_id}/index.html").read_text()
    assert "Raised only by SGLang" not in (site / f"errors/{kv4}/index.html").read_text()


FIELDS = {
    "python/sglang/srt/arg_groups/fields/model.py": """
        class Model(msgspec.Struct):
            _NS_PATH = "model"
            kv_cache_dtype: A[str, Arg(help="Data type for kv cache storage.", choices=["auto", "fp8_e4m3"])] = "auto"
        """,
}


def test_a_page_explains_the_flags_it_names_and_follows_their_help_upstream(tmp_path):
    """A page naming `--kv-cache-dtype` shows upstream's help text, default and choices; when
    only the flag's declaration changes upstream, the rebuild shows the new help, as a build
    from an empty cache does."""
    root = tmp_path / "upstream"
    edited = {"python/sglang/srt/arg_groups/fields/model.py": FIELDS["python/sglang/srt/arg_groups/fields/model.py"].replace("Data type for kv cache storage.", "The KV cache's data type.")}
    shas = make_repo(root, [{**CODE, **FIELDS}, edited])
    kv8 = error_id("o/r", "ValueError", "fp8 KV cache needs --kv-cache-dtype support")
    run_build(tmp_path, (root, shas[:1]))
    document = json.loads((tmp_path / f"site/api/errors/{kv8}.json").read_text())
    assert document["settings"] == [{
        "name": "--kv-cache-dtype", "help": "Data type for kv cache storage.", "default": "'auto'", "choices": ["auto", "fp8_e4m3"],
        "url": f"https://github.com/o/r/blob/{shas[0]}/python/sglang/srt/arg_groups/fields/model.py#L4",
    }]
    assert "Data type for kv cache storage." in (tmp_path / f"site/errors/{kv8}/index.html").read_text()
    run_build(tmp_path, (root, shas))
    assert "The KV cache&#39;s data type." in (tmp_path / f"site/errors/{kv8}/index.html").read_text()
    # The same two builds, the second from an empty cache: the same pages.
    build(config(), inputs_of(config(), f"git:{root}@{shas[0]}", tmp_path / "fresh", tmp_path / "fresh-content", tmp_path / "cache-1"), jobs=1)
    build(config(), inputs_of(config(), f"git:{root}@{shas[1]}", tmp_path / "fresh", tmp_path / "fresh-content", tmp_path / "cache-2"), jobs=1)
    assert tree(tmp_path / "site") == tree(tmp_path / "fresh")


def test_the_content_schema_is_kept_in_the_cache_and_made_again_when_unreadable(tmp_path, monkeypatch):
    from generator import schema
    from generator.pages import content_schema

    made = schema.curated_json_schema()
    assert content_schema(tmp_path) == made
    (kept,) = (tmp_path / "schema").iterdir()
    with monkeypatch.context() as patched:
        patched.setattr(schema, "curated_json_schema", lambda: pytest.fail("made again, though kept"))
        assert content_schema(tmp_path) == made
    kept.write_bytes(b"not a pickle")
    assert content_schema(tmp_path) == made
    assert kept.read_bytes() != b"not a pickle"


def test_a_build_that_fails_midway_leaves_the_previous_site_whole(tmp_path):
    out = tmp_path / "site"
    publish([("index.html", b"old"), ("a/b.txt", b"kept")], out)

    def files():
        yield "index.html", b"new"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        publish(files(), out)
    assert tree(out) == {"index.html": b"old", "a/b.txt": b"kept"}
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


def test_a_second_concurrent_build_fails_with_one_line(tmp_path):
    out = tmp_path / "site"
    with build_lock(out):
        with pytest.raises(BuildError, match="another build is writing"):
            with build_lock(out):
                pass


def test_moved_and_retired_ids_keep_pages(tmp_path, repo):
    run_build(tmp_path, repo, out="plain")
    index = json.loads((tmp_path / "plain/api/errors/index.json").read_text())
    target = index["errors"][0]["id"]
    ledger = (
        LedgerRecord("00000000000000aa", "moved", "v1", "v2", "raise", "ValueError", "Old <words>", "python/sglang/x.py", 3, "f", moved_to=target),
        LedgerRecord("00000000000000bb", "retired", "v1", "v2", "raise", "ValueError", "Gone now", "python/sglang/y.py", 9, "g", retired_in="v3"),
    )
    changes = (Change("00000000000000bb", "v3", "2026-01-02T00:00:00Z", "retired", "Gone now"),
               Change(target, "v2", "2026-01-01T00:00:00Z", "added", None))
    # What earlier builds left in the content folder: the ledger knows both old ids.
    previous = load_ledger(tmp_path / "content")
    write_history(tmp_path / "content", {**previous, **{r.id: r for r in ledger}}, changes)
    run_build(tmp_path, repo)
    site = tmp_path / "site"
    moved = (site / "errors/00000000000000aa/index.html").read_text()
    assert f'<meta http-equiv="refresh" content="0; url=../../errors/{target}/">' in moved
    assert f'<a href="../../errors/{target}/">' in moved and "Old &lt;words&gt;" in moved
    moved_doc = json.loads((site / "api/errors/00000000000000aa.json").read_text())
    assert moved_doc["status"] == "moved" and moved_doc["moved_to"] == target
    retired_doc = json.loads((site / "api/errors/00000000000000bb.json").read_text())
    assert retired_doc["status"] == "retired" and retired_doc["retired_in"] == "v3"
    assert retired_doc["last_location"] == {"path": "python/sglang/y.py", "line": 9, "function": "g"}
    retired_page = (site / "errors/00000000000000bb/index.html").read_text()
    assert "No longer raised" in retired_page
    # `errorkb scaffold` takes only errors raised now: a retired page does not offer it.
    assert "errorkb scaffold" not in retired_page and "No explanation was written for this error while SGLang raised it" in retired_page
    new_doc = json.loads((site / f"api/errors/{target}.json").read_text())
    assert new_doc["aliases"] == ["00000000000000aa"]
    listed = json.loads((site / "api/changes.json").read_text())["changes"]
    assert [c["id"] for c in listed] == ["00000000000000bb", target]
    schema = jsonschema.Draft202012Validator(json.loads((site / "api/schema/error.json").read_text()))
    for document in (moved_doc, retired_doc, new_doc):
        schema.validate(document)
    # Each release has a page of its changes, listed by the changes page, with its document.
    assert "Gone now" in (site / "releases/3/index.html").read_text()
    assert '<a href="../releases/3/">3</a>' in (site / "changes/index.html").read_text()
    release = json.loads((site / "api/releases/3.json").read_text())
    assert (release["revision"], [(c["id"], c["change"]) for c in release["changes"]]) == ("v3", [("00000000000000bb", "retired")])
    listed = [r["release"] for r in json.loads((site / "api/releases/index.json").read_text())["releases"]]
    assert listed[-3:] == ["3", "2", "1"] and len(listed) == 4  # and this build's commit, newest
    # The releases that raised each: the retired one's own, and the new id's back to the id
    # it was reworded from, whose message is its earlier wording (escaped on the page).
    assert retired_doc["versions"] == {"first": "v1", "last": "v2", "retired_in": "v3", "wordings": [], "places": []}
    assert new_doc["versions"]["first"] == "v1"
    assert new_doc["versions"]["wordings"] == [{"message": "Old <words>", "first": "v1", "last": "v2", "reworded_in": None}]
    page = (site / f"errors/{target}/index.html").read_text()
    assert 'Raised by SGLang since <a href="../../releases/1/">1</a>.' in page and "Old &lt;words&gt;" in page
    # Each earlier wording's releases caption its own block, above it: not a line below that
    # reads as the heading of the next one.
    assert re.search(r'<figure class="wording">\s*<figcaption>Raised by SGLang 1 to 2:</figcaption>\s*<pre class="msg"><code>Old &lt;words&gt;</code></pre>\s*</figure>', page)


def test_build_command(tmp_path, repo, capsys):
    root, shas = repo
    (tmp_path / "errorkb.toml").write_text('[errorkb]\nrepo = "o/r"\n')
    code = main(["--config", str(tmp_path / "errorkb.toml"), "build", "--source", f"git:{root}@{shas[0]}",
                 "--out", str(tmp_path / "out"), "--content", str(tmp_path / "content"), "--cache-dir", str(tmp_path / "c"), "--jobs", "1"])
    assert code == 0
    assert (tmp_path / "out/index.html").is_file()
    assert re.match(r"build: 4 errors \(0 explained\), \d+ files", capsys.readouterr().err)
    code = main(["build", "--source", f"git:{root}@nope", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "no such revision" in err
    assert (tmp_path / "out/index.html").is_file()


def test_a_build_whose_content_files_are_cached_imports_neither_pydantic_nor_ruamel(tmp_path, repo):
    root, shas = repo
    (tmp_path / "errorkb.toml").write_text('[errorkb]\nrepo = "o/r"\n')
    kv4 = error_id("o/r", "RuntimeError", "KV4 is not tested on non-CUDA platforms.")
    (tmp_path / "content/errors").mkdir(parents=True)
    (tmp_path / f"content/errors/{kv4}.yaml").write_text(
        f'id: "{kv4}"\nexception: RuntimeError\nmessage: "KV4 is not tested on non-CUDA platforms."\n'
        "explanation: A 4-bit KV cache was requested off CUDA.\nsolutions:\n  - title: Use fp8\n    body: Pass `--kv-cache-dtype fp8_e4m3`.\n"
    )
    argv = ["--config", str(tmp_path / "errorkb.toml"), "build", "--source", f"git:{root}@{shas[0]}", "--out", str(tmp_path / "out"),
            "--content", str(tmp_path / "content"), "--cache-dir", str(tmp_path / "cache"), "--jobs", "1"]
    assert main(argv) == 0
    # Another input, so that the next build runs whole instead of finding the site up to date.
    (tmp_path / "content/notes.txt").write_text("a change of inputs forces a real rebuild\n")
    script = f"import sys\nfrom generator.cli import main\ncode = main({argv!r})\nprint(code, [m for m in ('pydantic', 'ruamel.yaml') if m in sys.modules])\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent, capture_output=True, text=True, check=True)
    assert "(1 explained)" in done.stderr
    assert done.stdout == "0 []\n"


def test_serve_answers_pages_extensionless_api_and_reloads(tmp_path, repo):
    import threading
    import urllib.error
    import urllib.request
    from functools import partial
    from http.server import ThreadingHTTPServer

    from generator.commands.serve import RELOAD, Handler, Preview

    run_build(tmp_path, repo)
    site = tmp_path / "site"
    error = json.loads((site / "api/errors/index.json").read_text())["errors"][0]["id"]
    watched = tmp_path / "content"
    watched.mkdir(exist_ok=True)
    rebuilds = []
    preview = Preview(lambda: rebuilds.append(1), (watched,))
    handler = type("H", (Handler,), {"preview": preview})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with urllib.request.urlopen(f"{base}/api/errors/{error}", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("application/json")
            assert json.load(response)["id"] == error
        with urllib.request.urlopen(f"{base}/errors/{error}/", timeout=10) as response:
            assert RELOAD in response.read().decode()
        assert RELOAD.encode() not in (site / f"errors/{error}/index.html").read_bytes()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/nothing/here", timeout=10)
        assert missing.value.code == 404
        assert not preview.poll()
        (watched / "new.yaml").write_text("x: 1\n")
        assert preview.poll() and rebuilds == [1] and preview.version == 1
        with urllib.request.urlopen(f"{base}/__errorkb/version", timeout=10) as response:
            assert response.read() == b"1"
    finally:
        server.shutdown()
        server.server_close()


def test_background_runs_unpicklable_tasks_in_turn_in_one_forked_process():
    from generator import workers

    records = tuple(range(1000))
    first, second = workers.background(
        [lambda: (os.getpid(), sum(records)), lambda: (os.getpid(), max(records))], jobs=2, size=len(records)
    )
    # Asked for in either order, each result is its own task's.
    pid_two, largest = second()
    pid_one, total = first()
    assert (total, largest) == (sum(records), max(records))
    assert pid_one == pid_two
    assert pid_one != os.getpid() or not workers.can_fork()


def test_a_deferred_pool_runs_at_a_lower_priority_than_the_build():
    """Highlighting's pool works while the build derives its records, and its excerpts are
    needed last: its processes yield the cores to the build's own and its background tasks,
    and take what they leave idle. An ordinary pool runs at the build's priority."""
    from generator import workers

    mine = os.nice(0)
    with workers.pool(1, start="spawn", deferred=True) as deferred:
        assert deferred.submit(os.nice, 0).result() == min(mine + 10, 19)
    with workers.pool(1) as ordinary:
        assert ordinary.submit(os.nice, 0).result() == mine


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare is not installed")
def test_workers_run_when_the_build_is_process_1():
    """In a container errorkb can be process 1; its workers must not take their parent's pid
    for a sign that it is gone."""
    script = (
        "import os\nfrom generator import workers\nrecords = tuple(range(1000))\n"
        "(task,) = workers.background([lambda: sum(records)], jobs=2, size=len(records))\n"
        "print(os.getpid(), task())\n"
    )
    done = subprocess.run(["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", script], cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"cannot make a pid namespace here: {done.stderr[-200:]}")
    assert done.stdout.split() == ["1", str(sum(range(1000)))], done.stderr[-500:]


def test_highlighting_started_early_gives_the_excerpts_of_highlighting_on_demand(tmp_path):
    from generator.highlight import Highlighting, excerpt_blob, excerpts_of
    from generator.model import group_sites
    from generator.pipeline import extract_upstream
    from generator.upstream import open_source

    files = {f"python/sglang/srt/m{n}.py": f'''
        def check_{n}(size):
            """Check size {n}."""
            if size > {n}:
                raise ValueError(f"size {{size}} above {n}")
        ''' for n in range(20)}
    root = tmp_path / "upstream"
    shas = make_repo(root, [files])
    source = open_source(f"git:{root}@{shas[0]}", config(), tmp_path / "cache")
    entries = group_sites(extract_upstream(source, tmp_path / "cache", jobs=1).sites, "o/r")
    early = Highlighting(source, entries, tmp_path / "cache")
    early.start(jobs=2)
    found = excerpts_of(early, set(early.requests))
    by_path = {file.path: file for file in source.files()}
    assert found.keys() == early.requests.keys() == files.keys()
    for path, excerpts in found.items():
        assert excerpts == excerpt_blob(source.read(by_path[path]), early.requests[path])
        assert early.cache.has(early.keys[path])  # stored by the workers, for the next build
    assert excerpts_of(Highlighting(source, entries, tmp_path / "cache"), set(files)) == found


def test_browse_pages_are_rendered_once_per_context_across_builds(tmp_path):
    from generator.pages import PageMemo

    calls = []

    class Template:
        name = "list.html"

        def render(self, context):
            calls.append(context["heading"])
            return f"<h1>{context['heading']}</h1>\0"

    memo = PageMemo(tmp_path / "memo.pickle")
    assert memo.render(Template(), {"heading": "a"}) == "<h1>a</h1>\ufffd".encode()
    memo.save()
    again = PageMemo(tmp_path / "memo.pickle")
    assert again.render(Template(), {"heading": "a"}) == "<h1>a</h1>\ufffd".encode()
    assert again.render(Template(), {"heading": "b"}) == "<h1>b</h1>\ufffd".encode()
    assert calls == ["a", "b"]
    again.save()
    # Only the pages of the last build are kept.
    assert len(PageMemo(tmp_path / "memo.pickle").known) == 2


RAISER_CODE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/utils/__init__.py": "from sglang.srt.utils.common import *\n",
    "python/sglang/srt/utils/common.py": '''
        def raise_error_or_warn(obj, strict, counter_name, message):
            if strict:
                raise ValueError(message)
        ''',
    "python/sglang/srt/checker.py": '''
        from sglang.srt.utils import raise_error_or_warn

        def report_leak(pool_name, token_msg):
            msg = f"{pool_name} memory leak detected! {token_msg}"
            raise_error_or_warn(None, True, "count", msg)
        ''',
}


def test_a_raiser_that_changes_rebuilds_its_callers_pages_as_an_empty_cache_does(tmp_path):
    """Only the raiser's file changes between the revisions, not its caller's: the call's
    error (and so its page, the search index and related errors) must follow, as the states
    kept between builds are keyed by what each file's sites were made from."""
    changed = {
        "python/sglang/srt/utils/common.py": '''
            def raise_error_or_warn(obj, strict, counter_name, message):
                if strict:
                    raise RuntimeError(message)
            '''
    }
    root = tmp_path / "up"
    shas = make_repo(root, [RAISER_CODE, changed, RAISER_CODE])
    for number, sha in enumerate(shas):
        fresh_content = tmp_path / f"fresh-content-{number}"
        (tmp_path / "content").mkdir(exist_ok=True)
        shutil.copytree(tmp_path / "content", fresh_content)
        build(config(), inputs_of(config(), f"git:{root}@{sha}", tmp_path / "site", tmp_path / "content", tmp_path / "cache"), jobs=1)
        build(config(), inputs_of(config(), f"git:{root}@{sha}", tmp_path / f"fresh-{number}", fresh_content, tmp_path / f"fresh-cache-{number}"), jobs=1)
        assert tree(tmp_path / "site") == tree(tmp_path / f"fresh-{number}"), number
    leak = error_id("o/r", "RuntimeError", "{} memory leak detected! {}")
    document = json.loads((tmp_path / "fresh-1" / "api" / "errors" / f"{leak}.json").read_bytes())
    assert document["locations"][0]["path"] == "python/sglang/srt/checker.py"


HOOK = {
    "python/sglang/srt/arg_groups/kv_hook.py": '''
        from sglang.srt.server_args import check

        def resolve_kv(cfg):
            if cfg.kv_cache_dtype != "auto":
                check(cfg)
        ''',
}


def test_pages_say_when_sglang_raises_an_error_and_how_it_gets_there_and_follow_the_callers(tmp_path):
    """A check called from an argument resolution hook is raised at launch: its page and
    document say so and list the call with its condition; a function nothing calls is
    `unreachable`. When only the caller's file changes, the rebuild follows as an empty cache
    does; the home page offers the phases with counts, and each phase has a page. A flag the
    callers' tests name is explained on the page."""
    root = tmp_path / "upstream"
    moved = {"python/sglang/srt/arg_groups/kv_hook.py": HOOK["python/sglang/srt/arg_groups/kv_hook.py"].replace("check(cfg)", "pass\n                check(cfg)").replace('!= "auto"', "is not None")}
    shas = make_repo(root, [{**CODE, **HOOK, **FIELDS}, moved])
    kv4 = error_id("o/r", "RuntimeError", "KV4 is not tested on non-CUDA platforms.")
    fp8 = error_id("o/r", "ValueError", "fp8 KV cache needs --kv-cache-dtype support")
    run_build(tmp_path, (root, shas[:1]))
    site = tmp_path / "site"
    document = json.loads((site / f"api/errors/{kv4}.json").read_text())
    assert document["phase"] == "launch" and document["locations"][0]["phase"] == "launch"
    (call,) = document["locations"][0]["callers"]["nodes"]
    assert (call["path"], call["line"], call["function"], call["conditions"]) == (
        "python/sglang/srt/arg_groups/kv_hook.py", 6, "resolve_kv", ["cfg.kv_cache_dtype != 'auto'"]
    )
    page = (site / f"errors/{kv4}/index.html").read_text()
    assert "How SGLang gets here" in page and "at launch: argument and environment resolution" in page
    assert "called by <code>resolve_kv</code> at <code>python/sglang/srt/arg_groups/kv_hook.py:6</code>" in page
    # `assert cfg.page_size` names no flag itself; its caller's test names --kv-cache-dtype.
    index = {e["id"]: e for e in json.loads((site / "api/errors/index.json").read_text())["errors"]}
    (page_size,) = [e for e, row in index.items() if row["title"] == "assert cfg.page_size"]
    asserted = json.loads((site / f"api/errors/{page_size}.json").read_text())
    assert [s["name"] for s in asserted["settings"]] == ["--kv-cache-dtype"] and asserted["phase"] == "launch"
    other = json.loads((site / f"api/errors/{fp8}.json").read_text())
    assert other["phase"] == "unreachable" and other["locations"][0]["callers"] == {"nodes": [], "more": 0}
    assert "Nothing in SGLang's code calls <code>other</code>" in (site / f"errors/{fp8}/index.html").read_text()
    jsonschema.validate(document, json.loads((site / "api/schema/error.json").read_text()))
    assert index[kv4]["phase"] == "launch"
    home = (site / "index.html").read_text()
    assert 'href="phases/launch/">at launch: argument and environment resolution at start-up</a> <span class="count">' in home
    assert f"errors/{kv4}/" in (site / "phases/launch/index.html").read_text()
    assert f"errors/{fp8}/" in (site / "phases/unreachable/index.html").read_text()
    # Only the hook changes: the call moves a line down under another condition.
    shutil.copytree(tmp_path / "content", tmp_path / "fresh-content")
    run_build(tmp_path, (root, shas))
    (call,) = json.loads((site / f"api/errors/{kv4}.json").read_text())["locations"][0]["callers"]["nodes"]
    assert (call["line"], call["conditions"]) == (7, ["cfg.kv_cache_dtype is not None"])
    build(config(), inputs_of(config(), f"git:{root}@{shas[1]}", tmp_path / "fresh", tmp_path / "fresh-content", tmp_path / "cache-fresh"), jobs=1)
    assert tree(site) == tree(tmp_path / "fresh")


# Enough errors for their pages to be rendered by worker processes.
MANY = {
    "python/sglang/__init__.py": "",
    "python/sglang/many.py": "".join(f"def check_{n}(value):\n    if value == {n}:\n        raise ValueError('value {n} is not allowed here')\n" for n in range(240)),
}


def test_pages_written_by_the_rendering_workers_equal_those_of_one_process(tmp_path):
    root = tmp_path / "upstream"
    shas = make_repo(root, [MANY])
    for jobs, name in ((1, "one"), (2, "two")):
        result = build(config(), inputs_of(config(), f"git:{root}@{shas[-1]}", tmp_path / name, tmp_path / f"content-{name}", tmp_path / f"cache-{name}"), jobs=jobs)
        assert result.files == len(tree(tmp_path / name))
    assert len(list((tmp_path / "two" / "errors").iterdir())) >= 240
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    # The manifest holds every file's digest: a rebuild finds each file as it was.
    (tmp_path / "content-two" / "notes.txt").write_text("a change of inputs forces a real rebuild\n")
    again = build(config(), inputs_of(config(), f"git:{root}@{shas[-1]}", tmp_path / "two", tmp_path / "content-two", tmp_path / "cache-two"), jobs=2)
    assert again.written == 0
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


def test_a_build_of_many_pages_failing_while_it_writes_leaves_the_previous_site_whole(tmp_path, monkeypatch):
    from generator import pages

    root = tmp_path / "upstream"
    shas = make_repo(root, [MANY])
    build(config(), inputs_of(config(), f"git:{root}@{shas[-1]}", tmp_path / "site", tmp_path / "content", tmp_path / "cache"), jobs=2)
    before = tree(tmp_path / "site")

    def failing(*args, **kwargs):
        raise RuntimeError("the browse pages failed")

    monkeypatch.setattr(pages, "browse_files", failing)
    # Another cache: every page is rendered again, by the workers, into a new tree.
    with pytest.raises(RuntimeError, match="browse pages failed"):
        build(config(), inputs_of(config(), f"git:{root}@{shas[-1]}", tmp_path / "site", tmp_path / "content", tmp_path / "other-cache"), jobs=2)
    assert tree(tmp_path / "site") == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site.")) == [".site.lock"]


def test_curated_files_are_fingerprinted_in_another_process_reading_what_was_read_before(tmp_path):
    """A cold build parses every curated entry's file again for its fingerprint in a forked
    process (`articles.stale_curated`), off the build's own path. The fork reads the files
    this process read for it (a git source's reader must not be shared across a fork), and
    tells stale entries from fresh ones as this process does; with the fingerprints cached, the
    next build forks nothing."""
    from generator.articles import stale_curated
    from generator.audit import fingerprints
    from generator.model import Curated, group_sites
    from generator.pipeline import extract_upstream
    from generator.upstream import open_source

    # Over a thousand errors: fewer run in this process (`workers.background`).
    code = "def f(x):\n" + "".join(f"    if x == {n}:\n        raise ValueError('case {n} is not allowed')\n" for n in range(1100))
    shas = make_repo(tmp_path / "up", [{"python/sglang/srt/m.py": code}])
    source = open_source(f"git:{tmp_path / 'up'}@{shas[0]}", config(), tmp_path / "cache")
    extraction = extract_upstream(source, tmp_path / "cache", jobs=1)
    by_id = {entry.id: entry for entry in group_sites(extraction.sites, "o/r")}
    fresh, changed = sorted(by_id)[:2]

    def curated(error: str, fingerprint: str) -> Curated:
        return Curated(error, f"content/errors/{error}.yaml", None, "Means.", (), None, (), None, (), fingerprint, written_for="v1")

    written = {fresh: curated(fresh, fingerprints([by_id[fresh]], source)[fresh]), changed: curated(changed, "0123456789abcdef")}
    forked = stale_curated(written, by_id, source, extraction.made_from(), tmp_path / "c", jobs=2)
    assert forked.__name__ == "result"  # waits for a forked process
    assert forked() == {changed: "v1"}
    again = stale_curated(written, by_id, source, extraction.made_from(), tmp_path / "c", jobs=2)
    assert again.__name__ == "stale" and again() == {changed: "v1"}
    assert stale_curated(written, by_id, source, extraction.made_from(), tmp_path / "c1", jobs=1)() == {changed: "v1"}
