"""The extractor against the real default release: SPEC's counts and the KV4 site."""

import pytest

pytestmark = pytest.mark.real


def test_finds_every_site_of_sglang_0_5_23(sglang):
    kinds = [site.kind for site in sglang.sites]
    # 13,684 raise statements, and 88 calls that pass text to a function raising its parameter.
    assert (kinds.count("raise"), kinds.count("assert"), kinds.count("warning")) == (13772, 14955, 61)
    assert sum(1 for site in sglang.sites if site.kind == "raise" and site.raised_in) == 88
    assert sglang.problems == ()
    assert len(sglang.files) == 4719


def test_kv4_site_reads_as_the_issue_says(sglang):
    [site] = [s for s in sglang.sites if s.message == "KV4 is not tested on non-CUDA platforms."]
    assert (site.exception, site.path, site.line, site.function) == (
        "RuntimeError",
        "python/sglang/srt/arg_groups/kv_cache_hook.py",
        318,
        "handle_kv4_compatibility",
    )
    assert site.conditions[-1] == "not get_platform().is_cuda"
