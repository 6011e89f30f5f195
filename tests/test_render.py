"""Rendering: hostile upstream and curated text comes out escaped; Markdown links are filtered."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import textwrap

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator import api, render
from generator.derive import listed_errors
from generator.extract import extract_source
from generator.model import Article, Curated, ExampleFix, Location, Placeholder, Related, Site, Snippet, Solution, Template, Upstream, group_sites

UPSTREAM = Upstream(repo="o/r", source="git:x@main", revision="abc123", date="2026-01-01T00:00:00Z")
INFO = render.OutputInfo(UPSTREAM, "https://kb.example.org/", "https://example.org/report")


def article(parts, curated=None, path="python/sglang/m.py", function="f", conditions=(), related=()) -> Article:
    template = Template(tuple(parts))
    site = Site("raise", "ValueError", template, path, 3, 3, function, conditions, (), None, 1, 5)
    snippet = Snippet(1, ("a", "b", "raise X", "c", "d"), ("a", "b", "<span>raise</span> X", "c", "d"))
    return Article(
        id="0123456789abcdef",
        status="active",
        title=template.text,
        kind="raise",
        exception="ValueError",
        template=template,
        locations=(Location(site, UPSTREAM.url(path, 3), snippet, "Doc <b>string</b>"),),
        curated=curated,
        trigger="It is raised when `x` is `<y>`.",
        trigger_curated=False,
        mentions=(),
        related=related,
    )


def curated_with(**fields) -> Curated:
    values = dict(
        id="0123456789abcdef", path="content/errors/0123456789abcdef.yaml", message=None, explanation="Plain.",
        solutions=(), example_fix=None, situations=(), trigger=None, tags=(), fingerprint=None,
    )
    values.update(fields)
    return Curated(**values)


def page(a: Article) -> str:
    env = render.environment()
    return env.get_template("error.html").render(render.error_page(a, INFO))


def page_text(a: Article) -> str:
    """The page as a reader sees its text: tags taken out, entities decoded, spaces folded."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page(a))))


HOSTILE = [
    pytest.param("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;", id="script"),
    pytest.param("{{ 7 * 7 }} {% raw %}", "{{ 7 * 7 }} {% raw %}", id="jinja-syntax"),
    pytest.param("\u202eevil\u202c mirrored", "\u202eevil\u202c mirrored", id="rtl"),
    pytest.param("nul\0byte", "nul\ufffdbyte", id="nul"),
    pytest.param('"quoted" & <b>', "&#34;quoted&#34; &amp; &lt;b&gt;", id="quotes-ampersand"),
]


@pytest.mark.parametrize(("message", "shown"), HOSTILE)
def test_hostile_messages_are_escaped(message, shown):
    html = page(article([message, Placeholder("<x>")]))
    assert shown in html
    assert "<script>" not in html and "\0" not in html
    assert "49" not in html
    assert '<span class="ph" title="filled in at run time">{&lt;x&gt;}</span>' in html


def test_long_message_title_is_cut_at_a_word_boundary():
    long = "word " * 100
    html = page(article([long]))
    title = re.search(r"<title>(.*?)</title>", html).group(1)
    assert title.startswith("word word") and "\u2026" in title and "wor\u2026" not in title
    assert render.shorten("alpha beta gamma", 12) == "alpha beta\u2026"


@pytest.mark.parametrize(
    ("markdown", "present", "absent"),
    [
        pytest.param("<script>x()</script>", "&lt;script&gt;", "<script>", id="raw-html-off"),
        pytest.param("[a](javascript:alert(1))", "[a](javascript:alert(1))", 'href="javascript', id="javascript-link"),
        pytest.param("[a](JaVaScRiPt:alert(1))", "[a]", "href=", id="javascript-any-case"),
        pytest.param("[a](data:text/html,x)", "[a]", "href=", id="data-link"),
        pytest.param("[a](vbscript:x)", "[a]", "href=", id="vbscript-link"),
        pytest.param("[a](https://example.org/x)", 'href="https://example.org/x"', "javascript", id="https-kept"),
        pytest.param("[a](../other/)", 'href="../other/"', "javascript", id="relative-kept"),
        pytest.param("![i](javascript:x)", "![i]", "<img", id="javascript-image"),
    ],
)
def test_curated_markdown_is_safe(markdown, present, absent):
    html = str(render.markdown(markdown))
    assert present in html
    assert absent not in html


def test_curated_sections_render_in_spec_order_and_escape():
    curated = curated_with(
        explanation="Means **this** <img src=x onerror=alert(1)>",
        solutions=(Solution("Use <b>flag</b>", "Run `--x`. [bad](javascript:alert(1))"),),
        example_fix=ExampleFix("python -m sglang.launch_server --x '<y>'", "python -m sglang.launch_server"),
        situations=("On **AMD** GPUs",),
        review=True,
    )
    html = page(article(["Boom"], curated=curated, related=(Related("fedcba9876543210", "Other <error>"),)))
    order = [html.index(f'id="{section}"') for section in ("message", "meaning", "source", "solutions", "example", "when", "related")]
    assert order == sorted(order)
    assert "<strong>this</strong>" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "Use &lt;b&gt;flag&lt;/b&gt;" in html and 'href="javascript' not in html
    assert "&lt;y&gt;" in html and "<strong>AMD</strong>" in html
    assert "waiting for review" in html
    assert "No explanation has been written" not in html
    assert 'href="../../errors/fedcba9876543210/">Other &lt;error&gt;</a>' in html


def test_the_top_of_a_page_links_to_its_fix_and_every_link_lands_on_a_section():
    """Solutions come after the source and the routes to it (the spec's order), which on a long
    page is far down: the top says where the fix is, curated or not."""
    curated = curated_with(
        solutions=(Solution("Use a flag", "Run `--x`."),),
        example_fix=ExampleFix("python -m sglang.launch_server --x", "python -m sglang.launch_server"),
        situations=("On AMD GPUs",),
    )
    for a, fix in ((article(["Boom"], curated=curated), "solutions"), (article(["Boom"], conditions=("not is_cuda()",)), "todo")):
        html = page(a)
        [jump] = re.findall(r'<p class="jump">(.*?)</p>', html)
        targets = re.findall(r'href="#([^"]+)"', jump)
        assert fix in targets and targets[0] == "meaning"
        assert all(f'id="{target}"' in html for target in targets)
        assert html.index('class="jump"') < html.index('id="message"')


def test_uncurated_page_says_so_and_shows_what_the_code_says():
    html = page(article(["Boom"], conditions=("not is_cuda()",)))
    assert "No explanation has been written for this error yet" in html
    assert "errorkb scaffold 0123456789abcdef" in html
    assert "Doc &lt;b&gt;string&lt;/b&gt;" in html
    assert "<code>&lt;y&gt;</code>" in html  # the derived trigger, escaped
    assert '<span class="row hit"><span class="ln" aria-hidden="true">3</span><span>raise</span> X' in html
    assert 'href="https://github.com/o/r/blob/abc123/python/sglang/m.py#L3"' in html


def test_uncurated_page_says_what_to_do_and_where_to_search_upstream():
    """With no fix written, a page still says what to do: search upstream's issues for the
    message's longest literal piece as a phrase, and report it with what upstream needs."""
    html = page(article(["Pool of ", Placeholder("{size}"), ' slots is too small for "ctx"', Placeholder("{n}")]))
    assert 'id="todo"' in html
    assert 'href="https://github.com/o/r/issues?q=is%3Aissue+%22slots+is+too+small+for+ctx%22"' in html
    assert 'href="https://github.com/o/r/issues/new/choose"' in html
    curated = curated_with(solutions=(Solution("Grow it", "Pass `--x`."),))
    assert 'id="todo"' not in page(article(["Boom"], curated=curated))


def test_printed_forms_are_shown_with_their_placeholders_and_in_the_document():
    curated = curated_with(printed=("Decode failed rank={rank} with exception <Boom>: {reason}",))
    a = article(["Boom"], curated=curated)
    html = page(a)
    assert 'id="printed"' in html
    assert 'Decode failed rank=<span class="ph">{rank}</span> with exception &lt;Boom&gt;: <span class="ph">{reason}</span>' in html
    assert 'id="printed"' not in page(article(["Boom"], curated=curated_with()))
    assert api.error_document(a, UPSTREAM)["printed"] == ["Decode failed rank={rank} with exception <Boom>: {reason}"]


def test_links_are_relative_and_footer_names_the_revision():
    html = page(article(["Boom"]))
    hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
    internal = [h for h in hrefs if not h.startswith("https://")]
    assert internal and all(not h.startswith("/") for h in internal)
    assert '<html lang="en" data-root="../../">' in html
    assert "abc123" in html and "2026-01-01" in html and 'href="../../api/errors/0123456789abcdef.json"' in html
    assert 'href="https://example.org/report"' in html
    assert '<link rel="canonical" href="https://kb.example.org/errors/0123456789abcdef/">' in html


def test_browse_pages_change_with_their_errors_not_with_the_revision():
    """A static host re-uploads what changed: a browse page names no revision, so an upstream
    commit changes only the lists whose errors changed; the home page names the revision."""
    later = render.OutputInfo(dataclasses.replace(UPSTREAM, revision="def456", date="2026-02-02T00:00:00Z"), INFO.base_url, INFO.report_url)
    other = dataclasses.replace(article(["Other"], path="python/sglang/other/n.py"), id="fedcba9876543210")
    before = dict(render.render_browse((article(["Boom"]), other), INFO))
    after = dict(render.render_browse((article(["Boom"]), other), later))
    assert before == after and "modules/python/sglang/other/index.html" in after
    footer = after["modules/python/sglang/other/index.html"].decode()
    assert 'Extracted from <a href="https://github.com/o/r">o/r</a>; each error' in footer and "abc123" not in footer
    # A new error in one folder changes its pages and those above, not its sibling's.
    moved = dataclasses.replace(other, title="Other now", template=Template(("Other now",)))
    edited = dict(render.render_browse((article(["Boom"]), moved), later))
    assert [path for path in sorted(after) if after[path] != edited[path]] == [
        "exceptions/ValueError/index.html",
        "modules/python/sglang/other/index.html",
    ]
    home = dict(render.render_shared((article(["Boom"]),), later, browse=False))["index.html"].decode()
    assert "def456" in home and "2026-02-02" in home


def test_browse_paths_are_the_pages_rendered_for_the_errors_raised_and_gone():
    nested = dataclasses.replace(article(["Deep"], path="python/sglang/a/b/c.py"), id="1111111111111111")
    top = dataclasses.replace(article(["Top"], path="setup.py"), id="2222222222222222", exception="OSError")
    gone = dataclasses.replace(article(["Gone"], path="python/sglang/old/x.py"), id="3333333333333333", status="retired", exception="KeyError")
    articles = (article(["Boom"]), nested, top, gone)
    rendered = {path for path, _ in render.render_browse(articles, INFO)}
    rendered |= {path for path, _ in render.gone_exception_pages(articles, INFO)}
    assert render.browse_paths(articles) == rendered
    assert "modules/python/sglang/a/index.html" in rendered and "exceptions/KeyError/index.html" in rendered
    assert "modules/python/sglang/old/index.html" not in rendered


def test_document_validates_and_is_stable_json():
    curated = curated_with(solutions=(Solution("t", "b"),), example_fix=ExampleFix("a", "b"), situations=("s",))
    document = api.error_document(article(["Boom ", Placeholder("x")], curated=curated), UPSTREAM)
    jsonschema.Draft202012Validator(api.error_schema("https://kb.example.org/")).validate(document)
    data = api.dumps(document)
    assert data.endswith(b"}\n") and json.loads(data) == document
    assert list(json.loads(data)) == sorted(document)
    assert document["message"] == "Boom {x}" and document["locations"][0]["snippet"]["code"].startswith("a\nb\n")


def test_schema_rejects_a_wrong_document():
    validator = jsonschema.Draft202012Validator(api.error_schema("https://kb.example.org/"))
    document = api.error_document(article(["Boom"]), UPSTREAM)
    assert validator.is_valid(document)
    assert not validator.is_valid({**document, "status": "gone"})
    assert not validator.is_valid({**document, "status": "moved"})  # moved needs moved_to
    assert not validator.is_valid({**document, "id": "XYZ"})


@pytest.mark.parametrize(
    "trigger",
    [
        "It is raised in `f` when `a` is `b`.",
        "It is raised in `f` when all of these hold:\n\n- `a` is `<b>`\n- the platform is not CUDA\n- `s` is `` ` ``\n",
        "It is raised in `f` inside the loop `for x in y` and while handling `OSError`, whatever the settings.",
        "It is raised when `x` is `a & b` or `y` is ` `` `.",
    ],
)
def test_derived_markdown_matches_markdown_it(trigger):
    assert render.derived_markdown(trigger) == render.markdown(trigger)


def test_sitemap_quotes_paths_that_need_it_and_escapes_the_base_url():
    info = render.OutputInfo(UPSTREAM, "https://kb.example.org/a&b/", "https://example.org/report")
    files = dict(render.render_shared((article(["Boom"], path="python/sglang/odd dir/é.py"),), info))
    sitemap = files["sitemap.xml"].decode()
    assert "<loc>https://kb.example.org/a&amp;b/errors/0123456789abcdef/</loc>" in sitemap
    assert "<loc>https://kb.example.org/a&amp;b/modules/python/sglang/odd%20dir/</loc>" in sitemap
    assert "odd dir" not in sitemap and "&b/" not in sitemap


def test_scope_is_read_from_where_the_sites_are():
    """A file of SGLang's own tests, benchmarks or examples, by its folder or name; an error
    raised in the product too is a product error."""
    from generator.model import scope_of, site_scope

    assert site_scope("python/sglang/multimodal_gen/test/unit/test_comfyui_h3.py") == "test"
    assert site_scope("python/sglang/test/test_utils.py") == "test"
    assert site_scope("python/sglang/srt/layers/conftest.py") == "test"
    assert site_scope("python/sglang/bench_serving.py") == "benchmark"
    assert site_scope("python/sglang/srt/server_args.py") == "product"
    assert site_scope("python/sglang/srt/testing_utils.py") == "product"
    assert scope_of(["python/sglang/test/a.py", "python/sglang/srt/a.py"]) == "product"
    assert scope_of(["python/sglang/test/a.py", "python/sglang/bench_one_batch.py"]) == "test"


def test_home_offers_the_exception_types_product_errors_raise_most():
    """Beside the search box, the types users meet most, with how many product errors raise
    each: errors only SGLang's tests raise do not count."""
    product = textwrap.dedent(
        """
        def f(x):
            if x == 1:
                raise ValueError("one is not allowed here")
            if x == 2:
                raise ValueError("two is not allowed here")
            raise RuntimeError("nothing else works either")
        """
    )
    tests = "def t(x):\n" + "".join(f"    if x == {n}:\n        raise TypeError('case {n} fails in the test')\n" for n in range(3))
    sites = extract_source(product.encode(), "python/sglang/srt/m.py") + extract_source(tests.encode(), "python/sglang/test/test_m.py")
    listed = listed_errors(group_sites(sites, "o/r"), {})
    assert render.top_exception_types(listed) == [("exceptions/ValueError/", "ValueError", 2), ("exceptions/RuntimeError/", "RuntimeError", 1)]
    html = dict(render.render_shared(listed, INFO, browse=False))["index.html"].decode()
    assert '<a href="exceptions/ValueError/"><code>ValueError</code></a> <span class="count">2</span>' in html
    assert "TypeError" not in html


def test_callers_tests_name_the_flags_the_page_explains():
    """Issue #18's `7a7ea5fbc3cb62fc`: the call at scheduler.py:2843 happens only under
    `get_mm().enable_broadcast_mm_inputs_process`, which the page shows as the flag it explains."""
    from generator.model import CallerNode, Callers, Route, Setting

    base = article(["Multimodal input processing failed on the TP entry rank"])
    call = CallerNode("python/sglang/srt/managers/scheduler.py", "Scheduler._get_multimodal_inputs", 2843, ("get_mm().enable_broadcast_mm_inputs_process",), Callers((), 0))
    routed = dataclasses.replace(base.locations[0], route=Route("serving", Callers((call,), 0)))
    flag = Setting("--enable-broadcast-mm-inputs-process", "Broadcast multimodal inputs.", "False", None, "python/sglang/srt/server_args.py", 9)
    text = page_text(dataclasses.replace(base, upstream=UPSTREAM, locations=(routed,), settings=(flag,)))
    assert "called by Scheduler._get_multimodal_inputs at python/sglang/srt/managers/scheduler.py:2843 when --enable-broadcast-mm-inputs-process is set" in text


def test_a_part_only_some_paths_add_is_shown_in_brackets_with_its_placeholders():
    """`pool_configurator.py` adds " Current value: mem_fraction_static=..." to "Not enough
    memory" only when the fraction is set: the page shows that part in brackets, says what they
    mean, and marks its value as filled in; never the template notation `{[...]}`."""
    optional = Placeholder(" Current value: mem_fraction_static={self.mem_fraction_static}", optional=True)
    shown = page(article(["Not enough memory. Please try to increase --mem-fraction-static.", optional]))
    heading = re.search(r'<h1 class="message">(.*?)</h1>', shown).group(1)
    assert heading == (
        'Not enough memory. Please try to increase --mem-fraction-static.<span class="opt" title="only in some cases">'
        '[ Current value: mem_fraction_static=<span class="ph" title="filled in at run time">{self.mem_fraction_static}</span>]</span>'
    )
    assert "{[" not in shown and "a part in [brackets] is there only in some cases" in shown
    assert "only in some cases" not in page(article(["Not enough memory."]))


def test_calls_from_one_function_under_the_same_tests_are_one_caller():
    """`kimi_linear.py`'s `_get_kda_local_num_heads` is called four times by
    `KimiDeltaAttention.__init__`, each call by the same callers: one item with its four
    lines, not four identical trees. A call under other tests stays an item of its own."""
    from generator.model import CallerNode, Callers, Route

    base = article(["KDA num_heads ({num_heads}) must be divisible by shard tp_size ({tp_size})"])
    path = "python/sglang/srt/models/kimi_linear.py"
    above = Callers((CallerNode(path, "KimiDecoderLayer.__init__", 559, ("config.is_kda_layer(layer_idx)",), Callers((), 0)),), 0)
    calls = tuple(CallerNode(path, "KimiDeltaAttention.__init__", line, (), above) for line in (250, 436, 437, 438))
    other = CallerNode(path, "KimiDeltaAttention.__init__", 500, ("use_short_conv",), above)
    routed = dataclasses.replace(base.locations[0], route=Route("load", Callers((*calls, other), 0)))
    text = page_text(dataclasses.replace(base, upstream=UPSTREAM, locations=(routed,)))
    assert f"called by KimiDeltaAttention.__init__ at {path}:250, 436, 437, 438 called by KimiDecoderLayer.__init__ at {path}:559" in text
    assert f"called by KimiDeltaAttention.__init__ at {path}:500 when use_short_conv is true" in text
    assert text.count("called by KimiDecoderLayer.__init__") == 2


def test_an_unexplained_launch_error_says_which_flags_or_that_none_is_involved():
    """Issue #18: a launch error with no fix written points at the flags shown below it, or
    says plainly that no flag is involved and names the environment variables it reads."""
    from generator.model import Callers, Route, Setting

    base = article(["SGLANG_USE_MLX requires an MLX device"])
    routed = dataclasses.replace(base.locations[0], route=Route("launch", Callers((), 0)))
    bare = dataclasses.replace(base, locations=(routed,), mentions=("SGLANG_USE_MLX",))
    text = page_text(bare)
    assert "No server flag appears in its message, its conditions or its callers' conditions" in text
    assert "and the environment variable SGLANG_USE_MLX." in text
    flagged = dataclasses.replace(bare, upstream=UPSTREAM, mentions=("--device",), settings=(Setting("--device", "The device to use.", "None", None, "python/sglang/srt/server_args.py", 9),))
    text = page_text(flagged)
    assert "The flags involved are listed above with upstream's help" in text and "The device to use." in text
    assert "No server flag appears" not in text
    # An assert at launch that tests flags is a check of the command line, not an internal one.
    asserted = dataclasses.replace(flagged, kind="assert")
    text = page_text(asserted)
    assert "The flags involved are listed above with upstream's help" in text and "An internal check failed" not in text
    text = page_text(dataclasses.replace(asserted, settings=(), mentions=()))
    assert "An internal check failed" in text


def test_a_page_lists_where_each_run_of_releases_raised_it():
    """Issue #17: the page says where each run of releases raised the error, line by line,
    the current place last; past six places the list is collapsed under how many and since
    which release."""
    from generator.model import Place, Versions

    def places(count: int) -> Article:
        runs = tuple(Place("python/sglang/srt/server_args.py", 100 + n, "ServerArgs.check", f"v0.5.{n}", f"v0.5.{n + 1}", f"v0.5.{n}") for n in range(count))
        return dataclasses.replace(article(["bad"]), versions=Versions("v0.5.0", None, "", (), runs, f"v0.5.{count}"))

    text = page_text(places(2))
    assert "Where older releases raised it python/sglang/srt/server_args.py:100 in ServerArgs.check: SGLang 0.5.0" in text
    assert "python/sglang/srt/server_args.py:101 in ServerArgs.check: SGLang 0.5.1" in text
    assert "python/sglang/m.py:3 in f: since 0.5.2 (above)" in text
    many = page(places(7))
    assert "<summary>8 places since SGLang 0.5.0, one per run of releases that raised it at the same line</summary>" in many
    assert "<summary>" not in page(places(2)).split("earlier-places", 1)[1].split("</section>", 1)[0]


_JSON_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_JSON_TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_DOCUMENTS)
def test_api_documents_are_the_bytes_of_sorted_compact_utf8_json(document):
    """What every API file is written with (sorted keys, not ASCII-escaped, compact, one
    trailing newline), byte for byte as Python's json module writes it."""
    expected = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    assert api.dumps(document) == expected
    assert json.loads(api.dumps(document)) == json.loads(expected)


def test_a_curated_phase_replaces_the_call_graphs_on_the_page_the_api_and_the_lists():
    """A processor built through a registry at start-up (`9a1214ddfb8b8c72`) reads as `request`
    to the call graph; its curated entry says `load`, and every place that shows the phase
    takes that: the page, the API document, the lists of errors."""
    from generator.model import Callers, Route

    base = article(["Cannot find corresponding multimodal processor"])
    routed = dataclasses.replace(base.locations[0], route=Route("request", Callers((), 0)))
    graph_only = dataclasses.replace(base, upstream=UPSTREAM, locations=(routed,))
    assert graph_only.phase == "request"
    curated = dataclasses.replace(graph_only, curated=curated_with(phase="load"))
    assert curated.phase == "load"
    assert api.error_document(curated, UPSTREAM)["phase"] == "load"
    text = page_text(curated)
    assert "When: while loading" in text and "on a request" not in text

    class Routes:
        def phase(self, where):
            return "request"

    (site,) = extract_source(b'def f(x):\n    raise ValueError("no processor for " + x)\n', "python/sglang/srt/m.py")
    (entry,) = group_sites((site,), "o/r")
    assert [e.phase for e in listed_errors((entry,), {}, routes=Routes())] == ["request"]
    assert [e.phase for e in listed_errors((entry,), {entry.id: curated_with(id=entry.id, phase="load")}, routes=Routes())] == ["load"]
