"""The ledger over real SGLang history: releases 0.5.18 then 0.5.19 from the package index,
committed in order into a git repository and read back through the git source."""

from __future__ import annotations

import os
import subprocess

import pytest

from generator.config import Config
from generator.history import carry_curated, resolve, update_ledger
from generator.model import Curated, group_sites
from generator.pipeline import extract_upstream
from generator.upstream import open_source
from tests import conftest

pytestmark = pytest.mark.real

RELEASES = ("0.5.18", "0.5.19")


@pytest.fixture(scope="module")
def real_history(tmp_path_factory):
    """A git repo whose two commits are the two releases' trees, plus the ledger after each."""
    cache = conftest.test_cache_dir()
    repo = tmp_path_factory.mktemp("sglang") / "repo"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shas = []
    for version in RELEASES:
        release = open_source(f"pypi:sglang=={version}", Config(), cache)
        subprocess.run(["git", "-C", str(repo), "rm", "-rq", "--ignore-unmatch", "python"], check=True)
        for file in release.files():
            target = repo / file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(release.read(file))
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"v{version}"], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                                   text=True).stdout.strip())
    steps, records = [], {}
    for sha in shas:
        extraction = extract_upstream(open_source(f"git:{repo}@{sha}", Config(), cache), cache)
        entries = group_sites(extraction.sites, extraction.upstream.repo)
        update = update_ledger(records, entries, extraction.upstream)
        records = update.records
        steps.append((entries, update))
    return shas, steps


def only(entries, text):
    [entry] = [e for e in entries if e.message and text in e.message]
    return entry


def test_every_id_published_at_0_5_18_resolves_at_0_5_19(real_history):
    _, [(old_entries, _), (new_entries, update)] = real_history
    current = {e.id for e in new_entries}
    statuses = {}
    for entry in old_entries:
        final = update.records[resolve(update.records, entry.id)]
        assert final.id in current or final.status == "retired"
        statuses[update.records[entry.id].status] = statuses.get(update.records[entry.id].status, 0) + 1
    assert set(statuses) == {"active", "moved", "retired"}


def test_kv4_keeps_its_id_while_moving_files(real_history):
    shas, [(old_entries, _), (new_entries, update)] = real_history
    old, new = only(old_entries, "KV4 is not tested"), only(new_entries, "KV4 is not tested")
    assert old.id == new.id
    assert [(s.path, s.line) for s in old.sites] == [("python/sglang/srt/server_args.py", 6137)]
    assert [(s.path, s.line) for s in new.sites] == [("python/sglang/srt/arg_groups/kv_cache_hook.py", 109)]
    record = update.records[new.id]
    assert (record.status, record.first_seen, record.path) == ("active", shas[0], "python/sglang/srt/arg_groups/kv_cache_hook.py")


@pytest.mark.parametrize(
    "old_text, new_text",
    [
        pytest.param("dense KV rows must match loc_2d size", "KV rows must match loc_2d size", id="kv-rows"),
        pytest.param("no native Rust MM pipeline for", "no Rust MM pipeline for", id="rust-mm"),
    ],
)
def test_real_rewordings_become_aliases_and_curated_text_follows(real_history, old_text, new_text):
    _, [(old_entries, _), (new_entries, update)] = real_history
    old = only(old_entries, old_text)
    [new] = [e for e in new_entries if e.id == update.records[old.id].moved_to]
    assert update.records[old.id].status == "moved"
    assert new.message == old.message.replace(old_text, new_text)
    assert {s.function for s in new.sites} & {s.function for s in old.sites}
    assert old.id in update.records[new.id].aliases
    written = Curated(old.id, f"content/errors/{old.id}.yaml", old.message, "Why.", (), None, (), None, (), None)
    carried = carry_curated({old.id: written}, update.records)[new.id]
    assert (carried.explanation, carried.review) == ("Why.", True)
