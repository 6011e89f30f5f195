"""The extraction stage over a whole upstream tree: cache lookups, then the files that changed,
parsed on every core; then, once every file's raisers are known, the calls to them (each
file's by the raisers it sees, `generator.raisers`); then the sites in a stable order."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from contextlib import ExitStack, nullcontext
from functools import partial
from pathlib import Path

from importlib.metadata import version as package_version
from importlib.util import find_spec

from generator import callgraph, raisers, workers
from generator.cache import CallCache, SiteCache, Store
from generator.model import ExtractedFile, Extraction, Problem, Site, SourceFile, merge_sites
from generator.progress import Progress
from generator.upstream import Source


def extractor_version() -> str:
    """Changes whenever the extractor's code, libcst or the Python grammar could change a
    result, so the cache never serves sites an older extractor found."""
    # Found without importing it: a build whose blobs are all cached never loads libcst.
    digest = hashlib.sha256(Path(find_spec("generator.extract").origin).read_bytes())
    # And the records it makes: a site's key (`model.Site.key`) decides its `legacy_key`.
    digest.update(Path(find_spec("generator.model").origin).read_bytes())
    # And which raisers a file sees, and how a file's bytes are decoded.
    digest.update(Path(find_spec("generator.raisers").origin).read_bytes())
    digest.update(Path(find_spec("generator.pysource").origin).read_bytes())
    digest.update(f"{package_version('libcst')}|{sys.version_info[:2]}".encode())
    return digest.hexdigest()[:16]


def _extract_blob(path: str, data: bytes) -> tuple[ExtractedFile | str, object]:
    """What one file alone gives, or the reason it was skipped, and its syntax tree (None when
    skipped); never raises for bad input."""
    from generator import extract

    try:
        return extract.extract_file_and_tree(data, path)
    except extract.UnparsableFile as error:
        return str(error), None


def _extract_batch(cache: SiteCache, facts: Store | None, batch: list[tuple[SourceFile, bytes]]) -> list[ExtractedFile | str]:
    """Extract and cache a batch in a worker, so the parent only gathers results; with a
    `facts` store, keep the call graph's facts of each file too (`callgraph.module_facts`),
    from the same parse."""
    results = []
    with cache.batch(), facts.batch() if facts is not None else nullcontext():
        for file, data in batch:
            result, tree = _extract_blob(file.path, data)
            cache.store(file.blob_sha, result)
            if facts is not None:
                facts.put(file.blob_sha, callgraph.facts_to_json(callgraph.module_facts(tree, file.path)) if tree is not None else {"unparsable": True})
            results.append(result)
    return results


def cache_blobs(cache: SiteCache, batch: list[tuple[SourceFile, bytes]]) -> None:
    """In a worker: what each blob of a batch alone gives, into the cache; nothing is sent back
    (`backfill.Prefetch` reads it from there)."""
    _extract_batch(cache, None, batch)


def extract_upstream(source: Source, cache_dir: Path, jobs: int | None = None, facts: bool = False) -> Extraction:
    """Every site of the source, reading only blobs the cache does not already hold; with
    `facts`, the call graph's facts of the files parsed are kept too (`callgraph.facts_store`)."""
    version = extractor_version()
    cache = SiteCache(cache_dir, version)
    store = callgraph.facts_store(cache_dir) if facts else None
    files = source.files()
    progress = Progress("extract", len(files))
    results: dict[str, ExtractedFile | str] = {}
    # What the cache lacks is parsed in other processes from the start, while this one reads
    # what it holds: after an upstream commit, the parsing (with libcst's import) of the few
    # changed files costs about as much as reading the cache for all the others.
    held: list[SourceFile] = []
    missing: list[SourceFile] = []
    for file in files:
        (held if cache.holds(file.blob_sha) else missing).append(file)
    with ExitStack() as stack:
        parsed = _start(source, cache, store, missing, jobs, stack)
        unreadable = []
        for file in held:
            cached = cache.load(file.blob_sha, file.path)
            if cached is None:
                unreadable.append(file)
            else:
                results[file.path] = cached
        done, sites_found = len(results), sum(len(r.sites) for r in results.values() if not isinstance(r, str))
        progress.update(done, f"files, {sites_found} sites")
        # An entry there but unreadable is parsed here, once the others are.
        for file, result in [*zip(missing, parsed), *zip(unreadable, _start(source, cache, store, unreadable, 1, stack))]:
            results[file.path] = result
            done += 1
            sites_found += 0 if isinstance(result, str) else len(result.sites)
            progress.update(done, f"files, {sites_found} sites")
    progress.close()
    parsed = {path: result for path, result in results.items() if not isinstance(result, str)}
    paths = [file.path for file in files]
    seen, classes = raisers.resolve(parsed, paths)
    calls, inputs = _calls(source, CallCache(cache_dir, version), files, seen)
    sites: list[Site] = []
    problems: list[Problem] = []
    for file in files:
        result = results[file.path]
        if isinstance(result, str):
            problems.append(Problem(file.path, result))
        else:
            sites.extend(merge_sites(result.sites, calls.get(file.path, ())))
    return Extraction(source.upstream, files, tuple(sites), tuple(problems), tuple(sorted(inputs.items())), classes)


def _calls(source: Source, cache: CallCache, files: tuple[SourceFile, ...], seen: dict[str, dict]) -> tuple[dict[str, tuple[Site, ...]], dict[str, str]]:
    """By path, the sites of calls to the raisers each file sees (`seen`), and what they were
    made from (the blob sha and the digest of those raisers), read from the cache by that or
    found here: a handful of files call raisers."""
    calls, inputs = {}, {}
    missing = []
    for file in files:
        if file.path not in seen:
            continue
        key = f"{file.blob_sha}-{raisers.digest(seen[file.path])}"
        inputs[file.path] = key
        found = cache.load(key, file.path) if cache.has(key) else None
        if found is None:
            missing.append((key, file))
        else:
            calls[file.path] = found
    # After a cold start some fifty files call raisers, the largest of SGLang's among them:
    # they are parsed on every core.
    jobs = [(source.read(file), file.path, seen[file.path]) for _, file in missing]
    with cache.batch():
        for (key, file), found in zip(missing, workers.mapped(_call_sites, jobs, 8)):
            cache.store(key, found)
            calls[file.path] = found
    return calls, inputs


def _call_sites(job: tuple[bytes, str, dict]) -> tuple[Site, ...]:
    from generator import extract

    return extract.call_sites(*job)




def _start(source: Source, cache: SiteCache, facts: Store | None, files: list[SourceFile], jobs: int | None, stack: ExitStack) -> Iterator[tuple[Site, ...] | str]:
    """The results of `files` in their order, their parsing already under way in worker
    processes when there is enough work (the pool lives as long as `stack`); otherwise parsed
    here as the results are read."""
    jobs = workers.cores(jobs)
    batches = [[(f, source.read(f)) for f in files[i : i + 8]] for i in range(0, len(files), 8)]
    if jobs == 1 or not batches:
        return (result for batch in batches for result in _extract_batch(cache, facts, batch))
    # A worker per two batches at most: the few batches of a commit go to one worker, which
    # leaves this process a core for the cache.
    pool = stack.enter_context(workers.pool(min(jobs, (len(batches) + 1) // 2)))
    return (result for batch_result in pool.map(partial(_extract_batch, cache, facts), batches) for result in batch_result)
