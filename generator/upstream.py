"""Upstream sources: a git repository at a revision, or a release from the package index (and
the list of a project's releases there, `release_versions`).

This is the only module that runs git or downloads anything. Everything else receives
`SourceFile` records (upstream path and git blob sha) and reads their bytes through
`Source.read`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tarfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from generator.config import Config
from generator.errors import DownloadError, SourceError
from generator.files import write_atomic
from generator.model import SourceFile, Upstream

_PYPI_SPEC = re.compile(r"pypi:(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[A-Za-z0-9_.!+\-]+)")


def blob_sha(data: bytes) -> str:
    """The git blob sha of some bytes, so every source keys the cache the same way."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Source:
    """Upstream at one revision: its identity, its Python files, and their bytes."""

    upstream: Upstream

    def files(self) -> tuple[SourceFile, ...]:
        raise NotImplementedError

    def read(self, file: SourceFile) -> bytes:
        raise NotImplementedError


class ReadSource(Source):
    """The files at some paths of a source, read already: what a forked process reads, since
    it must not share the git reader of the process it was forked from."""

    def __init__(self, source: Source, paths: Iterable[str]) -> None:
        wanted = set(paths)
        self.upstream = source.upstream
        self._files = tuple(file for file in source.files() if file.path in wanted)
        self._texts = {file.path: source.read(file) for file in self._files}

    def files(self) -> tuple[SourceFile, ...]:
        return self._files

    def read(self, file: SourceFile) -> bytes:
        return self._texts[file.path]


def open_source(spec: str, config: Config, cache_dir: Path) -> Source:
    """The source a `--source` spec names: `pypi:sglang==0.5.23` or `git:<path-or-url>@<rev>`."""
    if spec.startswith("pypi:"):
        match = _PYPI_SPEC.fullmatch(spec)
        if not match:
            raise SourceError(f"source {spec!r}: expected pypi:<name>==<version>")
        return PypiSource(match["name"], match["version"], config, cache_dir)
    if spec.startswith("git:"):
        location, _, revision = spec[4:].rpartition("@")
        if not location or not revision:
            raise SourceError(f"source {spec!r}: expected git:<path-or-url>@<revision>")
        return GitSource(location, revision, config, cache_dir)
    raise SourceError(f"source {spec!r}: unknown form; use pypi:<name>==<version> or git:<path-or-url>@<revision>")


# -- The package index ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Release:
    """The archive errorkb reads for a release, as the index lists it."""

    filename: str
    url: str
    sha256: str
    date: str


class PypiSource(Source):
    """A released distribution: downloaded once into the cache, verified against the index's
    sha256 on every use, its `<package>/` tree mapped to upstream's `<prefix><package>/`."""

    def __init__(self, name: str, version: str, config: Config, cache_dir: Path) -> None:
        self._name, self._version, self._config = name, version, config
        self._folder = cache_dir / "pypi"
        release = self._release()
        archive = self._archive(release)
        self._texts = _read_archive(archive, config)
        if not self._texts:
            raise SourceError(f"{release.filename}: no Python files under {config.package}/")
        self.upstream = Upstream(
            repo=config.repo,
            source=f"pypi:{name}=={version}",
            revision=f"v{version}",
            date=release.date,
        )
        self._files = tuple(SourceFile(path, blob_sha(data)) for path, data in sorted(self._texts.items()))

    def files(self) -> tuple[SourceFile, ...]:
        return self._files

    def read(self, file: SourceFile) -> bytes:
        return self._texts[file.path]

    def _release(self) -> Release:
        """The release's archive as the index lists it; asked once, then kept in the cache."""
        record = self._folder / f"{self._name}-{self._version}.json"
        try:
            return Release(**json.loads(record.read_text()))
        except (OSError, ValueError, TypeError):
            pass
        url, index = _read_index(self._name, self._config, f"pypi:{self._name}=={self._version}")
        release = choose_release(index.get("files", []), self._name, self._version)
        if release is None:
            raise SourceError(f"pypi:{self._name}=={self._version}: no such release on {url}")
        write_atomic(record, json.dumps(_asdict(release)).encode())
        return release

    def _archive(self, release: Release) -> Path:
        path = self._folder / release.filename
        if path.exists() and _sha256(path) == release.sha256:
            return path
        try:
            with urllib.request.urlopen(release.url, timeout=300) as response:
                data = response.read()
        except (urllib.error.URLError, OSError) as error:
            raise DownloadError(f"{release.filename}: download failed: {error}") from None
        if hashlib.sha256(data).hexdigest() != release.sha256:
            raise DownloadError(f"{release.filename}: corrupt download: sha256 does not match the index")
        write_atomic(path, data)
        return path


def _read_index(name: str, config: Config, asked: str) -> tuple[str, dict]:
    """The index's JSON page of a project (PEP 691): its files and, from API 1.1, its versions."""
    url = f"{config.index_url.rstrip('/')}/{name}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return url, json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise DownloadError(f"{asked}: cannot read the index at {url}: {error}") from None


def release_versions(name: str, config: Config, cache_dir: Path, wanted: str | None = None) -> tuple[str, ...]:
    """Every version of `name` the index lists, oldest first (PEP 440 order). The listing is
    kept in the cache (`pypi/<name>-index.json`) and asked again only when it lacks `wanted`,
    so a backfill that resumes asks nothing. The archive of each version that has one is
    recorded as `PypiSource` would record it, so opening each release asks the index nothing."""
    folder = cache_dir / "pypi"
    listing = folder / f"{name}-index.json"
    try:
        index = json.loads(listing.read_bytes())
        versions = _listed_versions(index)
    except (OSError, ValueError, TypeError, AttributeError):
        index, versions = None, None
    if versions is None or (wanted is not None and wanted not in versions):
        _, index = _read_index(name, config, f"pypi:{name}")
        versions = _listed_versions(index)
        if versions is None:
            raise SourceError(f"pypi:{name}: the index's answer lists no files")
        write_atomic(listing, json.dumps(index, sort_keys=True).encode())
    for version in versions:
        record = folder / f"{name}-{version}.json"
        if not record.exists() and (release := choose_release(index["files"], name, version)) is not None:
            write_atomic(record, json.dumps(_asdict(release)).encode())
    return tuple(sorted(versions, key=version_key))


def _listed_versions(index: dict) -> set[str] | None:
    """The versions of an index page: its `versions` (API 1.1), else those its files name."""
    files = index.get("files")
    if not isinstance(files, list):
        return None
    versions = index.get("versions")
    if isinstance(versions, list):
        return set(versions)
    return {v for entry in files if (v := _archive_version(entry.get("filename", ""))) is not None}


_VERSION = re.compile(
    r"v?(?P<release>\d+(?:\.\d+)*)(?:[-_.]?(?P<pre>a|b|rc|alpha|beta|c)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?(?:[-_.]?dev[-_.]?(?P<dev>\d*))?(?:\+[a-z0-9.]+)?",
    re.I,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


@functools.lru_cache(maxsize=4096)
def version_key(version: str) -> tuple:
    """PEP 440 order for the versions a project publishes (`0.5.0rc1` < `0.5.0` < `0.5.0.post1`);
    a version that is not PEP 440 sorts after all others, by its text. Kept per version: a
    build sorts the 47,000 changes of some 120 releases by it."""
    match = _VERSION.fullmatch(version.strip())
    if match is None:
        return (1, (), (), 0, 0, version)
    release = tuple(int(part) for part in match["release"].split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    if match["pre"]:
        pre = (0, _PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    elif match["dev"] is not None and match["post"] is None:
        pre = (-1,)  # 1.0.dev1 comes before 1.0a1
    else:
        pre = (1,)
    post = -1 if match["post"] is None else int(match["post"] or 0)
    dev = float("inf") if match["dev"] is None else int(match["dev"] or 0)
    return (0, release, pre, post, dev, version)


def choose_release(files: list[dict], name: str, version: str) -> Release | None:
    """The archive to read, chosen the same way on every machine: the sdist if the release
    has one, else a pure-Python wheel, else the first wheel by name. The date is the
    release's: the earliest upload time of all its files."""
    candidates = [
        entry
        for entry in files
        if _archive_version(entry.get("filename", "")) == version and not entry.get("yanked")
    ]
    if not candidates:
        return None

    def preference(entry: dict) -> tuple[int, str]:
        filename = entry["filename"]
        rank = 0 if filename.endswith(".tar.gz") else 1 if filename.endswith("-none-any.whl") else 2
        return rank, filename

    chosen = min(candidates, key=preference)
    dates = sorted(e["upload-time"] for e in candidates if e.get("upload-time"))
    date = dates[0][:19] + "Z" if dates else ""
    return Release(chosen["filename"], chosen["url"], chosen["hashes"]["sha256"], date)


def _archive_version(filename: str) -> str | None:
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    if filename.endswith(".tar.gz"):
        return filename[: -len(".tar.gz")].rpartition("-")[2]
    return None


def _asdict(release: Release) -> dict:
    return {"filename": release.filename, "url": release.url, "sha256": release.sha256, "date": release.date}


def _read_archive(path: Path, config: Config) -> dict[str, bytes]:
    """Every `.py` file of the package in a wheel or sdist, keyed by its upstream path."""
    marker = f"{config.package}/__init__.py"
    texts: dict[str, bytes] = {}
    try:
        if path.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
                root = _package_root(names, marker)
                for name in names:
                    if name.startswith(root) and name.endswith(".py"):
                        texts[config.path_prefix + name[len(root) - len(config.package) - 1 :]] = archive.read(name)
        else:
            # Read as a stream, in one pass: listing the members first and then reading each
            # went through the compressed archive twice (bench/README.md).
            with tarfile.open(path, mode="r|*") as archive:
                found = {member.name: archive.extractfile(member).read() for member in archive if member.isfile() and member.name.endswith(".py")}
            root = _package_root(list(found), marker)
            for name, data in found.items():
                if name.startswith(root):
                    texts[config.path_prefix + name[len(root) - len(config.package) - 1 :]] = data
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
        raise SourceError(f"{path}: unreadable archive: {error}") from None
    return texts


def _package_root(names: list[str], marker: str) -> str:
    """The archive folder holding the package: `sglang/` in a wheel, `sglang-1.0/sglang/` in
    an sdist (the shallowest one)."""
    roots = [n[: -len("__init__.py")] for n in names if n == marker or n.endswith("/" + marker)]
    if not roots:
        raise SourceError(f"archive has no {marker}")
    return min(roots, key=lambda r: (r.count("/"), r))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# -- git -----------------------------------------------------------------------------------------


class GitSource(Source):
    """A git repository at a revision. A local path is opened where it is; a remote is cloned
    bare into the cache once and fetched on later runs. Blobs are read from the object
    database by sha: no work tree is checked out."""

    def __init__(self, location: str, revision: str, config: Config, cache_dir: Path) -> None:
        import git  # gitpython is slow to import; only git sources pay for it

        self._git = git
        self._repo = self._open(location, cache_dir)
        try:
            commit = self._repo.commit(revision)
        except (git.BadName, ValueError, git.GitCommandError) as error:
            raise SourceError(f"git:{location}@{revision}: no such revision ({_first_line(error)})") from None
        root = config.package_root
        # One `git ls-tree` call: walking the tree object by object in Python costs more.
        listing = self._repo.git.ls_tree("-r", "-z", "--full-tree", commit.hexsha, "--", root.rstrip("/") or ".")
        files = []
        for line in listing.split("\0"):
            info, _, path = line.partition("\t")
            mode_type_sha = info.split()
            if len(mode_type_sha) == 3 and mode_type_sha[1] == "blob" and path.endswith(".py") and path.startswith(root):
                files.append(SourceFile(path, mode_type_sha[2]))
        if not files:
            raise SourceError(f"git:{location}@{revision}: no Python files under {root}")
        self._files = tuple(sorted(files, key=lambda f: f.path))
        date = commit.committed_datetime.astimezone(_utc()).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.upstream = Upstream(
            repo=config.repo, source=f"git:{location}@{revision}", revision=commit.hexsha, date=date, commit=commit.hexsha
        )

    def files(self) -> tuple[SourceFile, ...]:
        return self._files

    def read(self, file: SourceFile) -> bytes:
        return self._repo.odb.stream(bytes.fromhex(file.blob_sha)).read()

    def _open(self, location: str, cache_dir: Path):
        git = self._git
        if _is_remote(location):
            clone = cache_dir / "git" / (hashlib.sha256(location.encode()).hexdigest()[:16] + ".git")
            try:
                if clone.exists():
                    repo = git.Repo(clone)
                    repo.git.fetch("origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", "--prune")
                    return repo
                clone.parent.mkdir(parents=True, exist_ok=True)
                return git.Repo.clone_from(location, clone, bare=True)
            except git.GitCommandError as error:
                raise SourceError(f"git:{location}: cannot clone or fetch ({_first_line(error)})") from None
        try:
            return git.Repo(location)
        except (git.NoSuchPathError, git.InvalidGitRepositoryError):
            raise SourceError(f"git:{location}: not a git repository") from None


def _is_remote(location: str) -> bool:
    return "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location) is not None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[-1].strip() if text else type(error).__name__


def _utc():
    from datetime import timezone

    return timezone.utc
