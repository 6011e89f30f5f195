"""Derived page content: conditions in words, triggers, named settings, docstrings, related errors."""

from __future__ import annotations

import pickle
import textwrap

from dataclasses import replace
from pathlib import Path

import pytest

from generator import derive, docstrings, render
from generator.content import load_curated
from generator.extract import extract_source
from generator.files import state_bytes
from generator.model import LedgerRecord, Servers, Setting, Upstream, group_sites


@pytest.mark.parametrize(
    ("condition", "words"),
    [
        pytest.param('cfg.kv_cache_dtype in ("nvfp4", "fp4_mx_block16")', "`kv_cache_dtype` is `nvfp4` or `fp4_mx_block16`", id="in-tuple"),
        pytest.param("not get_platform().is_cuda", "the platform is not CUDA", id="platform-negated"),
        pytest.param("_is_hip", "the platform is ROCm (HIP)", id="platform-flag"),
        pytest.param("is_npu()", "the platform is Ascend NPU", id="platform-call"),
        pytest.param("q.is_cuda", "`q.is_cuda` is true", id="tensor-not-platform"),
        pytest.param("self.server_args.speculative_algorithm is None", "`speculative_algorithm` is not set", id="is-none"),
        pytest.param("value is not None", "`value` is set", id="is-not-none"),
        pytest.param("not cfg.enable_lmcache", "`enable_lmcache` is not set", id="setting-off"),
        pytest.param("tp_size > 1", "`tp_size` is greater than `1`", id="compare"),
        pytest.param("not tp_size > 1", "`tp_size` is at most `1`", id="compare-negated"),
        pytest.param('mode != "null"', "`mode` is not `null`", id="not-equal"),
        # Two values, not one and a literal: no "is not" to read as Python's identity test.
        pytest.param("not (topk_ids.shape == topk_weights.shape)", "`topk_ids.shape` differs from `topk_weights.shape`", id="two-values-differ"),
        pytest.param("len(a) == len(b)", "`len(a)` equals `len(b)`", id="two-values-equal"),
        pytest.param('variant not in ("", "base")', "`variant` is none of empty, `base`", id="not-in-with-empty"),
        pytest.param(
            "not (is_a and (has_b or use_c))",
            "`is_a` is false or (`has_b` is false and `use_c` is false)",
            id="de-morgan",
        ),
        pytest.param("not namespace.model_id", "`namespace.model_id` is empty", id="value-not-given"),
        pytest.param("raw_mm_inputs", "`raw_mm_inputs` is set", id="value-given"),
        pytest.param("not event.is_set()", "`event.is_set()` is false", id="call-false"),
        pytest.param("x[", "`x[` is true", id="unparsable-quoted"),
        pytest.param("s == '`'", "`s` is `` ` ``", id="backtick-value"),
    ],
)
def test_describe_condition(condition, words):
    assert derive.describe_condition(condition) == words


@pytest.mark.parametrize(
    ("condition", "words"),
    [
        # SGLang 0.5.23 reads its arguments through the runtime context's snapshots by area.
        pytest.param("get_mm().enable_broadcast_mm_inputs_process", "`--enable-broadcast-mm-inputs-process` is set", id="area-snapshot"),
        pytest.param('get_exec().moe.moe_a2a_backend == "deepep"', "`--moe-a2a-backend` is `deepep`", id="area-group"),
        pytest.param("get_parallel().tp_size > 1", "`--tp-size` is greater than `1`", id="parallel"),
        pytest.param("not get_server_args().disable_radix_cache", "`--disable-radix-cache` is not set", id="server-args"),
        # A leaf that is no flag stays a name; a method of a setting keeps the setting's name.
        pytest.param("get_parallel().dcp_enabled", "`dcp_enabled` is set", id="not-a-flag"),
        pytest.param("get_exec().moe.moe_a2a_backend.is_deepep()", "`moe_a2a_backend.is_deepep()` is true", id="method-of-setting"),
    ],
)
def test_settings_read_from_the_runtime_context_are_named_by_their_flag(condition, words):
    flags = frozenset({"--enable-broadcast-mm-inputs-process", "--moe-a2a-backend", "--tp-size", "--disable-radix-cache"})
    assert derive.describe_condition(condition, flags) == words


def _sites(source: str, path: str = "python/sglang/srt/m.py"):
    return extract_source(textwrap.dedent(source).encode(), path)


def test_trigger_lists_every_guard_and_the_failed_assert():
    (site,) = _sites(
        """
        def check(cfg):
            if cfg.kv_cache_dtype == "fp8":
                if not is_cuda():
                    assert cfg.page_size > 1, "page size"
        """
    )
    trigger = derive.derive_trigger(site)
    assert trigger.startswith("It is raised in `check` when all of these hold:\n\n")
    assert "- `kv_cache_dtype` is `fp8`\n" in trigger
    assert "- the platform is not CUDA\n" in trigger
    assert "- the check `cfg.page_size > 1` fails, that is `page_size` is at most `1`\n" in trigger


def test_trigger_puts_the_own_guard_first_and_folds_the_checks_above_it():
    """6423c40caef6e0c7's shape: two checks above the raise only say they did not fire."""
    sites = _sites(
        """
        def _validate_grid(namespace, cfg):
            if namespace.layer_partition < 0:
                raise ValueError(f"layer_partition must be non-negative: {namespace}")
            if not cfg.enable_hicache:
                return
            if namespace.page_size <= 0:
                raise ValueError(f"page_size must be positive: {namespace}")
            if cfg.kv_cache_dtype == "fp8":
                if not namespace.model_id:
                    raise ValueError("the unified key scheme requires a non-empty model_id")
        """
    )
    site = next(s for s in sites if s.message.startswith("the unified"))
    assert site.checks_passed == (0, 2)
    trigger = derive.derive_trigger(site, frozenset({"--kv-cache-dtype", "--enable-hicache"}))
    assert trigger == (
        "It is raised in `_validate_grid` when all of these hold:\n\n"
        "- `namespace.model_id` is empty\n"
        "- `--kv-cache-dtype` is `fp8`\n"
        "- `--enable-hicache` is set\n"
        "- the 2 checks above it passed\n"
    )


def test_trigger_describes_every_place():
    sites = _sites(
        """
        def load(cfg, paths):
            if cfg.tp_size > 1:
                raise ValueError("cannot load")
            for path in paths:
                raise ValueError("cannot load")
        def again(paths):
            if paths:
                raise ValueError("cannot load")
        """
    )
    (entry,) = group_sites(tuple(sites), "r/r")
    assert derive.derive_trigger(entry.sites, frozenset({"--tp-size"})) == (
        "It is raised in 3 places:\n\n"
        "- In `load` (`m.py:4`) when `--tp-size` is greater than `1`.\n"
        "- In `load` (`m.py:6`) inside the loop `for path in paths` when the check above it passed.\n"
        "- In `again` (`m.py:9`) when `paths` is set.\n"
    )


def test_a_pydantic_validator_names_the_field_not_its_parameter():
    sites = _sites(
        """
        class Request(BaseModel):
            @field_validator("max_tokens")
            @classmethod
            def _validate_max_tokens(cls, v):
                if v <= 0:
                    raise ValueError("max_tokens must be positive")
                return v

            @field_validator("temperature", "top_p")
            @classmethod
            def _refuse(cls, value, info):
                if value is not None:
                    raise ValueError(f"{info.field_name} is not accepted here")
        """,
        "python/sglang/srt/entrypoints/anthropic/protocol.py",
    )
    one, several = sites
    assert one.validates == ("v", "max_tokens")
    assert derive.derive_trigger(one) == "It is raised in `Request._validate_max_tokens` when `max_tokens` is at most `0`."
    assert several.validates == ("value", "temperature", "top_p")
    assert derive.derive_trigger(several).endswith("- `value` is the field `temperature` or `top_p` being validated\n")


def test_trigger_names_loops_and_handlers():
    (site,) = _sites(
        """
        def load(paths):
            for path in paths:
                try:
                    open(path)
                except OSError:
                    raise RuntimeError("cannot open")
        """
    )
    assert "while handling `OSError`" in derive.derive_trigger(site)
    assert "inside the loop `for path in paths`" in derive.derive_trigger(site)


def test_no_trigger_when_the_code_says_nothing():
    (site,) = _sites('def f():\n    raise ValueError("always")\n')
    assert derive.derive_trigger(site) is None


def test_mentioned_flags_and_environment_variables():
    sites = _sites(
        """
        def f(cfg):
            if cfg.dcp_size > 1:
                raise ValueError(f"--enable-hisparse needs SGLANG_HISPARSE=1, got {cfg.x}; see --tp-size")
        def g(cfg):
            if cfg.tp_size > 2:
                raise ValueError("too many")
        """
    )
    entries = group_sites(tuple(sites), "r/r")
    flags = derive.known_flags(entries)
    assert flags == {"--enable-hisparse", "--tp-size"}
    by_message = {entry.message: entry for entry in entries}
    assert derive.mentioned_names(by_message["too many"], flags) == ("--tp-size",)
    first = next(e for e in entries if e.message != "too many")
    assert derive.mentioned_names(first, flags) == ("--enable-hisparse", "--tp-size", "SGLANG_HISPARSE")


def test_a_flag_built_from_a_run_time_value_is_not_named():
    """`--dsa-{label}-backend` names no flag: not `--dsa`, not `--backend`; whole flags around
    placeholders still count."""
    (site,) = _sites(
        """
        def f(label, backend, dtype):
            raise ValueError(f"with --kv-cache-dtype={dtype}, got --dsa-{label}-backend={backend}; try --x{label} or {label}--y")
        """
    )
    (entry,) = group_sites((site,), "r/r")
    assert derive.known_flags([entry]) == {"--kv-cache-dtype"}
    assert derive.mentioned_names(entry) == ("--kv-cache-dtype",)


def test_a_field_of_another_object_is_not_taken_for_a_setting():
    """`namespace.page_size` is the namespace's, not `--page-size`; `cfg.tp_size` is the server's."""
    (site,) = _sites(
        """
        def f(namespace, cfg):
            if namespace.page_size <= 0 and cfg.tp_size > 1:
                raise ValueError("bad grid")
        """
    )
    (entry,) = group_sites((site,), "r/r")
    assert derive.mentioned_names(entry, frozenset({"--page-size", "--tp-size"})) == ("--tp-size",)


DOCSTRINGS = textwrap.dedent(
    '''
    class Pool:
        """A pool."""

        def alloc(
            self, n: int,
        ) -> int:  # a comment
            """Allocate `n` slots.

            Raises when full.
            """
            if n > 3:
                raise ValueError("full")

        def free(self):
            # no docstring
            raise ValueError("x")
    '''
).splitlines(keepends=True)


@pytest.mark.parametrize(
    ("line", "function", "expected"),
    [
        pytest.param(13, "Pool.alloc", "Allocate `n` slots.\n\nRaises when full.", id="multi-line-signature"),
        pytest.param(17, "Pool.free", None, id="none"),
        pytest.param(3, "", None, id="module-level"),
    ],
)
def test_docstring_of(line, function, expected):
    assert docstrings.docstring_of(DOCSTRINGS, line, function) == expected


def test_docstring_of_reads_each_definition_once_for_a_file():
    read: dict[int, str | None] = {}
    assert docstrings.docstring_of(DOCSTRINGS, 13, "Pool.alloc", read) == "Allocate `n` slots.\n\nRaises when full."
    assert docstrings.docstring_of(DOCSTRINGS, 12, "Pool.alloc", read) == "Allocate `n` slots.\n\nRaises when full."
    assert docstrings.docstring_of(DOCSTRINGS, 17, "Pool.free", read) is None
    assert sorted(read) == [4, 14]


def test_related_prefers_shared_settings_over_shared_words():
    sites = _sites(
        """
        def a(cfg):
            if cfg.kv_cache_dtype == "fp8":
                raise ValueError("fp8 KV cache needs a newer GPU")
        def b(cfg):
            if cfg.kv_cache_dtype == "int4":
                raise ValueError("int4 is experimental")
        def c(cfg):
            raise ValueError("fp8 is slow here")
        def d(cfg):
            raise ValueError("unrelated words entirely")
        def e(cfg):
            if cfg.kv_cache_dtype == "x":
                raise TypeError("something else")
        """,
        path="python/sglang/a.py",
    ) + _sites('def z():\n    raise ValueError("fp8 again, elsewhere")\n', path="python/sglang/b.py")
    entries = group_sites(tuple(sites), "r/r")
    titles = {entry.id: entry.message for entry in entries}
    related = derive.related_errors(entries, limit=2)
    first = next(e.id for e in entries if e.message == "fp8 KV cache needs a newer GPU")
    assert [titles[i] for i in related[first]][0] in {"int4 is experimental", "something else"}
    # Determinism: the same entries give the same ranking.
    assert derive.related_errors(entries, limit=2) == related


@pytest.mark.real
def test_related_ranking_again_after_a_change_equals_ranking_everything(sglang, monkeypatch):
    """What a rebuild does: the last state, then a revision whose changed files bring fifty
    real errors back, drop fifty others and move one to another file. Only errors a change can
    have moved are ranked again, and the result is that of ranking everything."""
    best = derive._best
    entries = group_sites(sglang.sites, sglang.upstream.repo)
    before = tuple(entry for number, entry in enumerate(entries) if number % 500)
    moved = entries[1]
    site = replace(moved.sites[0], path="python/sglang/srt/elsewhere.py")
    after = tuple(replace(moved, sites=(site,)) if entry is moved else entry for number, entry in enumerate(entries) if number % 500 != 7)
    changed = {s.path for number, entry in enumerate(entries) if number % 500 in (0, 7) or entry is moved for s in entry.sites}
    blobs_before = {file.path: file.blob_sha for file in sglang.files}
    blobs_after = {**{path: "edited" if path in changed else sha for path, sha in blobs_before.items()}, site.path: "new"}
    state = derive.RelatedIndex()
    assert state.update(before, blobs_before) == derive.related_errors(before)
    # Kept in the cache between builds as `build.cached_related` keeps it.
    state = pickle.loads(state_bytes(state))
    ranked = []
    monkeypatch.setattr(derive, "_best", lambda scores, files, error, *rest: ranked.append(error) or best(scores, files, error, *rest))
    again = state.update(after, blobs_after)
    assert 0 < len(ranked) < len(after)
    monkeypatch.undo()
    assert again == derive.related_errors(after)


def test_related_ranking_again_when_a_name_comes_into_the_code():
    """A phrase of a message's words counts as a name only once some error's code uses it:
    an error in an unchanged file gains the feature when another file starts using the name."""
    a = _sites(
        """
        def f(x):
            raise ValueError("the kv cache dtype is not supported")
        def g(x):
            raise ValueError("kv cache dtype fp8 needs a newer GPU")
        def k(x):
            raise TypeError("unrelated words entirely")
        """,
        path="python/sglang/a.py",
    )
    b = _sites(
        """
        def h(cfg):
            if cfg.kv_cache_dtype == "int4":
                raise ValueError("int4 is experimental")
        """,
        path="python/sglang/b.py",
    )
    first, second = group_sites(tuple(a), "r/r"), group_sites(tuple(a + b), "r/r")
    # Three errors, then four: the same rarity scale, so nothing is ranked again for that.
    state = derive.RelatedIndex(limit=2)
    state.update(first, {"python/sglang/a.py": "1"})
    assert not any("name:kv_cache_dtype" in ranked for ranked in state.features.values())
    assert state.update(second, {"python/sglang/a.py": "1", "python/sglang/b.py": "1"}) == derive.related_errors(second, limit=2)
    assert sum("name:kv_cache_dtype" in state.features[entry.id] for entry in second) == 3
    # And out again when the file goes.
    assert state.update(first, {"python/sglang/a.py": "1"}) == derive.related_errors(first, limit=2)
    assert not any("name:kv_cache_dtype" in ranked for ranked in state.features.values())


def test_related_ranking_again_when_one_error_takes_a_feature_another_loses():
    """An error in a changed file gone, another come with the same name: the name's count stays
    as it was, yet the unchanged error that listed the one gone must list the one come (before,
    its list kept an id the build no longer had, and the build failed with a KeyError)."""
    kept = _sites("def f(cfg):\n    raise ValueError(f'bad top_k {cfg.top_k}')\n", path="python/sglang/a.py")
    gone = _sites("def g(cfg):\n    raise ValueError(f'top_k off {cfg.top_k}')\n", path="python/sglang/b.py")
    come = _sites("def g(cfg):\n    raise ValueError(f'other top_k {cfg.top_k}')\n", path="python/sglang/b.py")
    first, second = group_sites(tuple(kept + gone), "r/r"), group_sites(tuple(kept + come), "r/r")
    state = derive.RelatedIndex(limit=2)
    state.update(first, {"python/sglang/a.py": "1", "python/sglang/b.py": "1"})
    state = pickle.loads(state_bytes(state))
    again = state.update(second, {"python/sglang/a.py": "1", "python/sglang/b.py": "2"})
    assert again == derive.related_errors(second, limit=2)
    ids = {entry.id for entry in second}
    assert all(other in ids for others in again.values() for other in others)


def test_related_ranking_again_when_an_error_s_first_file_changes():
    """At most `_SAME_FILE` related errors come from an error's own file, judged by each
    candidate's first file: when a candidate gains a site in a file that sorts first, the
    unchanged errors of its old first file may list one more of their own."""
    own = "\n".join(f"def t{n}(x):\n    assert x.out, 'norm {n} keeps its output'" for n in range(4))
    shared = "def s(x):\n    assert x.out, 'the output is kept'\n"
    first_sites = _sites(own + "\n" + shared, path="python/sglang/m.py")
    extra = _sites(shared, path="python/sglang/a.py")
    first, second = group_sites(tuple(first_sites), "r/r"), group_sites(tuple(first_sites + extra), "r/r")
    state = derive.RelatedIndex(limit=3)
    assert state.update(first, {"python/sglang/m.py": "1"}) == derive.related_errors(first, limit=3)
    again = state.update(second, {"python/sglang/m.py": "1", "python/sglang/a.py": "1"})
    assert again == derive.related_errors(second, limit=3)


KV_CHECKS = """
def check_{n}(cfg):
    if cfg.kv_cache_dtype == "fp8_{n}":
        raise ValueError("fp8 KV cache {n} needs a newer GPU")
"""


def test_related_errors_of_the_product_are_the_product_s():
    """A server user's page lists no error only SGLang's tests raise, however much they
    share; a test's page may list the product's. When an error moves from the product into
    the tests, the errors ranked before list what ranking everything lists."""
    product = _sites(KV_CHECKS.format(n=1) + KV_CHECKS.format(n=2), path="python/sglang/srt/a.py")
    tests = _sites(KV_CHECKS.format(n=3), path="python/sglang/test/test_kv.py")
    # Raised in a test file and in the product; then only in the test file, its first file.
    moved = _sites(KV_CHECKS.format(n=4), path="python/sglang/a/test_b.py")
    moving = moved + _sites(KV_CHECKS.format(n=4), path="python/sglang/srt/z.py")
    entries = group_sites(tuple(product + tests + moving), "r/r")
    scope = {entry.id: entry.scope for entry in entries}
    related = derive.related_errors(entries, limit=3)
    for entry in entries:
        assert related[entry.id], entry.message
        if entry.scope == "product":
            assert all(scope[other] == "product" for other in related[entry.id])
    assert any(scope[other] == "product" for other in related[next(e.id for e in entries if e.scope == "test")])
    state = derive.RelatedIndex(limit=3)
    blobs = {"python/sglang/srt/a.py": "1", "python/sglang/test/test_kv.py": "1", "python/sglang/a/test_b.py": "1"}
    state.update(entries, {**blobs, "python/sglang/srt/z.py": "1"})
    after = group_sites(tuple(product + tests + moved), "r/r")
    assert [entry.scope for entry in after].count("test") == 2
    again = state.update(after, blobs)
    assert again == derive.related_errors(after, limit=3)


@pytest.mark.real
def test_related_errors_of_the_kv4_error_are_about_platforms_or_kv_cache_dtypes(sglang):
    entries = group_sites(sglang.sites, sglang.upstream.repo)
    by_id = {entry.id: entry for entry in entries}
    kv4 = next(e for e in entries if e.message == "KV4 is not tested on non-CUDA platforms.")
    related = derive.related_errors(entries)[kv4.id]
    titles = [by_id[other].title for other in related]
    assert len(titles) == 5
    topics = ("cuda", "hip", "rocm", "musa", "npu", "platform", "kv4", "kv_cache_dtype", "kv-cache-dtype", "kv cache dtype")
    assert all(any(topic in title.lower() for topic in topics) for title in titles), titles
    # At most two come from the error's own file, so the list reaches beyond one module.
    assert sum(by_id[other].sites[0].path == kv4.sites[0].path for other in related) <= 2
    assert any("HiSparse" in title and "kv" in title.lower() for title in titles), titles


@pytest.mark.real
def test_a_site_derived_from_the_last_build_matches_one_derived_afresh(sglang, tmp_path, monkeypatch):
    """`articles.derive_all` keeps what each article was derived from (`ArticleState`), and a
    rebuild derives again only the articles whose inputs may have changed. Whatever changed,
    every page digest and article must be what an empty cache gives: a deleted file, a message
    reworded under the same id that others list as related, a new message naming a flag that
    other errors' conditions would name, curated text, a pin, an alias, a stale revision and
    a related list."""
    from generator.articles import ArticleState, derive_all
    from generator.plan import PageManifest
    from generator.history import BuildHistory

    repo = sglang.upstream.repo
    info = render.OutputInfo(sglang.upstream, "https://example.org/", "https://example.org/report")
    before = group_sites(sglang.sites, repo)
    ids = [entry.id for entry in before]
    related = {error: (ids[(n + 1) % len(ids)], ids[(n + 7) % len(ids)]) for n, error in enumerate(ids)}
    curated = load_curated(Path(__file__).parent.parent / "content", repo)
    blobs = {file.path: file.blob_sha for file in sglang.files}

    # The next revision. A message with a placeholder, reworded: the same id, another title.
    reworded = next(site for site in sglang.sites if site.template and any(not isinstance(p, str) for p in site.template.parts))
    parts = tuple(replace(p, expr=p.expr + "_now") if not isinstance(p, str) else p for p in reworded.template.parts)
    sites = [replace(site, template=replace(site.template, parts=parts)) if site == reworded else site for site in sglang.sites]
    # A file gone.
    gone = next(path for path in sorted(blobs) if path != reworded.path and sum(s.path == path for s in sites) > 3)
    sites = [site for site in sites if site.path != gone]
    # A flag some error's conditions would name comes into the messages.
    flags = derive.known_flags(before)
    flag = next(f for site in sglang.sites if site.path != reworded.path for f in derive.mention_parts(site)[2] if f not in flags)
    sites.append(replace(reworded, path="python/sglang/srt/new_flag.py", template=replace(reworded.template, parts=(f"set {flag} to go on",))))
    after = group_sites(tuple(sorted(sites, key=lambda s: (s.path, s.line))), repo)
    now = {**{path: sha for path, sha in blobs.items() if path != gone}, reworded.path: "changed", "python/sglang/srt/new_flag.py": "new"}
    clean = [entry.id for entry in after if entry.sites[0].path not in (reworded.path, gone)]
    assert reworded.id(repo) in {entry.id for entry in after}
    # Curated text, a pin, an alias, a stale revision and a related list change elsewhere.
    edited = dict(curated)
    first = sorted(edited)[0]
    edited[first] = replace(edited[first], explanation=edited[first].explanation + " More.")
    pins = {clean[10]: replace(sglang.upstream, source="", revision="v0.0.1", date="2020-01-01T00:00:00Z", commit="")}
    moved = LedgerRecord("00000000000000aa", "moved", "v1", "v2", "raise", "ValueError", "Old words", "python/sglang/x.py", 3, "f", moved_to=clean[20])
    stale = {clean[30]: "v0.0.2"}
    present = {entry.id for entry in after}
    now_related = {error: tuple(o for o in related.get(error, (clean[0],)) if o in present) for error in present}
    now_related[clean[40]] = (clean[41],)
    listing = {error for error, others in now_related.items() if reworded.id(repo) in others}
    assert not listing.isdisjoint(clean)

    def derived(cache, entries, blobs, curated, ledger, related, stale, pins):
        manifest = PageManifest(cache, tmp_path / "site", info)
        state = ArticleState.kept(cache)
        changed, _ = state.changed(manifest.salt, entries, blobs)
        past = BuildHistory({}, ledger, ())
        return derive_all(state, changed, sglang.upstream, entries, blobs, curated, past, cache, lambda: related, manifest, stale, pins)

    derived(tmp_path / "cache", before, blobs, curated, (), related, {}, {})
    read = []
    trigger = derive.derive_trigger
    monkeypatch.setattr(derive, "derive_trigger", lambda sites, *rest: read.append(sites) or trigger(sites, *rest))
    update = derived(tmp_path / "cache", after, now, edited, (moved,), now_related, stale, pins)
    # Derived again: the changed files' errors, those listing the reworded one, those whose
    # conditions name the new flag, and the five edited; not every error.
    assert 0 < len(read) < len(after) / 4
    fresh = derived(tmp_path / "fresh", after, now, edited, (moved,), now_related, stale, pins)
    assert update.digests == fresh.digests
    some = sorted(update.digests)[::50] + [reworded.id(repo), first, clean[10], clean[20], clean[30], clean[40], moved.id]
    assert update.articles(some) == fresh.articles(some)
    # The next build, nothing changed: no article is derived again, not even the inactive ones
    # (a ledger of every release holds thousands).
    titled = []
    record_title = derive.record_title
    monkeypatch.setattr(derive, "record_title", lambda record: titled.append(record.id) or record_title(record))
    read.clear()
    again = derived(tmp_path / "cache", after, now, edited, (moved,), now_related, stale, pins)
    assert (read, titled, again.digests) == ([], [], update.digests)


@pytest.mark.real
def test_listed_errors_give_the_shared_pages_of_the_full_articles(sglang):
    """A build renders home, browse pages and the API's index from `listed_errors` while it
    derives the full articles, the browse pages from the entries alone: every one of those
    files must be what the full articles give."""
    from generator.pages import browse_files, listed_files

    entries = group_sites(sglang.sites, sglang.upstream.repo)
    curated = load_curated(Path(__file__).parent.parent / "content", sglang.upstream.repo)
    assert curated and any(entry.id in curated for entry in entries)
    # A ledger with a retired and a moved error, whose articles come from their records.
    retired = LedgerRecord("00000000000000bb", "retired", "v1", "v2", "raise", "ValueError", "Gone now", "python/sglang/y.py", 9, "g", retired_in="v3")
    moved = LedgerRecord("00000000000000aa", "moved", "v1", "v2", "raise", "ValueError", "Old <words>", "python/sglang/x.py", 3, "f", moved_to=entries[0].id)
    # And one whose exception type no error raises any more, which has a browse page.
    gone = LedgerRecord("00000000000000cc", "retired", "v1", "v2", "raise", "GoneError", "Gone too", "python/sglang/z.py", 4, "h", retired_in="v3")
    ledger = (retired, moved, gone)
    info = render.OutputInfo(sglang.upstream, "https://example.org/", "https://example.org/report")
    full = derive.derive_articles(entries, curated, sglang.upstream, ledger)
    listed = derive.listed_errors(entries, curated, ledger)
    assert any(article.trigger or article.mentions or article.related for article in full)
    expected = dict(render.render_shared(full, info))
    assert dict(render.render_shared(listed, info)) == expected
    assert "exceptions/GoneError/index.html" in expected
    # A build renders the browse pages from the entries alone, and the rest apart.
    pieces = [*browse_files(entries, info), *listed_files(entries, curated, ledger, info, ())]
    assert len(pieces) == len(expected) and dict(pieces) == expected


def test_every_flag_when_it_happens_names_is_explained():
    """A flag "When it happens" names from a condition (`cfg.dtype` at the second place, which
    no message names) is among the page's settings, with its help, as the message's flags are."""
    sites = _sites(
        """
        def check(cfg):
            if cfg.tp_size > 8:
                raise ValueError("too wide")

        def check_again(cfg):
            if cfg.dtype == "float16":
                raise ValueError("too wide")
        """
    )
    (entry,) = group_sites(sites, "r/r")
    settings = {
        name: Setting(name, f"help of {name}", None, None, "python/sglang/srt/server_args.py", 1)
        for name in ("--tp-size", "--dtype", "--page-size")
    }
    upstream = Upstream("r/r", "pypi:x==1", "v1", "2026-01-01")
    (article,) = derive.derive_articles((entry,), {}, upstream, triggers={entry.id: derive.derive_trigger(entry.sites, frozenset(settings))}, settings=Servers(settings))
    assert "`--dtype`" in article.trigger and "`--tp-size`" in article.trigger
    assert [setting.name for setting in article.settings] == ["--dtype", "--tp-size"]


def test_the_diffusion_servers_code_is_explained_by_its_own_flags():
    """An error in the diffusion server's code (`multimodal_gen/`) is explained by that
    server's flags, and one in the language server's by its own, though both name `num_gpus`."""
    source = """
        def check(self):
            if self.num_gpus > 8:
                raise ValueError("too many GPUs")
        """
    upstream = Upstream("r/r", "pypi:x==1", "v1", "2026-01-01")
    servers = Servers(
        {"--num-gpus": Setting("--num-gpus", "the language server's", None, None, "python/sglang/srt/server_args.py", 1)},
        {"--num-gpus": Setting("--num-gpus", "GPUs of the diffusion pipeline", "1", None, "python/sglang/multimodal_gen/runtime/server_args/server_args.py", 9)},
    )
    for path, expected in (
        ("python/sglang/multimodal_gen/runtime/server_args/server_args.py", "GPUs of the diffusion pipeline"),
        ("python/sglang/srt/managers/scheduler.py", "the language server's"),
    ):
        (entry,) = group_sites(_sites(source, path), "r/r")
        (article,) = derive.derive_articles((entry,), {}, upstream, settings=servers)
        assert [(setting.name, setting.help) for setting in article.settings] == [("--num-gpus", expected)]


def test_settings_the_server_argument_code_reads_are_shown_even_where_its_code_is_shown_as_is():
    """Issue #18: every flag a page names is explained. In the server's argument code a check
    shown as code (`0 <= self.cache_mb < float('inf')`) and a message naming the field
    (`timeout_s must be ...`) are about flags `--cache-mb` and `--timeout-s`; elsewhere
    `self.dtype` is a layer's own, and an earlier check's setting is that check's."""
    settings = {
        name: Setting(name, f"help of {name}", None, None, "python/sglang/srt/server_args.py", 1)
        for name in ("--cache-mb", "--timeout-s", "--dtype", "--port")
    }
    upstream = Upstream("r/r", "pypi:x==1", "v1", "2026-01-01")
    arguments = """
        class ServerArgs:
            def validate(self):
                if self.port < 0:
                    raise ValueError("bad port")
                if not 0 <= self.cache_mb < float("inf"):
                    raise ValueError("must be finite")
                timeout = self.resolve_timeout()
                if timeout is not None and timeout < 0:
                    raise ValueError("timeout_s must be None or non-negative")
        """
    layer = """
        class Combine:
            def __call__(self, o):
                if not 0 <= self.dtype.itemsize < 8:
                    raise ValueError("must be finite")
        """
    named = {}
    for source, path in ((arguments, "python/sglang/srt/server_args.py"), (layer, "python/sglang/srt/layers/combine.py")):
        for article in derive.derive_articles(group_sites(_sites(source, path), "r/r"), {}, upstream, settings=Servers(settings)):
            named[(path.rsplit("/", 1)[-1], article.title)] = [setting.name for setting in article.settings]
    assert named == {
        ("server_args.py", "bad port"): ["--port"],
        ("server_args.py", "must be finite"): ["--cache-mb"],
        ("server_args.py", "timeout_s must be None or non-negative"): ["--timeout-s"],
        ("combine.py", "must be finite"): [],
    }


def test_a_page_whose_phase_or_callers_change_is_digested_anew(tmp_path):
    """Routes come from other files than the page's own: a change of phase or of callers alone
    must change the page's digest, or the rebuild keeps the old page."""
    from generator.callgraph import Routes
    from generator.plan import PageManifest

    (entry,) = group_sites(extract_source(textwrap.dedent('''
        def check(cfg):
            raise ValueError("bad")
    ''').encode(), "python/sglang/srt/a.py"), "r/r")
    upstream = Upstream("r/r", "pypi:x==1", "v1", "2026-01-01")
    where = ("python/sglang/srt/a.py", "check")
    call = ((("python/sglang/srt/b.py", "caller", 3, ("x",), ((), 0)),), 0)
    manifest = PageManifest(tmp_path / "cache", tmp_path / "site", render.OutputInfo(upstream, "https://e.org/", "https://e.org/r"))

    def digest(phase, tree):
        (article,) = derive.derive_articles((entry,), {}, upstream, routes=Routes({where: phase}, {where: phase}, {where: tree}, {}))
        return manifest.digests((article,), {"python/sglang/srt/a.py": "blob"})[entry.id]

    assert len({digest("launch", ((), 0)), digest("serving", ((), 0)), digest("launch", call)}) == 3


def test_a_bare_name_is_a_setting_only_in_the_servers_argument_code():
    """A kernel's `out` or a loader's `config` is a parameter, not `--out` or `--config`, though
    some message names those flags; in the server's argument code a bare `tp_size` is the
    setting read into a local."""
    code = """
        def f(out, config, tp_size):
            if not out.is_contiguous() or config is None or tp_size > 2:
                raise ValueError("bad")
        """
    flags = frozenset({"--out", "--config", "--tp-size"})
    (kernel,) = group_sites(tuple(_sites(code, "python/sglang/kernels/ops/k.py")), "r/r")
    assert derive.mentioned_names(kernel, flags) == ()
    (hook,) = group_sites(tuple(_sites(code, "python/sglang/srt/arg_groups/x_hook.py")), "r/r")
    assert derive.mentioned_names(hook, flags) == ("--config", "--out", "--tp-size")
