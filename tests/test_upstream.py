"""Upstream sources: git repositories at a revision and release archives from the index."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import zipfile

import pytest

from generator.config import Config
from generator.errors import SourceError
from generator.upstream import GitSource, PypiSource, blob_sha, choose_release, open_source
from tests.conftest import make_repo


def test_blob_sha_is_git_s(tmp_path):
    data = b"raise ValueError('x')\n"
    (tmp_path / "f.py").write_bytes(data)
    expected = subprocess.run(["git", "hash-object", str(tmp_path / "f.py")], capture_output=True, text=True)
    assert blob_sha(data) == expected.stdout.strip()


def test_git_source_reads_a_past_revision_without_a_work_tree(tmp_path):
    first, second = make_repo(
        tmp_path / "up",
        [
            {"python/sglang/a.py": "raise ValueError('one')\n", "docs/x.py": "raise E('not in package')\n"},
            {"python/sglang/a.py": "raise ValueError('two')\n", "python/sglang/sub/b.py": "assert x\n"},
        ],
    )
    source = open_source(f"git:{tmp_path / 'up'}@{first}", Config(), tmp_path / "cache")
    assert [f.path for f in source.files()] == ["python/sglang/a.py"]
    assert source.read(source.files()[0]) == b"raise ValueError('one')\n"
    assert source.upstream.revision == first
    assert source.upstream.date == "2026-01-01T12:00:00Z"
    later = open_source(f"git:{tmp_path / 'up'}@main", Config(), tmp_path / "cache")
    assert [f.path for f in later.files()] == ["python/sglang/a.py", "python/sglang/sub/b.py"]
    assert later.upstream.commit == second


def test_git_remote_is_cloned_bare_once_then_fetched(tmp_path):
    _, second = make_repo(tmp_path / "up", [{"python/sglang/a.py": "assert a\n"}, {"python/sglang/a.py": "assert b\n"}])
    remote = f"file://{tmp_path / 'up'}"
    source = GitSource(remote, "main~1", Config(), tmp_path / "cache")
    [clone] = (tmp_path / "cache" / "git").iterdir()
    assert (clone / "HEAD").exists() and not (clone / "python").exists()
    assert source.read(source.files()[0]) == b"assert a\n"
    make_repo(tmp_path / "up", [{"python/sglang/a.py": "assert c\n"}])
    newer = GitSource(remote, "main", Config(), tmp_path / "cache")
    assert newer.read(newer.files()[0]) == b"assert c\n"
    assert newer.upstream.commit != second


@pytest.mark.parametrize(
    "spec, message",
    [
        pytest.param("svn:whatever", "unknown form", id="unknown-form"),
        pytest.param("pypi:sglang", "expected pypi:<name>==<version>", id="pypi-without-version"),
        pytest.param("git:/nowhere/at/all@main", "not a git repository", id="missing-repo"),
        pytest.param("git:/tmp", "expected git:<path-or-url>@<revision>", id="git-without-revision"),
    ],
)
def test_bad_source_specs_say_what_is_wrong(spec, message, tmp_path):
    with pytest.raises(SourceError, match=message):
        open_source(spec, Config(), tmp_path)


def test_missing_revision_and_empty_repo(tmp_path):
    make_repo(tmp_path / "up", [{"README.md": "no python here\n"}])
    with pytest.raises(SourceError, match="no such revision"):
        open_source(f"git:{tmp_path / 'up'}@v9.9.9", Config(), tmp_path)
    with pytest.raises(SourceError, match="no Python files under python/sglang/"):
        open_source(f"git:{tmp_path / 'up'}@main", Config(), tmp_path)


def test_release_choice_is_the_same_on_every_machine():
    files = [
        {"filename": "sglang-1.0-cp312-cp312-manylinux_2_34_x86_64.whl", "url": "u2", "hashes": {"sha256": "b"},
         "upload-time": "2026-10-30T01:34:45Z"},
        {"filename": "sglang-1.0-cp311-cp311-manylinux_2_34_x86_64.whl", "url": "u1", "hashes": {"sha256": "a"},
         "upload-time": "2026-10-30T01:34:37.123Z"},
        {"filename": "sglang-1.0.1-py3-none-any.whl", "url": "x", "hashes": {"sha256": "c"}},
    ]
    release = choose_release(files, "sglang", "1.0")
    assert (release.filename, release.date) == ("sglang-1.0-cp311-cp311-manylinux_2_34_x86_64.whl", "2026-10-30T01:34:37Z")
    sdist = {"filename": "sglang-1.0.tar.gz", "url": "s", "hashes": {"sha256": "d"}, "upload-time": "2026-10-29T00:00:00Z"}
    assert choose_release(files + [sdist], "sglang", "1.0").filename == "sglang-1.0.tar.gz"
    assert choose_release(files, "sglang", "2.0") is None


def _wheel(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _sdist(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _serve_release(tmp_path, filename: str, data: bytes, sha256: str | None = None):
    """A cached index record pointing at a file:// archive, as if the index had been asked."""
    archive = tmp_path / "index" / filename
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    record = tmp_path / "cache" / "pypi" / "sglang-1.0.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({
        "filename": filename, "url": archive.as_uri(),
        "sha256": sha256 or hashlib.sha256(data).hexdigest(), "date": "2026-10-30T01:34:37Z",
    }))


@pytest.mark.parametrize(
    "filename, make",
    [
        pytest.param("sglang-1.0-py3-none-any.whl", _wheel, id="wheel"),
        pytest.param("sglang-1.0.tar.gz", _sdist, id="sdist"),
    ],
)
def test_release_maps_package_onto_upstream_layout(tmp_path, filename, make):
    prefix = "" if filename.endswith(".whl") else "sglang-1.0/"
    data = make({
        f"{prefix}sglang/__init__.py": b"",
        f"{prefix}sglang/srt/server_args.py": b"raise ValueError('x')\n",
        f"{prefix}sglang/srt/data.json": b"{}",
        f"{prefix}setup.py": b"raise SystemExit\n",
    })
    _serve_release(tmp_path, filename, data)
    source = PypiSource("sglang", "1.0", Config(), tmp_path / "cache")
    assert [f.path for f in source.files()] == ["python/sglang/__init__.py", "python/sglang/srt/server_args.py"]
    assert source.upstream.revision == "v1.0"
    assert source.upstream.url("python/sglang/srt/server_args.py", 1) == (
        "https://github.com/sgl-project/sglang/blob/v1.0/python/sglang/srt/server_args.py#L1"
    )
    assert source.files()[1].blob_sha == blob_sha(b"raise ValueError('x')\n")


def test_corrupt_download_is_refused(tmp_path):
    _serve_release(tmp_path, "sglang-1.0-py3-none-any.whl", _wheel({"sglang/__init__.py": b""}), sha256="0" * 64)
    with pytest.raises(SourceError, match="corrupt download: sha256 does not match the index"):
        PypiSource("sglang", "1.0", Config(), tmp_path / "cache")
