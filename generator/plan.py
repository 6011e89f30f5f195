"""Plan: which pages a build must render, and whether it must build at all.

`BuildStamp` digests everything a build reads: when it equals the last build's into the same
folder, the site there is already what the build would write. `PageManifest` records, per
output folder, a digest of each error page's article and of every file written; a page whose
digest did not change is not rendered again, and a file the spare tree holds as it is is not
looked for in the site.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import pickle
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from generator import history, render
from generator.files import read_cache, write_cache
from generator.highlight import excerpter_version
from generator.model import Article, BuildResult, Inputs, Related, Upstream
from generator.pipeline import extractor_version
from generator.publish import FILE_DIGEST, reuses_spare, spare_of
from generator.upstream import Source

# The modules whose code shapes an error's page besides the templates and the renderer (which
# `render.templates_digest` covers): another version of any of them, and every page is made again.
_PAGE_MODULES = ("api", "content", "derive", "model", "articles", "pages", "plan")


class BuildStamp:
    """A digest of everything a build reads: errorkb's code and templates, every upstream
    blob sha, every file under `content/`, the ledger, the changes and the settings. When it
    equals the last build's into the same folder, and that folder is still there, the site
    is already what this build would write and nothing is done."""

    def __init__(self, inputs: Inputs, source: Source) -> None:
        key = hashlib.sha256(str(inputs.out.absolute()).encode()).hexdigest()[:16]
        self.path = inputs.cache_dir / "builds" / f"{key}.pickle"
        self.out = inputs.out
        self._inputs, self._source = inputs, source
        self.digest = self._digest()

    def _digest(self) -> str:
        inputs, source = self._inputs, self._source
        digest = hashlib.sha256(pickle.dumps((inputs, source.upstream)))
        package = Path(__file__).resolve().parent
        for folder in (package, render.TEMPLATES, inputs.content):
            for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
                if path.is_file() and "__pycache__" not in path.parts:
                    digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
        for file in source.files():
            digest.update(f"{file.path}\0{file.blob_sha}\n".encode())
        return digest.hexdigest()

    def previous(self) -> BuildResult | None:
        stored = read_cache(self.path, tuple)
        if stored is None or len(stored) != 2 or not isinstance(stored[1], BuildResult):
            return None
        digest, result = stored
        if digest != self.digest or not (self.out / "index.html").is_file():
            return None
        return replace(result, written=0)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def save(self, result: BuildResult) -> None:
        """Remember this build, digesting the inputs again: the build itself just wrote the
        ledger into the content folder, and the next build will read that ledger."""
        self.digest = self._digest()
        write_cache(self.path, pickle.dumps((self.digest, result)))


class PageManifest:
    """What each error page was rendered from in the last build into `out`: a digest of its
    article per id, under a salt of everything else a page depends on (templates, renderer,
    highlighter, site settings). A page whose digest is unchanged is not rendered again.

    A page's sites, and its template and snippets and docstrings, which are read from its sites,
    enter the digest as where each site is: path, lines and the blob sha of its file. A site is
    a pure function of those and of the extractor, as a snippet is of its site and the
    highlighter (both in the salt); pickling 28,000 sites would cost more than the rest of
    the digest. So the digest can be made before snippets are read (`page_excerpts`, `joined`). The
    build's own revision is in neither: a page names the revision its article is pinned to.
    Each location's route (phase and callers, from other files) enters it whole.
    """

    def __init__(self, cache_dir: Path, out: Path, info: render.OutputInfo) -> None:
        key = hashlib.sha256(str(out.absolute()).encode()).hexdigest()[:16]
        self.path = cache_dir / "pages" / f"{key}.json"
        self.out = out
        salt = hashlib.sha256(render.templates_digest().encode())
        salt.update(excerpter_version().encode())
        salt.update(extractor_version().encode())
        for module in _PAGE_MODULES:
            salt.update(Path(__file__).with_name(f"{module}.py").read_bytes())
        salt.update(pickle.dumps((info.upstream.repo, info.base_url, info.report_url)))
        self.salt = salt.hexdigest()
        self._fallback = info.upstream
        self._record: dict | None = None

    def _last(self) -> dict:
        """The last build's record, read once; empty when there is none or it is unreadable."""
        if self._record is None:
            try:
                record = json.loads(self.path.read_bytes())
                self._record = record if isinstance(record, dict) else {}
            except (OSError, ValueError):
                self._record = {}
        return self._record

    def digests(self, articles: tuple[Article, ...], blobs: Mapping[str, str]) -> dict[str, str]:
        digests = {}
        for article in articles:
            places = history.places((location.site for location in article.locations), blobs)
            upstream = _upstream_fields(article.upstream or self._fallback)
            routes = tuple(location.route for location in article.locations)
            payload = pickle.dumps((places, routes, _digested(article), tuple(map(_related_fields, article.related)), upstream), protocol=5)
            digests[article.id] = hashlib.sha256(payload).hexdigest()[:32]
        return digests

    def unchanged(self, digests: Mapping[str, str], hashes: Mapping[str, str] | None = None, spare: Mapping[str, str] | None = None) -> frozenset[str]:
        """Ids whose page and document the output folder already holds as this build would
        write them. Given the digests of the site's files (`file_hashes`) and of the spare
        tree's (`spare_hashes`), a file the spare holds as the site does is not looked for in
        the site: that tree, brought up to date, becomes the new site (`publish.publish`)."""
        previous = self._last()
        if previous.get("salt") != self.salt or not isinstance(previous.get("pages"), dict):
            return frozenset()
        pages = previous["pages"]
        held = self.holding(hashes or {}, spare)
        return frozenset(
            error
            for error, digest in digests.items()
            if pages.get(error) == digest and held(f"errors/{error}/index.html") and held(f"api/errors/{error}.json")
        )

    def holding(self, hashes: Mapping[str, str], spare: Mapping[str, str] | None) -> Callable[[str], bool]:
        """Whether the output folder holds a file, by path, given the digests of the site's
        files (`file_hashes`) and of the spare tree's (`spare_hashes`): a file the spare holds
        as the site does is not looked for in the site, since that tree, brought up to date,
        becomes the new site (`publish.publish`)."""
        kept = spare if reuses_spare(self.out, hashes, spare) else {}
        # Plain strings: pathlib's objects cost more than the 54,000 stat calls themselves.
        out = str(self.out)

        def held(relative: str) -> bool:
            digest = hashes.get(relative)
            return (digest is not None and kept.get(relative) == digest) or os.path.isfile(f"{out}/{relative}")

        return held

    def file_hashes(self) -> dict[str, str]:
        """The digest of every file the last build wrote into `out`, by path."""
        record = self._last()
        if record.get("file_digest") != FILE_DIGEST:
            return {}
        try:
            return dict(record["files"])
        except (KeyError, TypeError, ValueError):
            return {}

    def spare_hashes(self) -> dict[str, str] | None:
        """The digest of every file of the spare tree the last build kept (`spare_of`), by path;
        None when there is none, or the folder there is not the one the last build left."""
        try:
            record = self._last()
            if record.get("file_digest") != FILE_DIGEST:
                return None
            files, spare = record["files"], record["spare"]
            folder = os.stat(spare_of(self.out.absolute()))
            if spare is None or spare["folder"] != [folder.st_dev, folder.st_ino]:
                return None
            hashes = {**files, **spare["differs"]}
            for path in spare["absent"]:
                del hashes[path]
            return hashes
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self._record = {}

    def save(self, digests: Mapping[str, str], hashes: Mapping[str, str], spare: Mapping[str, str] | None = None) -> None:
        """Record this build's pages and files, and the spare tree as what differs from them."""
        record = {"salt": self.salt, "pages": digests, "file_digest": FILE_DIGEST, "files": hashes, "spare": None}
        try:
            folder = os.stat(spare_of(self.out.absolute())) if spare is not None else None
        except OSError:
            folder = None
        if spare is not None and folder is not None:
            record["spare"] = {
                "folder": [folder.st_dev, folder.st_ino],
                "differs": {path: digest for path, digest in spare.items() if hashes.get(path) != digest},
                "absent": sorted(hashes.keys() - spare.keys()),
            }
        write_cache(self.path, json.dumps(record, sort_keys=True).encode())


# Every field of an article but its locations (their sites' places and their routes are
# digested apart: see `PageManifest`), and those
# digested as plain tuples of their fields: pickling 130,000 records one by one costs more.
_digested = operator.attrgetter(
    *(field.name for field in fields(Article) if field.name not in ("locations", "template", "upstream", "related"))
)
_related_fields = operator.attrgetter(*(field.name for field in fields(Related)))
_upstream_fields = operator.attrgetter(*(field.name for field in fields(Upstream)))
