"""`errorkb build`: one upstream revision to one published site, in stages read top to bottom.

source -> extract -> group -> history -> content -> derive -> plan -> render -> publish

Each stage lives in a module of its own and hands records to the next: `upstream` (the
source), `pipeline` (extraction, cached per blob), `model.group_sites` (errors), `history` (the
ledger: moved and retired ids), `content` and `audit` (curated entries, their evidence and
staleness), `articles` (each page as data, derived again only where its inputs changed),
`plan` (which pages changed since the last build), `pages` (rendering) and `publish` (the new
site swapped in whole). Only `publish` touches the output folder, and the ledger is written
into the content folder after it. Work that needs only the entries (related errors, the
search index, browse and shared pages) runs in another process meanwhile (`workers`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from generator import articles, audit, callgraph, history, pages, render, workers
from generator.cache import prune
from generator.config import Config
from generator.content import printed_forms
from generator.highlight import Highlighting
from generator.model import BuildResult, Inputs, group_sites
from generator.pipeline import extract_upstream
from generator.plan import BuildStamp, PageManifest
from generator.publish import build_lock, publish
from generator.upstream import open_source


def inputs_of(config: Config, source: str | None = None, out: Path | None = None, content: Path | None = None, cache_dir: Path | None = None) -> Inputs:
    return Inputs(
        source=source or config.source,
        out=Path(out or config.out),
        content=Path(content or config.content),
        cache_dir=Path(cache_dir or config.cache_dir),
        base_url=config.base_url,
        report_url=config.report_url,
    )


def build(config: Config, inputs: Inputs, jobs: int | None = None) -> BuildResult:
    """The whole site for one upstream revision, swapped into `inputs.out` at the end; then
    the ledger and change list in `inputs.content`, so a build killed before the swap leaves
    both the previous site and the previous ledger."""
    # The collector comes back once `_build`'s records are freed: its first pass walks every
    # object made since it went off that is still alive, which at `_build`'s end is every
    # record; after, only what outlives the build (bench/README.md).
    with workers.without_cycle_collection():
        return _build(config, inputs, jobs)


def _build(config: Config, inputs: Inputs, jobs: int | None) -> BuildResult:
    started = time.time()
    with build_lock(inputs.out), ExitStack() as cleanup:
        # Source: nothing to do when everything the last build into this folder read is the same.
        source = open_source(inputs.source, config, inputs.cache_dir)
        stamp = BuildStamp(inputs, source)
        if (previous := stamp.previous()) is not None:
            return previous
        # Extract and group.
        extraction = extract_upstream(source, inputs.cache_dir, jobs=jobs, facts=True)
        upstream, repo = extraction.upstream, extraction.upstream.repo
        entries = group_sites(extraction.sites, repo)
        by_id = {entry.id: entry for entry in entries}
        blobs = {file.path: file.blob_sha for file in extraction.files}
        # How SGLang gets to each site: its phase and callers, from the call graph of the tree,
        # in another process. The extraction kept the facts of the files it parsed; the few it
        # did not (kept by an older graph) are read here, since that process reads no source.
        texts = {file.path: source.read(file) for file in callgraph.lacking(extraction.files, inputs.cache_dir)}
        (routes,) = workers.background([partial(callgraph.build_routes, extraction.files, extraction.sites, inputs.cache_dir, texts, 1)], jobs, len(entries))
        # What each file's sites were made from: its blob, and for a file calling raisers the
        # raisers it sees. States updated by what changed take this, the ledger's code
        # fingerprints the blobs (the code a page shows).
        made_from = extraction.made_from()
        # Content first (cached, fast), so the search index has the forms curated entries say
        # users see their errors in.
        loaded = articles.load_content(inputs.content, repo, inputs.cache_dir)
        # Which curated entries were written for older code: in another process when their
        # files must be parsed again (every one in a cold build).
        stale = articles.stale_curated(loaded, by_id, source, made_from, inputs.cache_dir, jobs)
        # What the output folder holds: the files of the last build into it, by digest. The
        # processes making pages send back only those that differ (`pages.as_kept`).
        info = render.OutputInfo(upstream, inputs.base_url, inputs.report_url)
        manifest = PageManifest(inputs.cache_dir, inputs.out, info)
        hashes, spare = manifest.file_hashes(), manifest.spare_hashes()
        holds = pages.site_holds(hashes, manifest.holding(hashes, spare))
        kept_files = partial(pages.as_kept, holds=holds)
        # What needs only the entries runs in other processes meanwhile: related errors, and
        # the browse pages.
        (related,) = workers.background([partial(articles.cached_related, entries, inputs.cache_dir, made_from)], jobs, len(entries))
        (browse,) = workers.background([partial(kept_files, partial(pages.browse_files, entries, info, inputs.cache_dir))], jobs, len(entries))
        # Which entries may have changed since the last build, and the files whose blobs did:
        # their excerpts are highlighted on every core from now on.
        state = articles.ArticleState.kept(inputs.cache_dir)
        changed, new_files = state.changed(manifest.salt, entries, made_from)
        highlighting = Highlighting(source, entries, inputs.cache_dir)
        cleanup.callback(highlighting.close)
        highlighting.start(jobs, new_files)
        # History: the ledger, with moved and retired ids. Then the search index, in another
        # process: it finds an error by the forms curated entries say users see it in, by the
        # wordings of its earlier ids, and an error no longer raised by its last message.
        supersedes = {error: entry.supersedes for error, entry in loaded.items() if entry.supersedes}
        past = history.build_history(inputs.content, entries, upstream, blobs, state.codes_of(changed), inputs.cache_dir, supersedes)
        versions = past.versions
        # The ledger's bytes follow in that process; the shared pages have one of their own.
        search, history_files = workers.background(
            [
                partial(
                    pages.history_search_files, entries, past.records, versions, past.version_texts, printed_forms(loaded), repo, inputs.cache_dir, made_from, extraction.classes, holds,
                ),
                partial(
                    history.history_files, past.records, past.changes, cache_dir=inputs.cache_dir, revision=upstream.revision, fresh=past.fresh,
                    earlier=past.earlier, texts=past.version_texts, ledger=past.ledger, touched=past.touched,
                ),
            ],
            jobs,
            len(entries),
        )
        # Content: curated entries, carried over from reworded ids, evidence found again.
        curated = audit.located_evidence(history.carry_curated(loaded, past.records), source, inputs.cache_dir)
        # Each error without an entry of its own shows the text of the family that claims it.
        families = articles.family_texts(inputs.content, entries, curated, source, inputs.cache_dir, made_from)
        stale = stale()
        orphans = audit.content_orphans(inputs.content, by_id, past.records)
        # Home, the changes by release and the API's index in another process, the family
        # pages in a third: they would wait for the others there, and a rebuild's publishing
        # waits for both.
        routes = routes()
        (shared,) = workers.background(
            [partial(kept_files, partial(pages.listed_files, entries, curated, past.inactive, info, past.changes, history.revisions_of(past.records), inputs.cache_dir, routes))],
            jobs,
            len(entries),
        )
        (family_pages,) = workers.background([partial(kept_files, partial(pages.family_files, families, by_id, info))], jobs, len(entries))
        # Derive and plan: every page's digest; only pages whose digest changed are rendered.
        from generator.flags import servers_of

        pins = history.pinned_upstreams(past.records, upstream)
        derived = articles.derive_all(state, changed, upstream, entries, made_from, curated, past, inputs.cache_dir, related, manifest, stale, pins, servers_of(source, inputs.cache_dir), families, versions, routes)
        unchanged = manifest.unchanged(derived.digests, hashes, spare)
        rendered = derived.articles(derived.digests.keys() - unchanged)
        found = articles.page_excerpts(rendered, highlighting, jobs)
        # Until the new tree is in place and described, no manifest: a build killed after the
        # swap must not leave one describing the tree before it.
        manifest.clear()
        stamp.clear()
        # Render and publish. Coverage counts what users can hit: the product's errors.
        coverage = audit.coverage([e for e in entries if e.scope == "product"], (k for k in curated if k in by_id), families)
        files = pages.output_files(rendered, unchanged, info, [browse, search, shared, family_pages], coverage, jobs, found, inputs.cache_dir)
        written = publish(files, inputs.out, hashes, spare)
        manifest.save(derived.digests, written.hashes, written.spare)
        history.save_history(inputs.content, past, upstream, history_files())
        result = BuildResult(
            out=inputs.out,
            upstream=upstream,
            errors=len(entries),
            curated=sum(1 for entry in entries if entry.id in curated),
            files=written.total,
            written=written.written,
            problems=extraction.problems,
            orphans=tuple(str(orphan) for orphan in orphans),
            stale=len(stale),
        )
        stamp.save(result)
    # What this build used is marked so; what no recent build used goes (`cache.prune`).
    prune(inputs.cache_dir, started)
    return result
