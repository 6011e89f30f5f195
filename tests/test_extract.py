"""The extractor's pure core on inline snippets: which sites, their templates, conditions,
context, qualified names and keys."""

from __future__ import annotations

import hashlib
import textwrap

import pytest

from generator.extract import UnparsableFile, extract_source, negate, one_line
from generator.model import error_id

PATH = "python/sglang/srt/example.py"


def sites_of(source: str):
    return extract_source(textwrap.dedent(source).encode(), PATH)


def only_site(source: str):
    [site] = sites_of(source)
    return site


# -- Which statements are sites --------------------------------------------------------------

FINDS_NOTHING = [
    pytest.param("try:\n    f()\nexcept Exception:\n    raise\n", id="bare-reraise"),
    pytest.param("x = 'raise ValueError(1)'  # assert x\n", id="words-in-strings-and-comments"),
    pytest.param("import warnings\nwarnings.filterwarnings('ignore')\n", id="other-warnings-function"),
    pytest.param("def warn(msg):\n    print(msg)\nwarn('not the warnings module')\n", id="local-warn-function"),
    pytest.param("import logging\nlogging.warning('log, not warn')\n", id="logging"),
]


@pytest.mark.parametrize("source", FINDS_NOTHING)
def test_finds_nothing(source):
    assert sites_of(source) == ()


FINDS_A_SITE = [
    pytest.param("raise ValueError('x')", "raise", "ValueError", id="raise-call"),
    pytest.param("raise ValueError", "raise", "ValueError", id="raise-class"),
    pytest.param("raise errors.BadRequest('x') from None", "raise", "errors.BadRequest", id="raise-from"),
    pytest.param("assert x", "assert", "AssertionError", id="assert"),
    pytest.param("import warnings\nwarnings.warn('x')", "warning", "UserWarning", id="warnings-warn"),
    pytest.param(
        "import warnings\nwarnings.warn('x', DeprecationWarning)", "warning", "DeprecationWarning", id="category"
    ),
    pytest.param(
        "import warnings\nwarnings.warn('x', category=FutureWarning, stacklevel=2)",
        "warning",
        "FutureWarning",
        id="category-keyword",
    ),
    pytest.param("from warnings import warn\nwarn('x')", "warning", "UserWarning", id="from-import-warn"),
    pytest.param("from warnings import warn as w\nw('x')", "warning", "UserWarning", id="from-import-alias"),
    pytest.param("import warnings as wa\nwa.warn('x')", "warning", "UserWarning", id="module-alias"),
    pytest.param("def f(x=warnings.warn('x')):\n    pass\nimport warnings", "warning", "UserWarning", id="in-default"),
]


@pytest.mark.parametrize("source, kind, exception", FINDS_A_SITE)
def test_finds_a_site(source, kind, exception):
    site = only_site(source)
    assert (site.kind, site.exception) == (kind, exception)


def test_positions_are_the_statement_lines():
    site = only_site(
        """\
        def f():
            raise ValueError(
                "a"
            )
        """
    )
    assert (site.line, site.end_line) == (2, 4)


# -- Message templates ---------------------------------------------------------------------

TEMPLATES = [
    pytest.param("raise E('Plain text.')", "Plain text.", id="literal"),
    pytest.param("raise E(f'Please use {choices}.')", "Please use {choices}.", id="f-string"),
    pytest.param("raise E(f'{x!r} and {y:.2f} and {z=}')", "{x!r} and {y:.2f} and {z=}", id="conversion-spec-equal"),
    pytest.param("raise E(f'got {x:>{width}}')", "got {x:>{width}}", id="nested-format-spec"),
    pytest.param("raise E(f'{{literal}} {x}')", "{{literal}} {x}", id="escaped-braces-f-string"),
    pytest.param("raise E('dict {a: 1}')", "dict {{a: 1}}", id="braces-in-plain-literal"),
    pytest.param("raise E('a ' f'{b} ' 'c')", "a {b} c", id="implicit-concatenation"),
    pytest.param(
        "raise E(\n    'first line '\n    f'{value} '  # why\n    'end'\n)", "first line {value} end", id="multi-line-concat"
    ),
    pytest.param("raise E('a ' + name + ' b')", "a {name} b", id="plus"),
    pytest.param("raise E('n=' + str(n))", "n={str(n)}", id="plus-call"),
    pytest.param("raise E('{} of {}'.format(a, b))", "{a} of {b}", id="format-auto"),
    pytest.param("raise E('{1} or {0}'.format(a, b))", "{b} or {a}", id="format-indexed"),
    pytest.param("raise E('{name!r:>4} in {0.attr}'.format(obj, name=n))", "{n!r:>4} in {obj.attr}", id="format-named"),
    pytest.param("raise E('%s is %d' % (a, b))", "{a} is {b}", id="percent-tuple"),
    pytest.param("raise E('%r only' % x)", "{x!r} only", id="percent-single"),
    pytest.param("raise E('%.2f%% done' % ratio)", "{ratio:.2f}% done", id="percent-spec-and-escape"),
    pytest.param("raise E('%(a)s/%(b)s' % {'a': x, 'b': y})", "{x}/{y}", id="percent-dict"),
    # Found by tests/test_extract_properties.py: printf's `-` flag and a padded `%s`/`%r` must
    # become a format spec that gives the same text (`-` is a sign there; `format` pads a
    # string on the right, `%` on the left).
    pytest.param("raise E('%-5d|%5s|%-4s|%8r' % (a, b, c, d))", "{a:<5d}|{b!s:>5}|{c!s:<4}|{d!r:>8}", id="percent-width-flags"),
    pytest.param("raise E('%.2s and %5i' % (a, b))", "{a!s:>.2} and {b:5d}", id="percent-precision-and-i"),
    pytest.param("raise E('tab\\there')", "tab\there", id="escape-decoded"),
    pytest.param("raise E(f'tab\\t{x}')", "tab\t{x}", id="escape-decoded-f-string"),
    pytest.param("raise E(rf'raw\\d{x}')", "raw\\d{x}", id="raw-f-string"),
    pytest.param("raise HTTPException(status_code=400, detail=f'bad {x}')", "bad {x}", id="detail-keyword"),
    pytest.param("assert ok, f'got {v}'", "got {v}", id="assert-message"),
    pytest.param("import warnings\nwarnings.warn(f'old {api}')", "old {api}", id="warning-message"),
]


@pytest.mark.parametrize("source, message", TEMPLATES)
def test_message_template(source, message):
    site = only_site(source)
    assert site.template.text == message
    # Values and punctuation alone name no error: such a site is keyed by its place.
    assert site.message == (message if site.template.has_literal else None)


NO_LITERAL_TEXT = [
    pytest.param("raise E(msg)", id="variable"),
    pytest.param("raise E(build_message(x))", id="call"),
    pytest.param("raise E(f'{x}')", id="only-a-placeholder"),
    pytest.param("raise E()", id="no-arguments"),
    pytest.param("assert x is not None", id="assert-without-message"),
]


@pytest.mark.parametrize("source", NO_LITERAL_TEXT)
def test_message_without_literal_text_is_none(source):
    assert only_site(source).message is None


def test_template_key_collapses_whitespace_and_blanks_placeholders():
    site = only_site("raise E(f'a  {x!r}\\n\\tb {{c}}')")
    assert site.template.key == "a {} b {{c}}"


# -- Raised variables --------------------------------------------------------------------------


def test_raised_variable_resolves_to_local_assignment():
    site = only_site(
        """\
        def f(x):
            err = RuntimeError(f"bad {x}")
            raise err
        """
    )
    assert (site.exception, site.message) == ("RuntimeError", "bad {x}")


def test_raised_variable_resolves_to_except_handler():
    site = only_site(
        """\
        try:
            g()
        except OSError as error:
            raise error
        """
    )
    assert (site.exception, site.message) == ("OSError", None)


def test_unresolvable_raised_variable_has_unknown_exception():
    site = only_site("def f(exc):\n    raise exc\n")
    assert site.exception is None


# -- Guard conditions --------------------------------------------------------------------------

CONDITIONS = [
    pytest.param(
        """\
        if is_cuda():
            pass
        else:
            raise E("x")
        """,
        ("not is_cuda()",),
        id="else-negates-if",
    ),
    pytest.param(
        """\
        if a:
            pass
        elif b:
            pass
        else:
            raise E("x")
        """,
        ("not a", "not b"),
        id="else-negates-every-elif",
    ),
    pytest.param(
        """\
        if a:
            pass
        elif b > 1:
            raise E("x")
        """,
        ("not a", "b > 1"),
        id="elif",
    ),
    pytest.param(
        """\
        def validate(kv_cache_dtype):
            if kv_cache_dtype in HISPARSE_KV_CACHE_DTYPES:
                return
            raise E("x")
        """,
        ("kv_cache_dtype not in HISPARSE_KV_CACHE_DTYPES",),
        id="early-return",
    ),
    pytest.param(
        """\
        def f(x, y):
            if x is None:
                raise E("first")
            elif y:
                return
            if x == 2:
                raise E("x")
        """,
        ("x is not None", "not y", "x == 2"),
        id="early-raise-chain",
    ),
    pytest.param(
        """\
        for item in items:
            if item.skip:
                continue
            raise E("x")
        """,
        ("not item.skip",),
        id="early-continue",
    ),
    pytest.param(
        """\
        def f(x):
            if x:
                y = 1
            raise E("x")
        """,
        (),
        id="if-that-does-not-exit-guards-nothing",
    ),
    pytest.param(
        """\
        if a or b is not None:
            return
        raise E("x")
        """,
        ("not a", "b is None"),
        id="negated-or-splits",
    ),
    pytest.param(
        """\
        if a and b:
            pass
        else:
            raise E("x")
        """,
        ("not (a and b)",),
        id="negated-and",
    ),
    pytest.param(
        """\
        if not ready:
            pass
        else:
            raise E("x")
        """,
        ("ready",),
        id="double-negation",
    ),
    pytest.param(
        """\
        while budget > 0:
            raise E("x")
        """,
        ("budget > 0",),
        id="while",
    ),
    pytest.param(
        """\
        if (
            first  # comment
            and second
        ):
            raise E("x")
        """,
        ("first and second",),
        id="multi-line-condition-on-one-line",
    ),
    pytest.param(
        """\
        if outer:
            def inner():
                raise E("x")
        """,
        (),
        id="function-body-starts-unguarded",
    ),
    pytest.param(
        """\
        match mode:
            case "a" if strict:
                raise E("x")
        """,
        ("strict",),
        id="match-guard",
    ),
]


@pytest.mark.parametrize("source, conditions", CONDITIONS)
def test_conditions(source, conditions):
    assert sites_of(source)[-1].conditions == conditions


def test_assert_records_its_own_condition_apart_from_guards():
    site = only_site("if enabled:\n    assert tp_size % 2 == 0, 'even'\n")
    assert (site.assert_condition, site.conditions) == ("tp_size % 2 == 0", ("enabled",))


def test_context_names_loops_with_and_handlers():
    site = only_site(
        """\
        for rank in range(world):
            with lock:
                try:
                    step()
                except (OSError, ValueError) as error:
                    raise E("x")
        """
    )
    assert site.context == ("for rank in range(world)", "with lock", "except (OSError, ValueError) as error")


NEGATIONS = [
    pytest.param("is_cuda()", ("not is_cuda()",), id="call"),
    pytest.param("x in y", ("x not in y",), id="in"),
    pytest.param("x is not None", ("x is None",), id="is-not"),
    pytest.param("a < b", ("a >= b",), id="less-than"),
    pytest.param("not flag", ("flag",), id="not"),
    pytest.param("(not flag)", ("flag",), id="parenthesized"),
    pytest.param("a or not b", ("not a", "b"), id="or"),
    pytest.param("0 < x <= 1", ("not (0 < x <= 1)",), id="chained-comparison"),
    pytest.param("x + 1", ("not (x + 1)",), id="arithmetic"),
]


@pytest.mark.parametrize("condition, negated", NEGATIONS)
def test_negation_is_readable(condition, negated):
    assert negate(condition) == negated


def test_one_line_keeps_text_and_drops_breaks():
    assert one_line('foo(\n    a,  # why\n    b="x  y",\n)') == 'foo(a, b="x  y",)'


# -- Qualified names ---------------------------------------------------------------------------


def test_qualified_names():
    sites = sites_of(
        """\
        raise E("module")

        class ServerArgs:
            assert True, "class body"

            def _handle(self):
                raise E("method")

                def helper():
                    raise E("nested function")

                    class Local:
                        def m(self):
                            raise E("method of a local class")

            class Inner:
                async def run(self):
                    raise E("nested class")
        """
    )
    assert [(s.message, s.function) for s in sites] == [
        ("module", ""),
        ("class body", "ServerArgs"),
        ("method", "ServerArgs._handle"),
        ("nested function", "ServerArgs._handle.<locals>.helper"),
        ("method of a local class", "ServerArgs._handle.<locals>.helper.<locals>.Local.m"),
        ("nested class", "ServerArgs.Inner.run"),
    ]


# -- Ids ---------------------------------------------------------------------------------------


def spec_id(repo: str, exception: str, key: str) -> str:
    return hashlib.sha256(f"errorkb-id-v1\0{repo}\0{exception}\0{key}".encode()).hexdigest()[:16]


def test_id_of_a_message_follows_spec_and_ignores_place():
    site = only_site("def f():\n    raise ValueError(f'Need  {a}\\n more {b!r}')\n")
    assert site.id("sgl-project/sglang") == spec_id("sgl-project/sglang", "ValueError", "Need {} more {}")
    moved = extract_source(b"class K:\n    def g(self):\n\n        raise ValueError(f'Need {x} more {y}')\n", "other.py")
    assert moved[0].id("sgl-project/sglang") == site.id("sgl-project/sglang")


def test_sites_without_text_get_location_keys_with_ordinals():
    sites = sites_of(
        """\
        def f(x):
            assert x is not None
            assert x is not None
            raise ValueError(msg)
            assert y
        """
    )
    assert [s.key for s in sites] == [
        f"@{PATH}:f:0:x is not None",
        f"@{PATH}:f:1:x is not None",
        f"@{PATH}:f:0",
        f"@{PATH}:f:0:y",
    ]
    assert len({s.id("r") for s in sites}) == 4
    assert sites[2].id("r") == error_id("r", "ValueError", f"@{PATH}:f:0")


# -- Bad input ---------------------------------------------------------------------------------

UNPARSABLE = [
    pytest.param(b"def f(:\n    pass\n", "syntax error at line 1", id="syntax-error"),
    pytest.param(b"x = 1\x00\n", "null bytes", id="nul-byte"),
    pytest.param(b"x = '\xff\xfe'\n", "cannot decode", id="invalid-utf8"),
    pytest.param(b"# -*- coding: klingon -*-\nx = 1\n", "cannot decode", id="unknown-coding"),
    pytest.param(b"print 'python 2'\n", "syntax error", id="python-2"),
]


@pytest.mark.parametrize("data, reason", UNPARSABLE)
def test_unparsable_file_says_why(data, reason):
    with pytest.raises(UnparsableFile, match=reason):
        extract_source(data, PATH)


def test_bom_and_non_ascii_text_keep_exact_positions_and_text():
    data = "\ufeffname = 'é'\nraise ValueError(f'Größe {name} ungültig')\n".encode()
    [site] = extract_source(data, PATH)
    assert (site.line, site.message) == (2, "Größe {name} ungültig")


def test_latin1_coding_cookie_is_honoured():
    data = "# -*- coding: latin-1 -*-\nraise ValueError('café')\n".encode("latin-1")
    assert extract_source(data, PATH)[0].message == "café"


def test_a_message_held_in_a_variable_is_read_from_its_assignments():
    """`msg = "..."`, then `msg += ...`: the message users see, with an addition made only on
    some paths as an optional part; an f-string assigned once; not a value of unknown text."""
    source = textwrap.dedent(
        '''
        def post_init(self):
            if self.max_total_num_tokens <= 0:
                msg = "Not enough memory. Please try to increase --mem-fraction-static."
                if self.mem_fraction_static is not None:
                    msg += f" Current value: mem_fraction_static={self.mem_fraction_static}"
                raise RuntimeError(msg)

        def balance(pre, local):
            msg = "The memory capacity is unbalanced. "
            msg += f"{pre=}"
            raise RuntimeError(msg)

        def decode(n):
            error_msg = f"Decode out of memory. Try to allocate {n} tokens."
            raise RuntimeError(error_msg)

        def unknown(x):
            m = describe(x)
            raise ValueError(m)
        '''
    ).encode()
    memory, balance, decode, unknown = extract_source(source, "python/sglang/srt/m.py")
    assert memory.message == "Not enough memory. Please try to increase --mem-fraction-static.{[ Current value: mem_fraction_static={self.mem_fraction_static}]}"
    assert memory.key == "Not enough memory. Please try to increase --mem-fraction-static.{}"
    assert memory.legacy_key == "@python/sglang/srt/m.py:post_init:0"
    assert balance.message == "The memory capacity is unbalanced. {pre=}" and balance.key == "The memory capacity is unbalanced. pre={}"
    assert decode.message == "Decode out of memory. Try to allocate {n} tokens."
    assert unknown.message is None and unknown.legacy_key is None


def test_a_message_assigned_in_several_branches_is_read_from_the_one_on_the_raises_path():
    """SGLang's tokenizer loader assigns `err_msg` in two `except` branches, each raising it:
    each raise reads the assignment on its own path; a later assignment in a branch the raise is
    not in leaves the message unknown. The id such a message-less site had before keeps leading
    to it (`legacy_key`): numbered among the sites without text, as then."""
    source = textwrap.dedent(
        '''
        def load(name):
            try:
                return open_it(name)
            except TypeError as e:
                err_msg = "Failed to load the tokenizer. Use the fast tokenizer."
                raise RuntimeError(err_msg) from e
            except ValueError as e:
                if "does not exist" in str(e):
                    err_msg = (
                        "Failed to load the tokenizer. If the tokenizer is a custom "
                        "tokenizer, use --trust-remote-code."
                    )
                    raise RuntimeError(err_msg) from e
                raise

        def maybe(flag):
            msg = "first"
            if flag:
                msg = "second"
            raise RuntimeError(msg)
        '''
    ).encode()
    fast, custom, maybe = extract_source(source, "python/sglang/srt/t.py")
    assert fast.message == "Failed to load the tokenizer. Use the fast tokenizer."
    assert custom.message == "Failed to load the tokenizer. If the tokenizer is a custom tokenizer, use --trust-remote-code."
    # Before, `custom` was the only site of `load` without text: ordinal 0.
    assert custom.legacy_key == "@python/sglang/srt/t.py:load:0"
    assert maybe.message is None


def test_self_documenting_placeholders_keep_their_text_and_punctuation_alone_is_no_message():
    """`{res=}` prints `res=`: it keys as text, so asserts made of such placeholders are each
    their own error; a template of values and punctuation only (`{a}, {b}`) keys by location."""
    source = textwrap.dedent(
        '''
        def warmup(res):
            assert res.ok, f"{res=}, {res.text=}"
            assert res.size, f"{res.size}, {res.limit}"
            assert res.code, f"{res.code=}"
        '''
    ).encode()
    documented, punctuation, other = extract_source(source, "python/sglang/srt/h.py")
    assert documented.key == "res={}, res.text={}" and documented.legacy_key == "{}, {}"
    assert punctuation.message is None and punctuation.key.startswith("@python/sglang/srt/h.py:warmup:0")
    assert punctuation.legacy_key == "{}, {}"
    assert other.key == "res.code={}" and other.legacy_key.startswith("@python/sglang/srt/h.py:warmup:")


# -- Raisers: a function that raises what its caller passes --------------------------------------

RAISER = textwrap.dedent(
    """\
    def raise_error_or_warn(obj, strict, counter_name, message, log_interval=1000):
        if strict:
            raise ValueError(message)
    """
)

RAISER_CALLS = [
    pytest.param(
        RAISER + "def check(pool, n):\n    if n:\n        raise_error_or_warn(pool, True, 'c', f'{n} pages leaked!')\n",
        ("{n} pages leaked!", "check", ("n",)),
        id="positional-f-string",
    ),
    pytest.param(
        RAISER + "def check(pool, n):\n    raise_error_or_warn(pool, True, 'c', message='leak: %d pages' % n)\n",
        ("leak: {n} pages", "check", ()),
        id="keyword-percent",
    ),
    pytest.param(
        RAISER
        + "class Checker:\n    def _report_leak(self, pool_name, token_msg):\n"
        + "        msg = f'{pool_name} memory leak detected! {token_msg}'\n"
        + "        raise_error_or_warn(self, True, 'c', msg)\n",
        ("{pool_name} memory leak detected! {token_msg}", "Checker._report_leak", ()),
        id="local-variable",
    ),
    pytest.param(
        "class Pool:\n    def _fail(self, reason):\n        raise RuntimeError(reason)\n"
        + "    def alloc(self, n):\n        if n > 4:\n            self._fail('too many pages: {}'.format(n))\n",
        ("too many pages: {n}", "Pool.alloc", ("n > 4",)),
        id="method-through-self",
    ),
]


@pytest.mark.parametrize("source, expected", RAISER_CALLS)
def test_a_call_to_a_raiser_is_a_site_with_the_message_it_passes(source, expected):
    sites = sites_of(source)
    [call] = [site for site in sites if site.message is not None]
    assert (call.message, call.function, call.conditions) == expected
    assert call.kind == "raise" and call.legacy_key is None
    assert call.exception == ("RuntimeError" if "Pool" in source else "ValueError")
    # The raiser's own site stays: its published id keeps resolving.
    assert any(site.message is None and site.exception == call.exception for site in sites)


RAISER_CALLS_WITHOUT_SITE = [
    pytest.param(RAISER + "def check(pool, msg):\n    raise_error_or_warn(pool, True, 'c', msg)\n", id="message-is-a-parameter"),
    pytest.param(RAISER + "def check(pool, *args):\n    raise_error_or_warn(*args, 'text after a star')\n", id="position-unknown-after-star"),
    pytest.param(RAISER + "def check(pool):\n    raise_error_or_warn(pool, True, 'a counter name, not the message')\n", id="other-argument"),
    pytest.param("def fail(message):\n    raise ValueError(f'bad: {message}')\ndef g():\n    fail('x')\n", id="message-not-the-parameter-as-is"),
    pytest.param("def f():\n    def fail(m):\n        raise ValueError(m)\n    fail('nested functions are not raisers')\n", id="nested-function"),
    pytest.param("class A:\n    def fail(self, m):\n        raise ValueError(m)\ndef g(a):\n    a.fail('not self')\n", id="method-not-through-self"),
]


@pytest.mark.parametrize("source", RAISER_CALLS_WITHOUT_SITE)
def test_a_call_that_passes_no_text_to_a_raiser_adds_no_site(source):
    assert all(site.message is None or "fail" in source and site.message.startswith("bad") for site in sites_of(source))


def test_a_raiser_and_the_names_a_file_imports_are_recorded():
    from generator.extract import extract_file
    from generator.model import Binding, Raiser

    source = textwrap.dedent(
        """\
        import os.path as p
        from .common import fail as f, other
        from sglang.srt.utils import *
        class Pool:
            @staticmethod
            def stop(reason):
                raise RuntimeError(reason)
            def run(self):
                from x import y
        def kw(*, detail):
            raise KeyError(detail)
        """
    )
    extracted = extract_file(source.encode(), PATH)
    assert extracted.raisers == (Raiser("Pool.stop", "reason", 0, "RuntimeError", True, 7, 7), Raiser("kw", "detail", None, "KeyError", False, 11, 11))
    assert extracted.bindings == (
        Binding("p", "os.path"),
        Binding("f", ".common", "fail"),
        Binding("other", ".common", "other"),
        Binding("*", "sglang.srt.utils", "*"),
        Binding("y", "x", "y"),
    )


def test_imports_under_match_and_try_are_read():
    from generator.extract import extract_file

    source = "match x:\n    case 1:\n        from a import b\ntry:\n    import c\nexcept ImportError:\n    from d import e\n"
    assert [b.name for b in extract_file(source.encode(), PATH).bindings] == ["b", "c", "e"]
