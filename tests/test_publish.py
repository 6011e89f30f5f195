"""`publish` bringing the spare tree (the site before last, kept at `.<out>.spare`) up to date
and swapping it in: after every build the output folder holds exactly the new site, unchanged
files are the current site's inodes (same mtime), changed files are new inodes and the old
site's files are never written through, the site swapped out is kept as the next spare, and a
build that fails leaves the previous site whole. Then the same through `build` on a small git
repo, and `PageManifest` forgetting a spare tree that is not the one it recorded.

Everything runs on small trees in `tmp_path`: no SGLang download.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from generator import publish as publish_module
from generator.build import build, inputs_of
from generator.plan import PageManifest
from generator.publish import Written, file_digest, publish, spare_of
from generator.errors import BuildError
from generator.model import Upstream
from generator.render import OutputInfo
from tests.conftest import make_repo
from tests.test_build import CODE, config


def digest(data: bytes) -> str:
    return file_digest(data)


def digests(site: dict[str, bytes]) -> dict[str, str]:
    return {path: digest(data) for path, data in site.items()}


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def empty_folders(folder: Path) -> list[str]:
    return [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_dir() and not any(p.iterdir())]


def staging(out: Path) -> list[Path]:
    """The `.<out>.tmp-*` folders beside `out`: a new tree's name, never left once write_site
    returns (an old site swapped out to it is renamed `.<out>.old-*` before its removal)."""
    return list(out.parent.glob(f".{out.name}.tmp-*"))


def differing(site: dict[str, bytes], before: dict[str, bytes]) -> int:
    """How many files of `site` a build must write: new paths, or bytes unlike the site before."""
    return sum(1 for path, data in site.items() if before.get(path) != data)


# Each site differs from the one before by files added, removed, changed and changed back, a
# file that becomes a folder of the same name and back, and nested folders that come and go.
SITES: list[dict[str, bytes]] = [
    {
        "index.html": b"home 1",
        "a.txt": b"a version 1",
        "dir/b.txt": b"b",
        "dir/sub/c.txt": b"c",
        "gone.txt": b"gone for a while",
        "g": b"g is a file",
        "lonely/e.txt": b"the only file of its folder",
        "static/style.css": b"body {}",
    },
    {
        "index.html": b"home 2",
        "a.txt": b"a version 2",
        "dir/b.txt": b"b",
        "dir/sub/c.txt": b"c",
        "g/inner.txt": b"g is a folder",
        "f/x.txt": b"f is a folder",
        "new/deep/nested/d.txt": b"d",
        "static/style.css": b"body {}",
    },
    {
        "index.html": b"home 3",
        "a.txt": b"a version 1",
        "dir/b.txt": b"b",
        "gone.txt": b"gone for a while",
        "g": b"g is a file",
        "f": b"f is a file",
        "new/deep/nested/d.txt": b"d",
        "new/deep/other/e.txt": b"e",
        "static/style.css": b"body {}",
    },
    {
        "index.html": b"home 3",
        "a.txt": b"a version 1",
        "dir/b.txt": b"b changed",
        "gone.txt": b"gone for a while",
        "g/inner.txt": b"g is a folder",
        "f/x.txt": b"f is a folder again",
        "f/y/z.txt": b"z",
        "static/style.css": b"body {}",
    },
    {
        "index.html": b"home 1",
        "a.txt": b"a version 1",
        "dir/b.txt": b"b changed",
        "dir/sub/c.txt": b"c is back",
        "g/inner.txt": b"g is a folder",
        "f/x.txt": b"f is a folder again",
        "f/y/z.txt": b"z",
        "static/style.css": b"body {}",
        "static/app.js": b"js",
    },
    {
        "index.html": b"home 1",
        "a.txt": b"a version 1",
        "dir/b.txt": b"b changed",
        "dir/sub/c.txt": b"c is back",
        "g/inner.txt": b"g is a folder",
        "f/x.txt": b"f is a folder again",
        "f/y/z.txt": b"z",
        "static/style.css": b"body {}",
        "static/app.js": b"js",
    },
]


class Chain:
    """Builds into one folder the way `build` chains them: each passes the last `Written.hashes`
    as `previous` and its `Written.spare` as `spare`, and is checked whole after it runs."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.site: dict[str, bytes] = {}
        self.hashes: dict[str, str] | None = None
        self.spare: dict[str, str] | None = None
        self.count = 0
        # Hard links to every file of every site so far, with the bytes it had: proof that no
        # old inode is written through, and that no inode number is reused while checking.
        self.witnesses: list[tuple[Path, bytes]] = []
        self.reused: list[bool] = []

    def files(self, site: dict[str, bytes], none_for_unchanged: bool = False):
        # Half the builds yield in reverse order: folders must not depend on the order.
        paths = sorted(site, reverse=self.count % 2 == 1)
        for path in paths:
            unchanged = self.site.get(path) == site[path]
            yield path, None if none_for_unchanged and unchanged else site[path]

    def snapshot(self) -> dict[str, os.stat_result]:
        """Age every file of the current site, keep a witness link to it and return its stat."""
        stats = {}
        witness = self.out.parent / "witness" / str(self.count)
        for path, data in self.site.items():
            file = self.out / path
            os.utime(file, (1_000_000 + self.count, 1_000_000 + self.count))
            link = witness / path
            link.parent.mkdir(parents=True, exist_ok=True)
            os.link(file, link)
            self.witnesses.append((link, data))
            stats[path] = file.stat()
        return stats

    def build(self, site: dict[str, bytes], none_for_unchanged: bool = False, **given) -> Written:
        previous = given.get("previous", self.hashes)
        spare = given.get("spare", self.spare)
        kept = spare_of(self.out)
        before = self.site
        stats = self.snapshot() if self.out.exists() else {}
        old_site_folder = self.out.stat().st_ino if self.out.exists() else None
        spare_folder = kept.stat().st_ino if kept.is_dir() else None
        # Held open, so that a spare folder removed by the build keeps its inode number: a new
        # folder given that number would look like the spare reused.
        held = os.open(kept, os.O_RDONLY) if spare_folder is not None else None
        try:
            written = publish(self.files(site, none_for_unchanged), self.out, previous, spare)
            self._check(site, before, stats, written, previous, kept, old_site_folder, spare_folder)
        finally:
            if held is not None:
                os.close(held)
        return written

    def _check(self, site, before, stats, written, previous, kept, old_site_folder, spare_folder) -> None:
        self.count += 1

        assert tree(self.out) == site
        assert written.hashes == digests(site)
        assert written.total == len(site)
        assert written.written == differing(site, before)
        assert empty_folders(self.out) == []
        assert not staging(self.out)
        # Unchanged files are the current site's inodes, mtime and all; others are new inodes.
        old_inodes = {stat.st_ino for stat in stats.values()}
        for path, data in site.items():
            now = (self.out / path).stat()
            if path in before and before[path] == data:
                assert now.st_ino == stats[path].st_ino, path
                assert now.st_mtime == stats[path].st_mtime, path
            else:
                assert now.st_ino not in old_inodes, path
        for link, data in self.witnesses:
            assert link.read_bytes() == data, link
        # The site that was in `out` is the new spare, and what `Written.spare` describes.
        if previous:
            assert written.spare == digests(before)
            assert tree(kept) == before
            assert empty_folders(kept) == []
            assert kept.stat().st_ino == old_site_folder
        else:
            assert written.spare is None
        # Brought up to date in place: the spare folder itself is the new site's.
        self.reused.append(spare_folder is not None and self.out.stat().st_ino == spare_folder)
        self.site, self.hashes, self.spare = site, written.hashes, written.spare


@pytest.fixture(params=["exchange", "two renames"])
def swap(request, monkeypatch) -> str:
    """Both ways the folders trade places: renameat2's exchange, and two renames where the
    system has no exchange (`publish.exchange` says False)."""
    if request.param == "two renames":
        monkeypatch.setattr(publish_module, "exchange", lambda first, second: False)
    return request.param


def test_a_sequence_of_builds_writes_each_site_exactly(tmp_path, swap):
    chain = Chain(tmp_path / "site")
    for number, site in enumerate(SITES):
        written = chain.build(site, none_for_unchanged=number == 4)
        assert written.written == differing(site, SITES[number - 1] if number else {})
    assert chain.reused == [False, False, True, True, True, True]
    assert chain.spare == digests(SITES[-2]) and tree(spare_of(tmp_path / "site")) == SITES[-2]
    assert chain.build(SITES[-1]).written == 0
    assert chain.build(SITES[-1], none_for_unchanged=True).written == 0
    assert chain.reused[-2:] == [True, True]


def test_the_written_count_is_the_files_whose_bytes_changed(tmp_path):
    chain = Chain(tmp_path / "site")
    assert [chain.build(site).written for site in SITES] == [8, 5, 6, 4, 3, 0]


def test_unchanged_files_keep_inode_and_mtime_and_old_files_are_never_written_through(tmp_path):
    out = tmp_path / "site"
    same, changed = out / "same.html", out / "changed.html"
    first = publish([("same.html", b"same"), ("changed.html", b"old")], out)
    os.utime(same, (1000, 1000))
    inode = same.stat().st_ino
    second = publish([("same.html", b"same"), ("changed.html", b"middle")], out, first.hashes, first.spare)
    assert same.stat().st_ino == inode and same.stat().st_mtime == 1000
    # The spare tree (the first site) shares `same.html` with the site and has the old
    # `changed.html`; the third site must replace that one, not write into it.
    spare_changed = spare_of(out) / "changed.html"
    with open(changed, "rb") as current, open(spare_changed, "rb") as spare:
        current_inode, spare_inode = os.fstat(current.fileno()).st_ino, os.fstat(spare.fileno()).st_ino
        third = publish([("same.html", b"same"), ("changed.html", b"new")], out, second.hashes, second.spare)
        assert third.written == 1
        assert same.stat().st_ino == inode and same.stat().st_mtime == 1000
        assert changed.stat().st_ino not in (current_inode, spare_inode)
        assert current.read() == b"middle" and spare.read() == b"old"
    assert spare_changed.read_bytes() == b"middle" and spare_changed.stat().st_ino == current_inode
    assert (spare_of(out) / "same.html").stat().st_ino == inode
    # Given as None ("the previous build's file"), it is the same inode too.
    fourth = publish([("same.html", None), ("changed.html", None)], out, third.hashes, third.spare)
    assert fourth.written == 0 and fourth.hashes == third.hashes
    assert same.stat().st_ino == inode and same.stat().st_mtime == 1000
    assert (out / "changed.html").read_bytes() == b"new"


def test_the_spare_folder_holds_the_site_before(tmp_path):
    out = tmp_path / "site"
    chain = Chain(out)
    chain.build(SITES[0])
    assert not spare_of(out).exists()
    for number, site in enumerate(SITES[1:], 1):
        chain.build(site)
        assert spare_of(out) == tmp_path / ".site.spare"
        assert tree(spare_of(out)) == SITES[number - 1]
        assert chain.spare == digests(SITES[number - 1])


def test_a_folder_the_spare_still_holds_becomes_a_file(tmp_path):
    """The site before last (the spare) has `f/x.txt` and `g/h/i.txt`; the new site has files
    `f` and `g/h`."""
    chain = Chain(tmp_path / "site")
    chain.build({"index.html": b"1", "f/x.txt": b"x", "g/h/i.txt": b"i"})
    chain.build({"index.html": b"2", "f/x.txt": b"x", "g/h/i.txt": b"i"})
    chain.build({"index.html": b"3", "f": b"f is a file", "g/h": b"h is a file"})
    assert chain.reused[-1]
    chain.build({"index.html": b"4", "f/x.txt": b"x again", "g/h/i.txt": b"i"})


def failing_files(site: dict[str, bytes], fault: str):
    """The files of `site` with a fault after some of them were written into the spare tree."""
    for number, path in enumerate(sorted(site)):
        yield path, site[path]
        if number == len(site) // 2:
            if fault == "exception":
                raise RuntimeError("the renderer failed")
            if fault == "OSError from the files":
                raise OSError(errno.EIO, "Input/output error")
            if fault == "OSError writing":
                yield "x" * 300 + ".html", b"a name too long for the file system"


@pytest.mark.parametrize("fault", ["exception", "OSError from the files", "OSError writing", "OSError swapping"])
def test_a_failed_spare_build_leaves_the_previous_site_and_the_next_build_is_right(tmp_path, monkeypatch, fault):
    out = tmp_path / "site"
    chain = Chain(out)
    chain.build(SITES[0])
    chain.build(SITES[1])
    assert spare_of(out).is_dir()
    stats = {path: (out / path).stat() for path in SITES[1]}
    site = SITES[2]
    if fault == "OSError swapping":
        # After every file was put and every removal made: only the swap is left.
        def refuse(folder: Path, target: Path) -> bool:
            assert folder == spare_of(out).absolute() and tree(folder) == site
            raise OSError(errno.EPERM, "Operation not permitted", str(target))

        monkeypatch.setattr(publish_module, "exchange", refuse)
    if fault == "exception":
        with pytest.raises(RuntimeError, match="the renderer failed"):
            publish(failing_files(site, fault), out, chain.hashes, chain.spare)
    else:
        with pytest.raises(BuildError, match="the previous site is unchanged"):
            publish(failing_files(site, fault), out, chain.hashes, chain.spare)
    monkeypatch.undo()
    assert tree(out) == SITES[1]
    assert {path: (out / path).stat().st_ino for path in SITES[1]} == {path: stat.st_ino for path, stat in stats.items()}
    assert empty_folders(out) == []
    assert not staging(out)
    # The spare tree, half brought up to date, is not left where a spare is looked for.
    assert not spare_of(out).exists() or tree(spare_of(out)) == SITES[0]
    # As `build` does next: the manifest was cleared, so no digests and no spare.
    chain.build(site, previous={}, spare=None)
    assert not chain.reused[-1]
    assert not staging(out)
    # And the chain goes on: a fresh tree keeping the spare, then the spare brought up to date.
    chain.build(SITES[3])
    chain.build(SITES[4])
    assert chain.reused[-2:] == [False, True]


def test_a_missing_spare_folder_means_a_fresh_tree(tmp_path):
    out = tmp_path / "site"
    chain = Chain(out)
    chain.build(SITES[0])
    chain.build(SITES[1])
    shutil.rmtree(spare_of(out))
    chain.build(SITES[2])
    assert not chain.reused[-1]
    assert tree(spare_of(out)) == SITES[1]
    chain.build(SITES[3])
    assert chain.reused[-1]


def test_no_previous_digests_means_a_fresh_tree_and_no_spare(tmp_path):
    out = tmp_path / "site"
    chain = Chain(out)
    chain.build(SITES[0])
    chain.build(SITES[1])
    written = chain.build(SITES[2], previous=None)
    assert written.spare is None and not chain.reused[-1]
    assert not spare_of(out).exists()
    # With no spare to describe, the next build makes a fresh tree again.
    chain.build(SITES[3])
    assert not chain.reused[-1] and tree(spare_of(out)) == SITES[2]


def test_a_spare_path_that_is_a_file_or_a_link_is_not_reused(tmp_path):
    out = tmp_path / "site"
    chain = Chain(out)
    chain.build(SITES[0])
    chain.build(SITES[1])
    kept = spare_of(out)
    shutil.rmtree(kept)
    kept.write_bytes(b"not a folder")
    chain.build(SITES[2])
    assert not chain.reused[-1] and tree(kept) == SITES[1]
    elsewhere = tmp_path / "elsewhere"
    kept.rename(elsewhere)
    kept.symlink_to(elsewhere)
    chain.build(SITES[3])
    assert not chain.reused[-1] and not kept.is_symlink() and tree(kept) == SITES[2]
    assert tree(elsewhere) == SITES[1]


# -- Through `build` --------------------------------------------------------------------------------

# The second revision rewords one message, adds a module and drops one: pages come and go.
REWORDED = {
    "python/sglang/srt/other.py": '''
        def other(cfg):
            if cfg.kv_cache_dtype == "fp8":
                raise ValueError("fp8 KV cache needs a GPU with fp8 support")
        ''',
    "python/sglang/srt/extra.py": '''
        def extra(n):
            if n < 0:
                raise ValueError("n must not be negative")
        ''',
}


@pytest.fixture()
def revisions(tmp_path) -> tuple[Path, list[str]]:
    root = tmp_path / "upstream"
    return root, make_repo(root, [CODE, REWORDED])


def build_into(revisions, revision: int, out: Path, content: Path, cache: Path):
    root, shas = revisions
    inputs = inputs_of(config(), f"git:{root}@{shas[revision]}", out, content, cache)
    return build(config(), inputs, jobs=1)


def test_builds_of_a_b_a_b_match_fresh_builds(tmp_path, revisions):
    """Each build into `site` against a fresh build of the same revision into a new folder,
    from a copy of the content folder as it was (its ledger makes the history, hence pages)."""
    out, content, cache = tmp_path / "site", tmp_path / "content", tmp_path / "cache"
    content.mkdir()
    before: dict[str, bytes] = {}
    for step, revision in enumerate((0, 1, 0, 1)):
        reference = tmp_path / f"fresh{step}"
        shutil.copytree(content, reference / "content")
        inodes = {path: (out / path).stat().st_ino for path in before}
        spare_folder = spare_of(out).stat().st_ino if spare_of(out).is_dir() else None
        result = build_into(revisions, revision, out, content, cache)
        build_into(revisions, revision, reference / "site", reference / "content", tmp_path / "fresh-cache")
        site = tree(out)
        assert site == tree(reference / "site")
        assert result.files == len(site)
        assert result.written == differing(site, before)
        assert empty_folders(out) == []
        for path, data in site.items():
            if before.get(path) == data:
                assert (out / path).stat().st_ino == inodes[path], path
        if step >= 1:
            assert (tmp_path / ".site.spare").is_dir()
            assert tree(tmp_path / ".site.spare") == before
        # The spare tree, brought up to date: from the third build on, the first site kept.
        assert (out.stat().st_ino == spare_folder) == (step >= 2)
        assert not staging(out)
        before = site
    # The revisions differ, so each step really changed pages.
    assert tree(tmp_path / "fresh0" / "site") != tree(tmp_path / "fresh1" / "site")


def test_pages_deleted_from_the_site_come_back_from_the_spare_or_rendered_again(tmp_path):
    """A page the spare tree holds as it is is not looked for in the site (the spare becomes
    the new site); one it does not hold, changed by the last build, must be rendered again.
    Either way the site is whole."""
    third = {"python/sglang/srt/third.py": 'def third(n):\n    if n:\n        raise KeyError("third")\n'}
    revisions = (tmp_path / "upstream", make_repo(tmp_path / "upstream", [CODE, REWORDED, third]))
    out, reference = tmp_path / "site", tmp_path / "reference"
    for folder in (out.parent, reference):
        (folder / "content").mkdir(parents=True, exist_ok=True)
        build_into(revisions, 0, folder / "site", folder / "content", folder / "cache")
        first = tree(folder / "site")
        build_into(revisions, 1, folder / "site", folder / "content", folder / "cache")
    build_into(revisions, 2, reference / "site", reference / "content", reference / "cache")
    pages = [path for path in [*(out / "errors").rglob("*.html"), *(out / "api" / "errors").glob("*.json")] if path.name != "index.json"]
    # Pages of both kinds: some the spare (the first revision's site) holds as they are.
    held = [path for path in pages if first.get(path.relative_to(out).as_posix()) == path.read_bytes()]
    assert pages and held and len(held) < len(pages)
    for path in pages:
        path.unlink()
    build_into(revisions, 2, out, out.parent / "content", out.parent / "cache")
    assert tree(out) == tree(reference / "site")


@pytest.mark.parametrize("change", ["deleted", "replaced"])
def test_the_manifest_forgets_a_spare_folder_that_is_not_the_one_it_kept(tmp_path, revisions, change):
    out, content, cache = tmp_path / "site", tmp_path / "content", tmp_path / "cache"
    build_into(revisions, 0, out, content, cache)
    result = build_into(revisions, 1, out, content, cache)
    info = OutputInfo(result.upstream, config().base_url, config().report_url)
    kept = spare_of(out)
    spare = tree(kept)
    assert PageManifest(cache, out, info).file_hashes() == digests(tree(out))
    assert PageManifest(cache, out, info).spare_hashes() == digests(spare)
    if change == "deleted":
        shutil.rmtree(kept)
    else:
        # The very same files in another folder, made before the old one goes so that it
        # cannot get its inode number: only the folder's identity tells them apart.
        other = tmp_path / "other"
        shutil.copytree(kept, other)
        shutil.rmtree(kept)
        other.rename(kept)
        assert tree(kept) == spare
    assert PageManifest(cache, out, info).spare_hashes() is None
    # The next build then makes a fresh tree, and keeps a spare the manifest knows again.
    build_into(revisions, 0, out, content, cache)
    assert PageManifest(cache, out, info).spare_hashes() == digests(tree(kept))


def test_the_manifest_records_the_spare_as_what_differs_from_the_site(tmp_path):
    out = tmp_path / "site"
    upstream = Upstream("o/r", "git:x@y", "y", "2026-01-01T00:00:00Z")
    info = OutputInfo(upstream, config().base_url, config().report_url)

    def manifest() -> PageManifest:
        """As the next build makes it, reading what the last one saved."""
        return PageManifest(tmp_path / "cache", out, info)

    chain = Chain(out)
    chain.build(SITES[0])
    manifest().save({}, chain.hashes, chain.spare)
    assert chain.spare is None and manifest().spare_hashes() is None
    for site in SITES[1:4]:
        written = chain.build(site)
        manifest().save({}, written.hashes, written.spare)
        # Paths only the spare has, paths only the site has, and paths whose bytes differ.
        assert manifest().spare_hashes() == written.spare == digests(tree(spare_of(out)))
        assert manifest().file_hashes() == written.hashes
    manifest().save({}, chain.hashes, None)
    assert spare_of(out).is_dir() and manifest().spare_hashes() is None



# -- Done when it returns -----------------------------------------------------------------------------


def test_a_build_leaves_nothing_at_work_beside_its_folder(tmp_path, revisions):
    """A script may remove the output's parent folder the moment `build` returns: nothing the
    build started still writes there, whether it made a first site, swapped one in keeping
    the old one as the spare, or discarded an old site nothing described."""
    for number in range(3):
        parent = tmp_path / f"out{number}"
        content, cache = parent / "content", tmp_path / f"cache{number}"
        for step in range(number + 1):
            if number == 2 and step == 2:
                shutil.rmtree(cache)  # no manifest: the site in the folder is not trusted
            build_into(revisions, step % 2, parent / "site", content, cache)
        listing = sorted(path.name for path in parent.iterdir())
        assert listing == sorted(["site", "content", ".site.lock", *([".site.spare"] if number == 1 else [])]), listing
        shutil.rmtree(parent)
        assert not parent.exists()
