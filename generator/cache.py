"""The per-blob extraction cache: one small JSON file per git blob sha and extractor version.

Keyed by content, never by mtime: a blob that did not change is never parsed again, wherever
it moved. Entries are written atomically; an unreadable entry counts as missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from generator.files import write_cache
from generator.model import Placeholder, Site, Template


class SiteCache:
    """Sites (or the reason a file was skipped) for each blob, under `root/sites/<version>/`."""

    def __init__(self, root: Path, version: str) -> None:
        self.folder = root / "sites" / version

    def _path(self, blob_sha: str) -> Path:
        return self.folder / blob_sha[:2] / f"{blob_sha}.json"

    def holds(self, blob_sha: str) -> bool:
        """Whether the cache has an entry for the blob (readable or not: see `load`)."""
        return os.path.isfile(self._path(blob_sha))

    def load(self, blob_sha: str, path: str) -> tuple[Site, ...] | str | None:
        """The cached sites of a blob placed at `path`, the reason it was skipped, or None."""
        try:
            entry = json.loads(self._path(blob_sha).read_bytes())
            if "skipped" in entry:
                return str(entry["skipped"])
            return tuple(site_from_json(row, path) for row in entry["sites"])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def store(self, blob_sha: str, result: tuple[Site, ...] | str) -> None:
        if isinstance(result, str):
            entry = {"skipped": result}
        else:
            entry = {"sites": [site_to_json(site) for site in result]}
        write_cache(self._path(blob_sha), json.dumps(entry, separators=(",", ":")).encode())


def site_to_json(site: Site) -> list:
    """A site as a compact JSON row, without its path (a blob can sit at several paths)."""
    template = None
    if site.template is not None:
        template = [
            part if isinstance(part, str) else [part.expr, part.conversion, part.format_spec, part.equal, part.optional]
            for part in site.template.parts
        ]
    return [
        site.kind,
        site.exception,
        template,
        site.line,
        site.end_line,
        site.function,
        list(site.conditions),
        list(site.context),
        site.assert_condition,
        site.snippet_start,
        site.snippet_end,
        site.ordinal,
        site.resolved,
        site.legacy_key,
    ]


def site_from_json(row: list, path: str) -> Site:
    kind, exception, template, line, end_line, function, conditions, context, condition, start, end, ordinal, resolved, legacy = row
    if template is not None:
        template = Template(tuple(part if isinstance(part, str) else Placeholder(*part) for part in template))
    return Site(
        kind=kind,
        exception=exception,
        template=template,
        path=path,
        line=line,
        end_line=end_line,
        function=function,
        conditions=tuple(conditions),
        context=tuple(context),
        assert_condition=condition,
        snippet_start=start,
        snippet_end=end,
        ordinal=ordinal,
        resolved=resolved,
        legacy_key=legacy,
    )
