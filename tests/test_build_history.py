"""`errorkb build` across upstream commits: the ledger in `content/` carries every published
page through moves, rewordings and removals, and a failed build changes nothing."""

from __future__ import annotations

import json
import textwrap

import pytest

from generator import build as build_module
from generator.build import build, inputs_of
from generator.cli import main
from generator.config import Config
from generator.history import load_changes, load_history, load_ledger
from generator.model import error_id
from tests.conftest import make_repo
from tests.test_history import V1, V2

CURATED = """\
id: "{id}"
exception: ValueError
message: "dense KV rows must match loc_2d size: {{self.tp_size}}"
explanation: |
  The tensor-parallel size must be at least one.
solutions:
  - title: Set a positive tensor-parallel size
    body: Launch with `--tp-size 1` or more.
"""


def run(tmp_path, sha, out="site"):
    inputs = inputs_of(Config(), f"git:{tmp_path / 'up'}@{sha}", tmp_path / out, tmp_path / "content", tmp_path / "cache")
    return build(Config(), inputs, jobs=1)


def index_of(site):
    return {e["message"]: e["id"] for e in json.loads((site / "api/errors/index.json").read_text())["errors"]}


@pytest.fixture
def built(tmp_path):
    shas = make_repo(tmp_path / "up", [V1, V2])
    run(tmp_path, shas[0])
    first = index_of(tmp_path / "site")
    return shas, first


def test_first_build_writes_the_ledger_and_no_changes(tmp_path, built):
    shas, first = built
    ledger = load_ledger(tmp_path / "content")
    assert set(ledger) == set(first.values())
    assert load_changes(tmp_path / "content") == ()
    upstream = json.loads((tmp_path / "content/upstream.json").read_text())
    assert (upstream["revision"], upstream["source"]) == (shas[0], f"git:{tmp_path / 'up'}@{shas[0]}")


def test_next_revision_keeps_every_page_and_carries_curated_text(tmp_path, built):
    shas, first = built
    old_id = first["dense KV rows must match loc_2d size: {self.tp_size}"]
    gone_id = first["pipeline parallel is not supported with LoRA"]
    kv4_id = first["KV4 is not tested on non-CUDA platforms."]
    (tmp_path / "content/errors").mkdir(parents=True)
    (tmp_path / f"content/errors/{old_id}.yaml").write_text(CURATED.format(id=old_id))
    result = run(tmp_path, shas[1])
    site = tmp_path / "site"
    new_id = index_of(site)["KV rows must match loc_2d size: {self.tp_size}"]
    [orphan] = result.orphans
    assert orphan.startswith(str(tmp_path / f"content/errors/{old_id}.yaml")) and new_id in orphan
    # The reworded id redirects to the new page, and its document says where it went.
    redirect = (site / f"errors/{old_id}/index.html").read_text()
    assert f'url=../../errors/{new_id}/"' in redirect
    document = json.loads((site / f"api/errors/{old_id}.json").read_text())
    assert (document["status"], document["moved_to"]) == ("moved", new_id)
    # The new page carries the curated text, marked for review.
    page = (site / f"errors/{new_id}/index.html").read_text()
    assert "The tensor-parallel size must be at least one." in page
    assert json.loads((site / f"api/errors/{new_id}.json").read_text())["aliases"] == [old_id]
    # The removed error keeps a page saying since when it is no longer raised.
    retired = json.loads((site / f"api/errors/{gone_id}.json").read_text())
    assert (retired["status"], retired["retired_in"]) == ("retired", shas[1])
    # Its page says what to do on a release that raised it: which release stopped raising it,
    # the code that raised it at the last revision that did, upstream's issues searched.
    gone = (site / f"errors/{gone_id}/index.html").read_text()
    todo = gone[gone.index('<h2 id="todo">') :]
    code = f"https://github.com/{retired['upstream']['repo']}/blob/{shas[0]}/{retired['last_location']['path']}#L{retired['last_location']['line']}"
    assert f'<a href="../../releases/{shas[1]}/">{shas[1]}</a> and later do not raise it as worded here' in todo
    assert f'Read <a href="{code}">the code that raised it</a>' in todo and "issues?q=" in todo
    # The moved error keeps its id and shows its new place.
    kv4 = json.loads((site / f"api/errors/{kv4_id}.json").read_text())
    assert kv4["locations"][0]["path"] == "python/sglang/srt/arg_groups/kv_cache_hook.py"
    changes = json.loads((site / "api/changes.json").read_text())["changes"]
    assert sorted((c["change"], c["id"]) for c in changes) == sorted(
        [("reworded", old_id), ("retired", gone_id), ("moved", kv4_id)]
    )
    assert "KV rows must match" in (site / f"releases/{shas[1]}/index.html").read_text()
    assert f'<a href="../releases/{shas[1]}/">' in (site / "changes/index.html").read_text()
    # The carried explanation counts as coverage, per module too.
    coverage = json.loads((site / "api/coverage.json").read_text())
    assert (coverage["curated"], coverage["total"]) == (1, 2)
    assert {"module": "sglang.srt.server_args", "curated": 1, "total": 1} in coverage["modules"]
    assert "1 of 2 errors (50.0%)" in (site / "coverage/index.html").read_text()
    # Nothing curated was touched on disk.
    assert (tmp_path / f"content/errors/{old_id}.yaml").read_text() == CURATED.format(id=old_id)


def test_building_the_same_revision_again_changes_nothing(tmp_path, built):
    shas, _ = built
    run(tmp_path, shas[1])
    content = {p: p.read_bytes() for p in sorted((tmp_path / "content").rglob("*")) if p.is_file()}
    again = run(tmp_path, shas[1])
    assert again.written == 0
    assert {p: p.read_bytes() for p in sorted((tmp_path / "content").rglob("*")) if p.is_file()} == content


def test_the_history_kept_in_the_cache_is_what_the_written_files_read_back(tmp_path, built):
    shas, _ = built
    run(tmp_path, shas[1])
    content, cache = tmp_path / "content", tmp_path / "cache"
    assert load_changes(content)  # the second revision recorded changes
    kept = list((cache / "history").glob("*.pickle"))
    assert len(kept) == 1
    assert load_history(content, cache) == load_history(content)
    # A hand-edited ledger is read from its files, not from what the cache kept.
    shard = sorted((content / "ledger").glob("*.jsonl"))[0]
    lines = shard.read_text().splitlines()
    shard.write_text("\n".join(lines[1:]) + "\n")
    assert load_history(content, cache) == load_history(content)
    assert len(load_history(content, cache)[0]) == len(load_ledger(content))


def test_a_failed_build_leaves_the_previous_site_and_ledger(tmp_path, built, monkeypatch):
    shas, _ = built
    before_site = {p: p.read_bytes() for p in sorted((tmp_path / "site").rglob("*")) if p.is_file()}
    before_content = {p: p.read_bytes() for p in sorted((tmp_path / "content").rglob("*")) if p.is_file()}

    def broken(files, out, hashes=None, spare=None):
        for number, _ in enumerate(files):
            if number == 50:
                raise OSError(28, "No space left on device")
        raise AssertionError("unreachable")

    monkeypatch.setattr(build_module, "publish", broken)
    with pytest.raises(OSError):
        run(tmp_path, shas[1])
    assert {p: p.read_bytes() for p in sorted((tmp_path / "site").rglob("*")) if p.is_file()} == before_site
    assert {p: p.read_bytes() for p in sorted((tmp_path / "content").rglob("*")) if p.is_file()} == before_content


def test_build_command_reports_orphans_with_exit_3(tmp_path, built, capsys):
    shas, _ = built
    never = error_id(Config().repo, "ValueError", "never raised anywhere")
    (tmp_path / "content/errors").mkdir(parents=True)
    (tmp_path / f"content/errors/{never}.yaml").write_text(
        CURATED.format(id=never).replace("dense KV rows must match loc_2d size: {self.tp_size}", "never raised anywhere")
    )
    code = main(["build", "--source", f"git:{tmp_path / 'up'}@{shas[0]}", "--out", str(tmp_path / "site"),
                 "--content", str(tmp_path / "content"), "--cache-dir", str(tmp_path / "cache"), "--jobs", "1"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"{never}.yaml: orphaned: {never}" in err
    assert (tmp_path / f"content/errors/{never}.yaml").exists()


# Two files of errors; later commits edit only the first, so only its errors' code changes.
EDITED = {
    "python/sglang/srt/layers.py": """\
        def check_layers(cfg):
            if cfg.num_layers < 1:
                raise ValueError(f"num_layers must be positive, got {cfg.num_layers}")
            assert cfg.hidden_size % cfg.heads == 0
        """,
    "python/sglang/srt/sampling.py": """\
        def check_sampling(params):
            if params.top_p > 1:
                raise ValueError(f"top_p must be at most 1, got {params.top_p}")
        """,
}


def with_comment(text: str, comment: str) -> str:
    return f"# {comment}\n" + textwrap.dedent(text)


def files_of(site):
    """Every file of a built site by path: (bytes, inode, mtime)."""
    return {
        p.relative_to(site).as_posix(): (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(site.rglob("*"))
        if p.is_file()
    }


def ids_in(site, path):
    return {e["id"] for e in json.loads((site / "api/errors/index.json").read_text())["errors"] if e["path"] == path}


def test_a_commit_rewrites_only_the_pages_of_errors_in_the_files_it_touched(tmp_path):
    layers, sampling = "python/sglang/srt/layers.py", "python/sglang/srt/sampling.py"
    second = {layers: with_comment(EDITED[layers], "moved down a line")}
    shas = make_repo(tmp_path / "up", [EDITED, second])
    run(tmp_path, shas[0])
    site = tmp_path / "site"
    touched, untouched = ids_in(site, layers), ids_in(site, sampling)
    assert len(touched) == 2 and len(untouched) == 1
    before = files_of(site)
    result = run(tmp_path, shas[1])
    after = files_of(site)
    assert set(after) == set(before)
    changed = {path for path in after if after[path] != before[path]}
    per_error = {path for path in changed if path.startswith(("errors/", "api/errors/")) and path != "api/errors/index.json"}
    assert per_error == {f"errors/{i}/index.html" for i in touched} | {f"api/errors/{i}.json" for i in touched}
    # The other errors' files are the very same files: same inode, same mtime, same bytes.
    for error in untouched:
        for path in (f"errors/{error}/index.html", f"api/errors/{error}.json"):
            assert after[path] == before[path]
    # Only what the commit touched and the pages that name the build's revision were written.
    assert result.written == len(changed)
    # The same inputs again give the same tree, byte for byte, into another folder.
    run(tmp_path, shas[1], out="again")
    assert {p: v[0] for p, v in files_of(tmp_path / "again").items()} == {p: v[0] for p, v in after.items()}


def test_a_page_is_pinned_to_the_revision_its_code_last_changed(tmp_path):
    layers, sampling = "python/sglang/srt/layers.py", "python/sglang/srt/sampling.py"
    shas = make_repo(
        tmp_path / "up",
        [EDITED, {layers: with_comment(EDITED[layers], "one")}, {layers: with_comment(EDITED[layers], "two")}],
    )
    for sha in shas:
        run(tmp_path, sha)
    site = tmp_path / "site"
    [kept] = ids_in(site, sampling)
    document = json.loads((site / f"api/errors/{kept}.json").read_text())
    assert document["upstream"] == {"repo": Config().repo, "revision": shas[0], "date": "2026-01-01T12:00:00Z"}
    assert document["locations"][0]["url"] == f"https://github.com/{Config().repo}/blob/{shas[0]}/{sampling}#L3"
    page = (site / f"errors/{kept}/index.html").read_text()
    assert f"/blob/{shas[0]}/{sampling}#L3" in page and f"View on GitHub at {shas[0]}" in page
    assert f"/tree/{shas[0]}" in page and shas[2] not in page
    for error in ids_in(site, layers):
        document = json.loads((site / f"api/errors/{error}.json").read_text())
        assert document["upstream"] == {"repo": Config().repo, "revision": shas[2], "date": "2026-01-03T12:00:00Z"}
        assert all(f"/blob/{shas[2]}/{layers}#L" in location["url"] for location in document["locations"])
    # The ledger remembers each pin, so a fresh machine with an empty cache pins the same way.
    ledger = load_ledger(tmp_path / "content")
    assert (ledger[kept].pinned, ledger[kept].pinned_date) == (shas[0], "2026-01-01T12:00:00Z")
    # Shared pages name the revision built.
    assert f"/tree/{shas[2]}" in (site / "index.html").read_text()
    assert json.loads((site / "api/errors/index.json").read_text())["upstream"]["revision"] == shas[2]


def test_the_cache_does_not_grow_with_every_output_folder_and_pruning_changes_no_page(tmp_path, monkeypatch):
    from generator import history
    from generator.cache import SPARE_ENTRIES

    shas = make_repo(tmp_path / "up", [V1, V2])
    cache = tmp_path / "cache"
    for number in range(SPARE_ENTRIES + 3):
        run(tmp_path, shas[number % 2], out=f"site{number}")
        # Each output folder has its manifest and stamp in the cache; only the last few stay.
        for folder in ("pages", "builds"):
            assert 1 <= len(list((cache / folder).iterdir())) <= SPARE_ENTRIES + 1
    # What the last build used is still there: the next build reads the ledger from it.
    monkeypatch.setattr(history, "_ledger_of", lambda *a: pytest.fail("the kept history was pruned"))
    assert load_history(tmp_path / "content", cache)
    monkeypatch.undo()
    # The last folder is left as is by a build of the same inputs: nothing was pruned it needs.
    assert run(tmp_path, shas[(SPARE_ENTRIES + 2) % 2], out=f"site{SPARE_ENTRIES + 2}").written == 0
    # A build from the pruned cache and one from none write the same site.
    import shutil

    shutil.copytree(tmp_path / "content", tmp_path / "content-copy")
    source = f"git:{tmp_path / 'up'}@{shas[0]}"
    pruned = build(Config(), inputs_of(Config(), source, tmp_path / "a", tmp_path / "content", cache), jobs=1)
    fresh = build(Config(), inputs_of(Config(), source, tmp_path / "b", tmp_path / "content-copy", tmp_path / "empty"), jobs=1)
    assert pruned.files == fresh.files
    tree = lambda root: {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}  # noqa: E731
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_the_page_of_a_retired_bare_assert_is_titled_by_its_condition_as_while_raised(tmp_path):
    check = "python/sglang/srt/mem_cache/pool.py"
    code = "def alloc(need, free):\n    assert need <= free\n    return need\n"
    shas = make_repo(tmp_path / "up", [{check: code}, {check: "def alloc(need, free):\n    return need\n"}])
    run(tmp_path, shas[0])
    [error] = index_of(tmp_path / "site").values()
    raised = (tmp_path / f"site/errors/{error}/index.html").read_text()
    run(tmp_path, shas[1])
    page = (tmp_path / f"site/errors/{error}/index.html").read_text()
    assert json.loads((tmp_path / f"site/api/errors/{error}.json").read_text())["status"] == "retired"
    for html in (raised, page):
        assert "<title>assert need &lt;= free — SGLang error</title>" in html
