"""`errorkb build` across upstream commits: the ledger in `content/` carries every published
page through moves, rewordings and removals, and a failed build changes nothing."""

from __future__ import annotations

import json

import pytest

from generator import build as build_module
from generator.build import build, inputs_of
from generator.cli import main
from generator.config import Config
from generator.history import load_changes, load_ledger
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
    # The moved error keeps its id and shows its new place.
    kv4 = json.loads((site / f"api/errors/{kv4_id}.json").read_text())
    assert kv4["locations"][0]["path"] == "python/sglang/srt/arg_groups/kv_cache_hook.py"
    changes = json.loads((site / "api/changes.json").read_text())["changes"]
    assert sorted((c["change"], c["id"]) for c in changes) == sorted(
        [("reworded", old_id), ("retired", gone_id), ("moved", kv4_id)]
    )
    assert "KV rows must match" in (site / "changes/index.html").read_text()
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


def test_a_failed_build_leaves_the_previous_site_and_ledger(tmp_path, built, monkeypatch):
    shas, _ = built
    before_site = {p: p.read_bytes() for p in sorted((tmp_path / "site").rglob("*")) if p.is_file()}
    before_content = {p: p.read_bytes() for p in sorted((tmp_path / "content").rglob("*")) if p.is_file()}

    def broken(files, out, hashes=None):
        for number, _ in enumerate(files):
            if number == 50:
                raise OSError(28, "No space left on device")
        raise AssertionError("unreachable")

    monkeypatch.setattr(build_module, "write_site", broken)
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
