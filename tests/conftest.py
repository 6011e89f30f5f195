"""Shared fixtures: real SGLang releases (downloaded once into the cache) and throwaway repos."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from generator.config import Config
from generator.model import Extraction
from generator.pipeline import extract_upstream
from generator.upstream import open_source

DEFAULT_VERSION = "0.5.23"
REPO = Path(__file__).resolve().parent.parent
# What a build writes into its content folder: a test that builds without `--content` would
# rewrite the repository's own ledger, and CI's real build after the tests would publish it.
HISTORY_FILES = ("content/ledger", "content/upstream.json", "content/changes", "content/changes.jsonl")


def _history_snapshot() -> dict[Path, bytes]:
    files = {}
    for name in HISTORY_FILES:
        path = REPO / name
        for file in sorted(path.rglob("*")) if path.is_dir() else [path] if path.exists() else []:
            if file.is_file():
                files[file] = file.read_bytes()
    return files


@pytest.fixture(scope="session", autouse=True)
def repository_history_untouched():
    """Fail the run, and put the files back, if any test changed the repository's ledger."""
    before = _history_snapshot()
    yield
    after = _history_snapshot()
    if after != before:
        for path in set(after) - set(before):
            path.unlink()
        for path, data in before.items():
            path.write_bytes(data)
        changed = sorted(str(p.relative_to(REPO)) for p in set(before) | set(after) if before.get(p) != after.get(p))
        pytest.fail(f"a test wrote the repository's own history files (restored): {', '.join(changed[:5])}")


def test_cache_dir() -> Path:
    """Where tests keep downloads and parsed blobs: $ERRORKB_TEST_CACHE or the user cache."""
    return Path(os.environ.get("ERRORKB_TEST_CACHE") or Config().cache_dir)


_extractions: dict[str, Extraction] = {}


def real_extraction(version: str = DEFAULT_VERSION) -> Extraction:
    """SGLang `version` from the package index, extracted once per test session."""
    if version not in _extractions:
        source = open_source(f"pypi:sglang=={version}", Config(), test_cache_dir())
        _extractions[version] = extract_upstream(source, test_cache_dir())
    return _extractions[version]


@pytest.fixture(scope="session")
def sglang() -> Extraction:
    """The default release, extracted (cold on a fresh machine, from the cache after)."""
    return real_extraction()


def make_repo(root: Path, commits: list[dict[str, str | None]]) -> list[str]:
    """A git repo at `root` with one commit per dict of {path: text} (None deletes the path);
    returns the commit shas in order. Dates are fixed so runs are reproducible."""
    root.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    shas = []
    for number, files in enumerate(commits):
        for path, text in files.items():
            target = root / path
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text))
        date = f"2026-01-{number + 1:02d}T12:00:00+00:00"
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
        subprocess.run(
            ["git", "-C", str(root), "commit", "-q", "--allow-empty", "-m", f"commit {number}"],
            check=True,
            env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
        shas.append(sha.stdout.strip())
    return shas


def reviewed(content: Path, name: str, family: bool = False) -> None:
    """An independent review scoring the entry (or family) `name` 3, as `check` requires of
    everything curated before it is published."""
    folder, key = ("family-reviews", "family") if family else ("reviews", "id")
    (content / folder).mkdir(parents=True, exist_ok=True)
    (content / folder / f"{name}.yaml").write_text(
        f'{key}: "{name}"\nscore: 3\nreviewer: "tests"\nreasons:\n  - "tests/conftest.py:1: written for the test"\nproblems: []\n'
    )
