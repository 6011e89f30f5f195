"""Property tests for the extractor: Hypothesis writes Python functions that raise and assert
with literal, f-string, concatenated, `.format` and `%` messages nested in if/elif/else, try,
with and loops; running each function on every combination of its arguments checks what
`extract_source` said about it.

For each exception that escapes, the site on the raising line must exist, its `message` read
as an f-string and evaluated in the raising frame must give exactly the exception's text, and
each of its `conditions` (and the negation of an assert's condition) must be true there.
"""

from __future__ import annotations

import itertools
import string
import textwrap
from contextlib import nullcontext
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.extract import extract_source

PATH = "python/sglang/generated.py"
EXCEPTIONS = ("ValueError", "RuntimeError", "TypeError", "NotImplementedError")
PARAMS = ("p0", "p1", "n0", "n1", "s0")
BOOLS = (False, True)
INTS = (0, 1, 2)

# Conditions that read only the arguments (and a loop variable when inside a loop).
CONDITIONS = (
    "p0",
    "not p1",
    "n0 == 1",
    "n1 > 0",
    "n0 != 2",
    "n1 in (0, 2)",
    "p0 and n1 == 0",
    "p1 or n0 < 1",
    "s0",
    "len(s0) > 2",
    "n0 is not None",
    "0 < n0 + n1 <= 3",
)

# Literal text as a user sees it: braces, percent signs, quotes, backslashes and non-ASCII
# are all things the template must keep and escape right.
LITERAL = st.text(alphabet="ab xyz019{}%:!.,-='\"\\é\n", min_size=0, max_size=12)
WORD = st.text(alphabet="abcxyz", min_size=1, max_size=6)

# Expressions a placeholder may hold, with the format specs valid for their values.
INT_EXPRS = ("n0", "n1 + 1", "len(s0)")
STR_EXPRS = ("s0", "s0.upper()")
ANY_EXPRS = ("p0", "[n0, n1]", "(p1, s0)")
INT_SPECS = ("", ">4", "03d", "x", "<3")
STR_SPECS = ("", ">6", "<3", "^5")
INT_PERCENT = ("%d", "%5d", "%-5d", "%03d", "%x", "%s", "%r", "%+d")
STR_PERCENT = ("%s", "%-6s", "%4s", "%r", "%.2s")
ANY_PERCENT = ("%s", "%r", "%8s", "%-8r")


@dataclass
class Code:
    """The function being written: its lines, and the line of every site put in it."""

    lines: list[str] = field(default_factory=list)
    sites: dict[int, str] = field(default_factory=dict)
    loops: int = 0

    def add(self, depth: int, text: str) -> int:
        self.lines.append("    " * depth + text)
        return len(self.lines) + 1  # the function's `def` line comes first


@st.composite
def expression(draw, loop_vars: tuple[str, ...]) -> tuple[str, str]:
    """An expression and the kind of value it has: int, str or any."""
    kind = draw(st.sampled_from(("int", "str", "any")))
    pool = {"int": INT_EXPRS + loop_vars, "str": STR_EXPRS, "any": ANY_EXPRS}[kind]
    return draw(st.sampled_from(pool)), kind


def quoted(text: str) -> str:
    """`text` as the inside of a double-quoted literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def field_of(draw, loop_vars: tuple[str, ...], named: bool = False) -> tuple[str, str]:
    """A `{...}` field's conversion and spec for an expression: (expr, `!c:spec` suffix)."""
    expr, kind = draw(expression(loop_vars))
    conversion = draw(st.sampled_from(("", "!r", "!s")))
    if conversion:
        spec = draw(st.sampled_from(STR_SPECS))
    else:
        spec = draw(st.sampled_from({"int": INT_SPECS, "str": STR_SPECS, "any": ("",)}[kind]))
    return expr, conversion + (":" + spec if spec else "")


@st.composite
def message(draw, loop_vars: tuple[str, ...]) -> str:
    """Source of a message expression in one of the shapes upstream writes."""
    shape = draw(st.sampled_from(("literal", "fstring", "plus", "implicit", "format", "percent")))
    if shape == "literal":
        return '"' + quoted(draw(LITERAL)) + draw(WORD) + '"'
    if shape == "fstring":
        return fstring(draw, loop_vars)
    if shape == "plus":
        pieces = [fstring(draw, loop_vars), '"' + quoted(draw(LITERAL)) + '"', f"str({draw(expression(loop_vars))[0]})"]
        return " + ".join(draw(st.permutations(pieces))[: draw(st.integers(2, 3))] + ['"' + quoted(draw(WORD)) + '"'])
    if shape == "implicit":
        return " ".join(['"' + quoted(draw(LITERAL)) + '"', fstring(draw, loop_vars), '"' + quoted(draw(WORD)) + '"'])
    if shape == "format":
        text, positional, keywords = "", [], []
        for number in range(draw(st.integers(1, 3))):
            text += quoted(draw(LITERAL)).replace("{", "{{").replace("}", "}}")
            expr, suffix = draw(field_of(loop_vars))
            if draw(st.booleans()):
                name = f"k{number}"
                keywords.append(f"{name}={expr}")
                text += "{" + name + suffix + "}"
            else:
                positional.append(expr)
                text += "{" + suffix + "}"
        text += quoted(draw(WORD))
        return f'"{text}".format(' + ", ".join(positional + keywords) + ")"
    text, values = "", []
    for _ in range(draw(st.integers(1, 3))):
        text += quoted(draw(LITERAL)).replace("%", "%%")
        expr, kind = draw(expression(loop_vars))
        text += draw(st.sampled_from({"int": INT_PERCENT, "str": STR_PERCENT, "any": ANY_PERCENT}[kind]))
        values.append(expr)
    text += quoted(draw(WORD)).replace("%", "%%")
    # Bare only when the value is one operand: `"%d" % n1 + 1` is `("%d" % n1) + 1`.
    if len(values) == 1 and not values[0].startswith(("(", "[")) and " " not in values[0] and draw(st.booleans()):
        return f'"{text}" % {values[0]}'
    return f'"{text}" % (' + ", ".join(values) + ("," if len(values) == 1 else "") + ")"


def fstring(draw, loop_vars: tuple[str, ...]) -> str:
    text = ""
    for _ in range(draw(st.integers(0, 3))):
        text += quoted(draw(LITERAL)).replace("{", "{{").replace("}", "}}")
        expr, suffix = draw(field_of(loop_vars))
        text += "{" + expr + suffix + "}"
    return 'f"' + text + quoted(draw(WORD)).replace("{", "{{").replace("}", "}}") + '"'


def condition(draw, loop_vars: tuple[str, ...]) -> str:
    pool = CONDITIONS + tuple(f"{var} == 1" for var in loop_vars)
    return draw(st.sampled_from(pool))


def block(draw, code: Code, depth: int, nesting: int, loop_vars: tuple[str, ...], in_loop: str) -> None:
    """Statements at `depth`, at least one of them, up to `nesting` levels of blocks inside."""
    for _ in range(draw(st.integers(1, 3))):
        statement(draw, code, depth, nesting, loop_vars, in_loop)


def statement(draw, code: Code, depth: int, nesting: int, loop_vars: tuple[str, ...], in_loop: str) -> None:
    kinds = ["raise", "assert", "exit", "assign"] + (["if", "for", "while", "with", "try"] if nesting > 0 else [])
    kind = draw(st.sampled_from(kinds))
    inner = nesting - 1
    if kind == "raise":
        exception = draw(st.sampled_from(EXCEPTIONS))
        line = code.add(depth, f"raise {exception}({draw(message(loop_vars))})")
        code.sites[line] = exception
    elif kind == "assert":
        line = code.add(depth, f"assert {condition(draw, loop_vars)}, {draw(message(loop_vars))}")
        code.sites[line] = "AssertionError"
    elif kind == "exit":
        # `continue` only in a `for`: in a `while` it would skip the `break` that ends it.
        exit_word = draw(st.sampled_from({"for": ("return", "continue", "break"), "while": ("return", "break")}.get(in_loop, ("return",))))
        code.add(depth, f"if {condition(draw, loop_vars)}:")
        code.add(depth + 1, exit_word)
    elif kind == "assign":
        code.add(depth, "unused = n0 + n1")
    elif kind == "if":
        code.add(depth, f"if {condition(draw, loop_vars)}:")
        block(draw, code, depth + 1, inner, loop_vars, in_loop)
        for _ in range(draw(st.integers(0, 2))):
            code.add(depth, f"elif {condition(draw, loop_vars)}:")
            block(draw, code, depth + 1, inner, loop_vars, in_loop)
        if draw(st.booleans()):
            code.add(depth, "else:")
            block(draw, code, depth + 1, inner, loop_vars, in_loop)
    elif kind == "for":
        code.loops += 1
        var = f"i{code.loops}"
        code.add(depth, f"for {var} in range(n0 + 1):")
        block(draw, code, depth + 1, inner, loop_vars + (var,), "for")
    elif kind == "while":
        code.add(depth, f"while {condition(draw, loop_vars)}:")
        block(draw, code, depth + 1, inner, loop_vars, "while")
        code.add(depth + 1, "break")
    elif kind == "with":
        code.add(depth, "with nullcontext(n1):")
        block(draw, code, depth + 1, inner, loop_vars, in_loop)
    else:
        code.add(depth, "try:")
        code.add(depth + 1, "quotient = 1 // n1")
        block(draw, code, depth + 1, inner, loop_vars, in_loop)
        code.add(depth, "except ZeroDivisionError:")
        block(draw, code, depth + 1, inner, loop_vars, in_loop)
        if draw(st.booleans()):
            code.add(depth, "else:")
            block(draw, code, depth + 1, inner, loop_vars, in_loop)


@st.composite
def functions(draw) -> tuple[str, dict[int, str]]:
    """Source of a module holding `def generated(...)`, and the exception raised on each site line."""
    code = Code()
    block(draw, code, 1, 3, (), "")
    source = f"def generated({', '.join(PARAMS)}):\n" + "\n".join(code.lines) + "\n"
    return source, code.sites


def expected_text(message: str, frame) -> str:
    """`message` read as an f-string body, its fields evaluated in the raising frame."""
    scope = {**frame.f_globals, **frame.f_locals}
    out = []
    for literal, name, spec, conversion in string.Formatter().parse(message):
        out.append(literal)
        if name is None:
            continue
        value = eval(name, scope)  # noqa: S307 - the generated function's own expressions
        if conversion:
            value = {"r": repr, "s": str, "a": ascii}[conversion](value)
        out.append(format(value, spec))
    return "".join(out)


def raising_frame(error: BaseException):
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


# No example database: the tree stays clean; a failure prints its seed and shrunk example.
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions(), st.sampled_from(("", "ab", "x y", "{z}", "50%", "é'\"")))
def test_generated_functions(program: tuple[str, dict[int, str]], text: str) -> None:
    source, lines = program
    sites = extract_source(source.encode(), PATH)

    # Every site written is found, on its line, with its exception, in the generated function.
    assert {site.line: site.exception for site in sites} == lines, source
    assert all(site.function == "generated" for site in sites)

    namespace = {"nullcontext": nullcontext}
    exec(compile(source, PATH, "exec"), namespace)  # noqa: S102 - code this test wrote
    by_line = {site.line: site for site in sites}
    for p0, p1, n0, n1 in itertools.product(BOOLS, BOOLS, INTS, INTS):
        try:
            namespace["generated"](p0, p1, n0, n1, text)
        except Exception as error:  # noqa: BLE001 - every generated exception is checked below
            tb = raising_frame(error)
            assert tb.tb_frame.f_code.co_filename == PATH, (source, error)
            site = by_line[tb.tb_lineno]
            frame = tb.tb_frame
            where = f"\n{source}\nline {site.line} with p0={p0} p1={p1} n0={n0} n1={n1} s0={text!r}"
            assert type(error).__name__ == site.exception, where
            assert site.message is not None, where
            assert expected_text(site.message, frame) == str(error), f"template {site.message!r}{where}"
            scope = {**frame.f_globals, **frame.f_locals}
            for held in site.conditions:
                assert eval(held, scope), f"condition {held!r} is false{where}"  # noqa: S307
            if site.kind == "assert":
                assert not eval(site.assert_condition, scope), where  # noqa: S307


def test_the_generator_reaches_every_shape() -> None:
    """A fixed example of each message shape, so a failing property names a readable case."""
    source = textwrap.dedent(
        """\
        def generated(p0, p1, n0, n1, s0):
            if n0 == 1:
                raise ValueError("lit {a} 50%" f"{n0!r:>4} and {s0}")
            elif p0:
                raise ValueError("x %-5s|%5d|%r" % (s0, n0, p1))
            for i1 in range(n0 + 1):
                if i1 == 1:
                    raise RuntimeError("{} {k:>3}".format(n1, k=s0) + " end")
        """
    )
    namespace = {}
    exec(compile(source, PATH, "exec"), namespace)  # noqa: S102
    sites = {site.line: site for site in extract_source(source.encode(), PATH)}
    for args in ((False, False, 1, 0, "ab"), (True, False, 0, 0, "ab"), (False, False, 2, 2, "ab")):
        try:
            namespace["generated"](*args)
        except Exception as error:  # noqa: BLE001
            tb = raising_frame(error)
            assert expected_text(sites[tb.tb_lineno].message, tb.tb_frame) == str(error), sites[tb.tb_lineno].message
        else:
            raise AssertionError(f"{args} raised nothing")

