"""The snippet lexer: Pygments' own tokens, found with one regex call per token."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygments.lexer import RegexLexer, bygroups, combined, default, include
from pygments.lexers import PythonLexer
from pygments.token import Keyword, Name, Number, Operator, Punctuation, String, Whitespace

from generator.config import Config
from generator.highlight import OneMatchPerToken, QuickPythonLexer, _first_characters, highlight_lines
from generator.upstream import open_source
from tests import conftest

OPTIONS = {"stripnl": False, "ensurenl": False}


class Toy(RegexLexer):
    """Every kind of rule and state change a RegexLexer has, in a few lines."""

    flags = re.MULTILINE
    tokens = {
        "root": [
            (r"(?i)begin\b", Keyword, "block"),
            (r"(\w+)(\s*)(=)", bygroups(Name, Whitespace, Operator)),
            (r"<<", Punctuation, "heredoc"),
            (r"\(", Punctuation, combined("block", "inner")),
            (r"\d+", Number),
            (r"[ \t]+", Whitespace),
            (r"\w+", Name),
        ],
        "block": [
            (r"(?i)end\b", Keyword, "#pop"),
            (r"\{", Punctuation, ("block", "inner")),
            (r"\}", Punctuation, "#pop:2"),
            (r"!", Punctuation, "#push"),
            include("root"),
        ],
        "inner": [
            (r"[a-z]+", Name.Attribute),
            default("#pop"),
        ],
        # A backreference: this state cannot be joined and keeps the rule-by-rule loop.
        "heredoc": [
            (r"(\w)\1*", String),
            (r">>", Punctuation, "#pop"),
        ],
    }


class QuickToy(OneMatchPerToken, Toy):
    pass


TOY_TEXT = st.text(alphabet="abeginndBEGINEND{}!<>()=019 \t\n'\"$é", max_size=80)


@settings(max_examples=400, deadline=None)
@given(TOY_TEXT)
def test_every_kind_of_rule_and_state_change_gives_the_lexers_own_tokens(text):
    assert list(QuickToy(**OPTIONS).get_tokens(text)) == list(Toy(**OPTIONS).get_tokens(text))


def test_a_state_with_a_backreference_is_matched_rule_by_rule_and_the_rest_joined():
    lexer = QuickToy(**OPTIONS)
    finders = {state: lexer._dispatch(state).every() for state in lexer._tokens}
    assert finders["heredoc"].__name__ == "one_by_one"
    assert {name for state, name in ((s, f.__name__) for s, f in finders.items()) if state != "heredoc"} == {"at_once"}
    text = "<<aaab>> begin x=1 {foo} end"
    assert list(QuickToy(**OPTIONS).get_tokens(text)) == list(Toy(**OPTIONS).get_tokens(text))


TRICKY_PYTHON = [
    'x = f"{a!r:>{width}} {b[\'k\']}" + rb\'\\x00\' + Rb"""\n multi """ + fR\'{x}\'\n',
    "s = '''unterminated\n  still string\n",
    'def f(x: int = 1, *a, **k) -> "T":\n    """Doc."""\n    return x @ y if x else ~y\n',
    "match point:\n    case Point(x=0) | None:\n        pass\n",
    "@decorator(1e-3, 0x1F, 1_000j)\nasync def g():\n    await h()\n",
    "weird $ ? ` chars\x00and NUL\r\nwindows lines\r\n\tand tabs\n",
    "x = 'line one \\\ncontinued'  # comment\nلا = 'RTL ‮'\n",
    'f"{x:{y}.{z}f}" f"{{literal}}" f"{\'nested\' + f\'{q}\'}"',
]


def test_tricky_python_gives_pygments_own_tokens():
    for text in TRICKY_PYTHON:
        assert list(QuickPythonLexer(**OPTIONS).get_tokens(text)) == list(PythonLexer(**OPTIONS).get_tokens(text)), text


@pytest.mark.real
def test_real_sglang_files_give_pygments_own_tokens():
    source = open_source(f"pypi:sglang=={conftest.DEFAULT_VERSION}", Config(), conftest.test_cache_dir())
    files = source.files()[::60]
    assert len(files) > 70
    quick, plain = QuickPythonLexer(**OPTIONS), PythonLexer(**OPTIONS)
    for file in files:
        text = source.read(file).decode("utf-8", errors="replace")
        assert list(quick.get_tokens(text)) == list(plain.get_tokens(text)), file.path


# Text drawn from Python's own characters, and a few that are not ASCII (the Kelvin sign
# matches k when case is ignored).
PYTHONISH = st.text(alphabet="abfrtuBFRTUkKsxe_019 \t\n\\'\"#@.:=+-*/%<>!()[]{},;~^&|$?é\u212a\u017f", max_size=12)


@settings(max_examples=300, deadline=None)
@given(PYTHONISH)
def test_no_rule_of_the_python_lexer_matches_at_a_character_its_dispatch_skips(text):
    """A rule is left out of a character's alternation only if no match of it can start with
    that character: otherwise a token would change kind wherever that character starts it."""
    for match, first in _python_rules():
        if first is not None and match(text, 0) is not None:
            assert text, match.__self__.pattern
            assert ord(text[0]) >= 128 or ord(text[0]) in first, (match.__self__.pattern, text)


@cache
def _python_rules() -> list:
    """(match, first characters) of every rule of every state of the Python lexer."""
    lexer = QuickPythonLexer(**OPTIONS)
    return [(rule[0], _first_characters(rule[0].__self__, lexer.flags)) for rules in lexer._tokens.values() for rule in rules]


@pytest.mark.parametrize(
    ("pattern", "starts"),
    [
        (r"(?i)\u212a", "kK"),  # a non-ASCII letter matching ASCII ones
        (r"(?i:b)x|c", "bBc"),
        (r"(?<!\.)(abs|all)\b", "a"),  # a lookbehind matches no character
        (r"[^\S\n]+", " \t\r\x0b\x0c\x1c\x1d\x1e\x1f"),
        (r"([uU]?)(\")", "uU\""),
        (r"\d*\.\d+", "0123456789."),
    ],
)
def test_first_characters_of_a_pattern(pattern, starts):
    assert _first_characters(re.compile(pattern), 0) == frozenset(map(ord, starts))


@pytest.mark.parametrize("pattern", [r"x?", r"\b", r"(a)?\1", r"(a)?(?(1)a|b)", r"a*"])
def test_a_pattern_that_may_match_nothing_or_is_not_followed_is_tried_everywhere(pattern):
    assert _first_characters(re.compile(pattern), 0) is None


def _pygments_lines(code: str) -> list[str]:
    """What Pygments' own formatter gives for `highlight_lines`'s tokens, split into lines."""
    from pygments import format as pygments_format
    from pygments.formatters import HtmlFormatter
    from pygments.token import Token

    from generator.highlight import _PLAIN

    tokens = ((Token.Text if kind in _PLAIN else kind, text) for kind, text in QuickPythonLexer(**OPTIONS).get_tokens(code))
    lines = pygments_format(tokens, HtmlFormatter(nowrap=True)).split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


@pytest.mark.parametrize("code", [*TRICKY_PYTHON, "", "\n\n", "\ufeffx = 1", "a = '''<b>\n\n&c'''\nd", 's = """one\ntwo"""\n'])
def test_highlighted_lines_are_pygments_own_html(code):
    assert highlight_lines(code) == _pygments_lines(code)


@pytest.mark.real
def test_real_sglang_files_highlight_as_pygments_formats_them():
    source = open_source(f"pypi:sglang=={conftest.DEFAULT_VERSION}", Config(), conftest.test_cache_dir())
    for file in source.files()[7::120]:
        code = source.read(file).decode("utf-8", errors="replace")
        assert highlight_lines(code) == _pygments_lines(code), file.path


def test_highlighted_lines_are_closed_on_each_line():
    lines = highlight_lines('s = """one\ntwo"""\nx = 1\n')
    assert len(lines) == 3
    for line in lines:
        assert line.count("<span") == line.count("</span>")


def test_the_excerpt_cache_outlives_an_edit_of_the_related_errors_ranking(tmp_path, monkeypatch):
    """Excerpts are kept under `excerpter_version`: it changes with what makes them (the
    highlighter and the docstring reader), not with the module that ranks related errors."""
    from generator import derive, docstrings, highlight

    before = highlight.excerpter_version()
    edited = tmp_path / "derive.py"
    edited.write_text(Path(derive.__file__).read_text() + "\n# an edit of the ranking\n")
    monkeypatch.setattr(derive, "__file__", str(edited))
    assert highlight.excerpter_version() == before
    reader = tmp_path / "docstrings.py"
    reader.write_text(Path(docstrings.__file__).read_text() + "\n# an edit of the reader\n")
    monkeypatch.setattr(docstrings, "__file__", str(reader))
    assert highlight.excerpter_version() != before
