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
