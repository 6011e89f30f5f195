"""Find every raise, assert and `warnings.warn` site in one Python file.

Python's own parser (`ast`, in C) walks the whole file: it is fast and gives every statement's
position and nesting, from which the qualified name, guard conditions and context follow.
libcst then reads exactly the few expressions that matter (each message, and each condition that
has to be negated), so messages keep upstream's source to the character without paying for a
full concrete syntax tree of 1.8 million lines.

`extract_source` is the pure core: bytes in, sites out. It raises `UnparsableFile` for a file
that is not valid Python 3 for this interpreter; the orchestrator (`generator.pipeline`) turns
that into a recorded problem and goes on.

A function that raises what its caller passes (`def fail(message): raise ValueError(message)`)
is a raiser: each call to it that passes text is a site too, read the way a raise's message is.
Calls to raisers of other files can only be found once every file is read, so extraction is
two steps: `extract_file` gives what a file alone says (its sites, the raisers it defines and
the names it imports), then `call_sites` the calls to the raisers it sees
(`generator.raisers` resolves which).
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import string
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

import libcst as cst

from generator.model import Binding, ClassBases, ExtractedFile, Placeholder, Raiser, Site, Template, escape_braces, merge_sites
from generator.pysource import UnparsableFile, decode_source  # noqa: F401 - `extract.UnparsableFile` is the extractor's error

SNIPPET_BEFORE = 10
SNIPPET_AFTER = 9

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = re.compile(r"\s+")
_EMPTY_MODULE = cst.Module(body=[])
_MESSAGE_KEYWORDS = ("message", "msg", "detail")
_PERCENT_FIELD = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[-#0 +]*)(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?"
    r"[hlL]?(?P<type>[diouxXeEfFgGcrsa%])"
)


def extract_source(data: bytes, path: str) -> tuple[Site, ...]:
    """Every site in one file's bytes, in source order, with `path` as given: those of
    `extract_file` and the calls to the raisers the file itself defines."""
    extracted = extract_file(data, path)
    local = {raiser.function: replace(raiser, path=path) for raiser in extracted.raisers}
    return merge_sites(extracted.sites, call_sites(data, path, local) if local else ())


def extract_file(data: bytes, path: str) -> ExtractedFile:
    """What one file alone says: its raises, asserts and warnings in source order, the raisers
    it defines and the names it imports."""
    return extract_file_and_tree(data, path)[0]


def extract_file_and_tree(data: bytes, path: str) -> tuple[ExtractedFile, ast.Module]:
    """`extract_file`, and the syntax tree it read (left as parsed), for other facts of the file."""
    text, tree, lines = _parse(data, path)
    collector = SiteCollector(lines, _warn_names(text, tree) if "warn" in text else frozenset(), text)
    collector.visit_module(tree)
    reader = _Reader(lines)
    sites = [reader.site(found, path) for found in collector.found]
    raisers = tuple(dict.fromkeys(r for r in map(_raiser, collector.found, sites) if r is not None))
    bindings = _bindings(text, tree) if "import" in text else ()
    return ExtractedFile(_number(sites), raisers, bindings, _classes(tree.body, "") if "class" in text else ()), tree


def call_sites(data: bytes, path: str, raisers: Mapping[str, Raiser]) -> tuple[Site, ...]:
    """The sites of the calls in one file to `raisers`, by the name a call uses (`fail`,
    `errors.fail`; `Pool.fail` for a method, called as `self.fail` in its class) that pass
    text for the raiser's parameter: the raiser's exception, the message read from that
    argument as a raise's is, at the call, in the caller's function, under its conditions.
    A call passing no text adds nothing the raiser's own site does not say."""
    text, tree, lines = _parse(data, path)
    collector = SiteCollector(lines, frozenset(), text, raisers)
    collector.visit_module(tree)
    reader = _Reader(lines)
    return tuple(site for site in (reader.site(found, path) for found in collector.found) if site.message is not None)


def _parse(data: bytes, path: str) -> tuple[str, ast.Module, list[str]]:
    text = decode_source(data)
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as error:
        raise UnparsableFile(f"syntax error at line {error.lineno}: {error.msg}") from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise UnparsableFile(str(error) or type(error).__name__) from None
    lines = _LINE_BREAK.split(text) if "\r" in text else text.split("\n")
    return text, tree, lines


_WARNINGS_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+warnings[ \t]+import\b|import\b.*\bwarnings\b).*$", re.M)


def _warn_names(text: str, tree: ast.Module) -> frozenset[str]:
    """Names under which this module calls `warnings.warn`: `warnings.warn`, and the aliases
    of `import warnings as w` or `from warnings import warn`. Only the import lines are read;
    a multi-line import falls back to walking the whole tree."""
    imports = []
    for match in _WARNINGS_IMPORT.finditer(text):
        try:
            imports.extend(ast.parse(match.group().strip()).body)
        except SyntaxError:
            imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
            break
    names = set()
    for node in imports:
        if isinstance(node, ast.Import):
            names.update(f"{a.asname or a.name}.warn" for a in node.names if a.name == "warnings")
        elif isinstance(node, ast.ImportFrom) and node.module == "warnings":
            names.update(a.asname or a.name for a in node.names if a.name == "warn")
    return frozenset(names)


# -- Collecting: the visitor only walks and records --------------------------------------------


@dataclass(frozen=True, slots=True)
class Guard:
    """A condition on the path to a site: `test` holds, or with `negated` it does not.
    `passed`: it holds because an earlier check raised when it did not (`if x < 0: raise ...`
    above the site), so it says only that the check did not fire."""

    test: ast.expr
    negated: bool
    passed: bool = False


@dataclass(frozen=True, slots=True)
class Found:
    """A site as the walk met it, before its expressions are read."""

    kind: str
    node: ast.stmt | ast.Call
    function: str
    scope: ast.AST | None
    guards: tuple[Guard, ...]
    context: tuple[ast.AST, ...]
    # A call to a raiser: what it raises and which argument is the message.
    raiser: Raiser | None = None


@dataclass(frozen=True, slots=True)
class _Scope:
    qualname: str
    node: ast.AST | None
    in_function: bool
    # The class a method's body belongs to (its qualified name), where `self.name` resolves.
    cls: str | None = None


class SiteCollector:
    """Walks a module's statements and records every site with its scope, guards and context.

    Statement lists are walked in order so that an early exit (`if x: return`) guards the
    statements after it; a function body starts with no guards, a class body inherits them.

    Given `raisers` (by the name a call uses), it records the calls to them instead, and
    nothing else.
    """

    def __init__(self, lines: list[str], warn_names: frozenset[str], text: str | None = None, raisers: Mapping[str, Raiser] | None = None) -> None:
        self.found: list[Found] = []
        self._lines = lines
        self._warn_names = warn_names
        self._raisers = raisers
        # A call can only be `warnings.warn`, an alias or a raiser if one of these words is on its lines.
        called = warn_names if raisers is None else raisers
        self._needles = tuple(sorted({name.rsplit(".", 1)[-1] for name in called}))
        # Lines that can start a site: statements spanning none of them are not walked.
        joined = text if text is not None and "\r" not in text else "\n".join(lines)
        self._hot = _lines_with(joined, (("raise", "assert") if raisers is None else ()) + self._needles)

    def visit_module(self, tree: ast.Module) -> None:
        self._block(tree.body, _Scope("", None, False), (), ())

    def _block(self, body, scope: _Scope, guards: tuple, context: tuple) -> None:
        for statement in body:
            if self._may_hold_sites(statement):
                self._statement(statement, scope, guards, context)
            guards = guards + _exit_guards(statement)

    def _may_hold_sites(self, node: ast.stmt) -> bool:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        index = bisect.bisect_left(self._hot, first)
        return index < len(self._hot) and self._hot[index] <= node.end_lineno

    def _statement(self, node, scope: _Scope, guards: tuple, context: tuple) -> None:
        if isinstance(node, ast.Raise):
            if node.exc is not None and self._raisers is None:
                self.found.append(Found("raise", node, scope.qualname, scope.node, guards, context))
            self._calls(node, scope, guards, context)
        elif isinstance(node, ast.Assert):
            if self._raisers is None:
                self.found.append(Found("assert", node, scope.qualname, scope.node, guards, context))
            self._calls(node, scope, guards, context)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._definition(node, scope, guards, context)
        elif isinstance(node, ast.If):
            self._calls(node.test, scope, guards, context)
            self._block(node.body, scope, guards + (Guard(node.test, False),), context)
            self._block(node.orelse, scope, guards + (Guard(node.test, True),), context)
        elif isinstance(node, ast.While):
            self._calls(node.test, scope, guards, context)
            constant = isinstance(node.test, ast.Constant)
            inner = guards if constant else guards + (Guard(node.test, False),)
            self._block(node.body, scope, inner, context + (node,))
            self._block(node.orelse, scope, guards if constant else guards + (Guard(node.test, True),), context)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._calls(node.iter, scope, guards, context)
            self._block(node.body, scope, guards, context + (node,))
            self._block(node.orelse, scope, guards, context)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self._calls(item.context_expr, scope, guards, context)
            self._block(node.body, scope, guards, context + (node,))
        elif isinstance(node, (ast.Try, ast.TryStar)):
            self._block(node.body, scope, guards, context + (node,))
            for handler in node.handlers:
                if handler.type is not None:
                    self._calls(handler.type, scope, guards, context)
                self._block(handler.body, scope, guards, context + (handler,))
            self._block(node.orelse, scope, guards, context)
            self._block(node.finalbody, scope, guards, context)
        elif isinstance(node, ast.Match):
            self._calls(node.subject, scope, guards, context)
            for case in node.cases:
                inner = guards + (Guard(case.guard, False),) if case.guard is not None else guards
                self._block(case.body, scope, inner, context + (case,))
        else:
            self._calls(node, scope, guards, context)

    def _definition(self, node, scope: _Scope, guards: tuple, context: tuple) -> None:
        for expression in _header_expressions(node):
            self._calls(expression, scope, guards, context)
        prefix = scope.qualname + (".<locals>." if scope.in_function else ".") if scope.qualname else ""
        qualname = prefix + node.name
        if isinstance(node, ast.ClassDef):
            self._block(node.body, _Scope(qualname, scope.node, False), guards, context)
        else:
            in_class = scope.qualname if scope.qualname and not scope.in_function else None
            self._block(node.body, _Scope(qualname, node, True, in_class), (), ())

    def _calls(self, node: ast.AST, scope: _Scope, guards: tuple, context: tuple) -> None:
        """Record `warnings.warn(...)` calls (or, given raisers, calls to them) anywhere inside
        an expression or simple statement."""
        if not self._needles:
            return
        lines = self._lines[node.lineno - 1 : node.end_lineno]
        if not any(needle in line for line in lines for needle in self._needles):
            return
        for inner in ast.walk(node):
            if not isinstance(inner, ast.Call):
                continue
            if self._raisers is None:
                if _dotted(inner.func) in self._warn_names:
                    self.found.append(Found("warning", inner, scope.qualname, scope.node, guards, context))
            elif (raiser := self._raiser(_dotted(inner.func), scope)) is not None:
                self.found.append(Found("raise", inner, scope.qualname, scope.node, guards, context, raiser))

    def _raiser(self, name: str, scope: _Scope) -> Raiser | None:
        """The raiser a call by `name` reaches: a method of the caller's own class through
        `self.`, else a function by the name it is seen under."""
        if name.startswith("self.") and scope.cls is not None:
            raiser = self._raisers.get(f"{scope.cls}.{name[5:]}")
            return raiser if raiser is not None and raiser.method else None
        raiser = self._raisers.get(name)
        return raiser if raiser is not None and not raiser.method else None


def _lines_with(text: str, words: tuple[str, ...]) -> list[int]:
    """The 1-based numbers of the lines of `text` (split on `\\n`) holding any of `words`.
    `str.find` is used because it scans far faster than a regex alternation."""
    offsets = []
    for word in words:
        position = text.find(word)
        while position >= 0:
            offsets.append(position)
            position = text.find(word, position + len(word))
    numbers, line, previous = [], 1, 0
    for offset in sorted(offsets):
        line += text.count("\n", previous, offset)
        previous = offset
        if not numbers or numbers[-1] != line:
            numbers.append(line)
    return numbers


def _header_expressions(node) -> list[ast.AST]:
    expressions = list(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return expressions + list(node.bases) + [k.value for k in node.keywords]
    arguments = node.args
    defaults = list(arguments.defaults) + [d for d in arguments.kw_defaults if d is not None]
    return expressions + defaults


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _exit_guards(node: ast.stmt) -> tuple[Guard, ...]:
    """What holds after an `if`/`elif` chain whose every branch but the last `else` exits."""
    if not isinstance(node, ast.If):
        return ()
    tests = []
    while True:
        if not _always_exits(node.body):
            return ()
        tests.append((node.test, isinstance(node.body[-1], ast.Raise)))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        if node.orelse and _always_exits(node.orelse):
            return ()
        return tuple(Guard(test, True, raises) for test, raises in tests)


def _always_exits(body: list[ast.stmt]) -> bool:
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.If) and last.orelse:
        return _always_exits(last.body) and _always_exits(last.orelse)
    return False


# -- Reading: exact expressions through libcst --------------------------------------------------


class _Reader:
    """Turns what the walk found into `Site` records, reading source text by position."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self._line_count = len(lines) - (lines[-1] == "")
        self._encoded: dict[int, bytes] = {}
        self._conditions: dict[tuple[int, bool], tuple[str, ...]] = {}

    def site(self, found: Found, path: str) -> Site:
        node = found.node
        exception, message, assert_condition = self._subject(found)
        line, end_line = node.lineno, node.end_lineno or node.lineno
        read = [(text, guard.passed) for guard in found.guards for text in self._condition(guard)]
        conditions = tuple(text for text, _passed in read)
        checks_passed = tuple(number for number, (_text, passed) in enumerate(read) if passed)
        template = None
        resolved = 0
        raised_in = None
        if found.raiser is not None:
            raiser = found.raiser
            raised_in = (raiser.path, raiser.function, raiser.line, raiser.end_line)
        if message is not None:
            read = self.variable_template(message, found) if isinstance(message, ast.Name) else None
            if read is not None:
                template, resolved = read
            else:
                template = self.template(message)
        return Site(
            kind=found.kind,
            exception=exception,
            template=template,
            resolved=resolved,
            path=path,
            line=line,
            end_line=end_line,
            function=found.function,
            conditions=conditions,
            checks_passed=checks_passed,
            validates=_validated_fields(found.scope),
            context=tuple(self._context(node) for node in found.context),
            assert_condition=assert_condition,
            snippet_start=max(1, line - SNIPPET_BEFORE),
            snippet_end=min(self._line_count, end_line + SNIPPET_AFTER),
            raised_in=raised_in,
        )

    def _subject(self, found: Found) -> tuple[str | None, ast.expr | None, str | None]:
        """The exception name, the message expression and an assert's condition."""
        node = found.node
        if found.raiser is not None:
            raiser = found.raiser
            return raiser.exception, _argument(node, raiser.position, (raiser.parameter,)), None
        if found.kind == "assert":
            return "AssertionError", node.msg, self.source(node.test)
        if found.kind == "warning":
            category = _argument(node, 1, ("category",))
            return (self.source(category) if category else "UserWarning"), _argument(node, 0, ("message",)), None
        exception = node.exc
        if isinstance(exception, (ast.Name, ast.Attribute)):
            exception = _resolve(exception, found) or exception
        if isinstance(exception, ast.Call):
            return self.source(exception.func), _argument(exception, 0, _MESSAGE_KEYWORDS), None
        if isinstance(exception, ast.ExceptHandler):
            return (self.source(exception.type) if exception.type else None), None, None
        name = _dotted(exception)
        if name and name.rsplit(".", 1)[-1][:1].isupper():
            return self.source(exception), None, None
        return None, None, None

    def source(self, node: ast.AST) -> str:
        """The node's source on one line, exactly as written but for line breaks and comments."""
        first, last = node.lineno - 1, node.end_lineno - 1
        start, end = node.col_offset, node.end_col_offset
        if first == last:
            text = self._line_bytes(first)[start:end].decode()
        else:
            pieces = [self._line_bytes(first)[start:].decode()]
            pieces.extend(self._lines[first + 1 : last])
            pieces.append(self._line_bytes(last)[:end].decode())
            text = "\n".join(pieces)
        return one_line(text)

    def _line_bytes(self, index: int) -> bytes:
        encoded = self._encoded.get(index)
        if encoded is None:
            encoded = self._encoded[index] = self._lines[index].encode()
        return encoded

    def _condition(self, guard: Guard) -> tuple[str, ...]:
        key = (id(guard.test), guard.negated)
        texts = self._conditions.get(key)
        if texts is None:
            text = self.source(guard.test)
            texts = self._conditions[key] = negate(text) if guard.negated else (text,)
        return texts

    def _context(self, node: ast.AST) -> str:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            keyword = "async for" if isinstance(node, ast.AsyncFor) else "for"
            return f"{keyword} {self.source(node.target)} in {self.source(node.iter)}"
        if isinstance(node, ast.While):
            return f"while {self.source(node.test)}"
        if isinstance(node, (ast.With, ast.AsyncWith)):
            keyword = "async with" if isinstance(node, ast.AsyncWith) else "with"
            items = [
                self.source(item.context_expr) + (f" as {self.source(item.optional_vars)}" if item.optional_vars else "")
                for item in node.items
            ]
            return f"{keyword} " + ", ".join(items)
        if isinstance(node, (ast.Try, ast.TryStar)):
            return "try"
        if isinstance(node, ast.ExceptHandler):
            text = "except" + (f" {self.source(node.type)}" if node.type else "")
            return text + (f" as {node.name}" if node.name else "")
        if isinstance(node, ast.match_case):
            return f"case {self.source(node.pattern)}"
        raise AssertionError(f"no context for {type(node).__name__}")

    def variable_template(self, name: ast.Name, found: Found) -> tuple[Template, int] | None:
        """The template of a message held in a local variable: its last assignment of text
        above the raise in the same function on every path to it (`msg = "..."`, an f-string),
        then each `msg +=`
        between it and the raise; an addition not on every path to the raise (in a branch or
        loop the raise is not in) is an optional part. None when the code does not say. With
        the template, how it was read (`Site.resolved`): RESOLVED_ONE from the variable's only
        assignment, RESOLVED_LAST from the last of several."""
        if found.scope is None:
            return None
        raised = found.node.lineno
        assigned, added = [], []
        # Each node's parent, and the parent's field (`body`, `orelse`, ...) holding it.
        parents: dict[int, tuple[ast.AST, str]] = {}
        for node in ast.walk(found.scope):
            for field, value in ast.iter_fields(node):
                for child in value if isinstance(value, list) else (value,):
                    if isinstance(child, ast.AST):
                        parents[id(child)] = (node, field)
            if getattr(node, "lineno", raised) >= raised or node is not found.scope and isinstance(node, _DEFINITIONS):
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name.id for t in targets):
                    assigned.append(node)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name.id:
                added.append(node)
        # Statements on every path to the raise: those whose enclosing blocks all hold it too.
        around = set(_blocks(found.node, parents, found.scope))
        # The last assignment on every path to the raise holds the message, unless another one
        # after it may run first (in a branch the raise is not in). One in a branch the raise is
        # not in (an earlier `except`) and above that assignment never reaches the raise.
        on_path = [node for node in assigned if _within(node, parents, around, found.scope)]
        if not on_path:
            return None
        first = max(on_path, key=lambda node: (node.lineno, node.col_offset))
        if any((node.lineno, node.col_offset) > (first.lineno, first.col_offset) for node in assigned) or first.value is None or not _is_text(first.value):
            return None
        parts = list(self.template(first.value).parts)
        for addition in sorted(added, key=lambda a: (a.lineno, a.col_offset)):
            if addition.lineno < first.lineno:
                continue
            if not isinstance(addition.op, ast.Add) or not _is_text(addition.value):
                return None
            more = self.template(addition.value)
            if _within(addition, parents, around, found.scope):
                parts.extend(more.parts)
            else:
                parts.append(Placeholder(expr=more.text, optional=True))
        template = Template(_merge(parts))
        return (template, RESOLVED_ONE if len(assigned) == 1 else RESOLVED_LAST) if template.has_literal else None

    def template(self, node: ast.expr) -> Template:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # A plain literal needs no concrete syntax tree: its value is the whole message.
            return Template((node.value,) if node.value else ())
        return template_of(self.source(node))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# How a message held in a variable was read (`Site.resolved`): from its only assignment, or
# from the last of several on every path to the raise.
RESOLVED_ONE, RESOLVED_LAST = 1, 2


def _validated_fields(function: ast.AST | None) -> tuple[str, ...]:
    """For a pydantic field validator (`@field_validator("max_tokens")` or v1's `@validator`),
    the parameter holding the value and the fields it validates; else nothing."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ()
    for decorator in function.decorator_list:
        if not isinstance(decorator, ast.Call) or _dotted(decorator.func).rsplit(".", 1)[-1] not in ("field_validator", "validator"):
            continue
        fields = [a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value != "*"]
        parameters = [a.arg for a in function.args.posonlyargs + function.args.args]
        if parameters and parameters[0] in ("cls", "self"):
            parameters = parameters[1:]
        if fields and parameters:
            return (parameters[0], *fields)
    return ()


def _is_text(node: ast.expr) -> bool:
    """Whether an expression is message text: a string literal, an f-string, or `+`, `%` and
    `.format` over one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_text(node.left) or isinstance(node.op, ast.Add) and _is_text(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _is_text(node.func.value)
    return False


def _blocks(node: ast.AST, parents: dict[int, tuple[ast.AST, str]], scope: ast.AST) -> Iterator[tuple[int, str]]:
    """The blocks around `node` up to `scope`, innermost first: each as its node and field."""
    while node is not scope and id(node) in parents:
        node, field = parents[id(node)]
        yield id(node), field


def _within(statement: ast.AST, parents: dict[int, tuple[ast.AST, str]], around: set[tuple[int, str]], scope: ast.AST) -> bool:
    """Whether `statement`, above the raise, runs on every path to it: each block it sits in
    (an `if`'s body or else, a loop's body, a `try`) holds the raise too."""
    return all(block in around for block in _blocks(statement, parents, scope))


def _argument(call: ast.Call, index: int | None, keywords: tuple[str, ...]) -> ast.expr | None:
    # After a `*args` no position is known.
    if index is not None and len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    for keyword in call.keywords:
        if keyword.arg in keywords:
            return keyword.value
    return None


def _raiser(found: Found, site: Site) -> Raiser | None:
    """The raiser a raise makes of its function: a module-level function or a method (not a
    dunder, called by Python itself) that raises `Cls(p)`, `p` one of its parameters, as is."""
    function = found.scope
    if found.kind != "raise" or found.raiser is not None or site.exception is None or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    parts = site.template.parts if site.template is not None else ()
    if len(parts) != 1 or not isinstance(parts[0], Placeholder) or parts[0] != Placeholder(parts[0].expr):
        return None
    name, qualname = function.name, found.function
    method = qualname != name
    if "<locals>" in qualname or name.startswith("__") and name.endswith("__"):
        return None
    arguments = function.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args]
    static = any(_dotted(d) == "staticmethod" for d in function.decorator_list)
    if method and not static:
        positional = positional[1:]
    parameter = parts[0].expr
    if parameter in positional:
        return Raiser(qualname, parameter, positional.index(parameter), site.exception, method, site.line, site.end_line)
    if parameter in (a.arg for a in arguments.kwonlyargs):
        return Raiser(qualname, parameter, None, site.exception, method, site.line, site.end_line)
    return None


def _classes(body: list[ast.stmt], prefix: str) -> tuple[ClassBases, ...]:
    """The classes with bases defined at module level (under `if` and `try` too) and in
    their bodies, by qualified name."""
    found: list[ClassBases] = []
    for node in body:
        if isinstance(node, ast.ClassDef):
            bases = tuple(name for name in map(_dotted, node.bases) if name)
            if bases:
                found.append(ClassBases(prefix + node.name, bases))
            found.extend(_classes(node.body, f"{prefix}{node.name}."))
        elif isinstance(node, (ast.If, ast.Try, ast.TryStar)):
            for inner in (node.body, node.orelse, getattr(node, "finalbody", []), *(h.body for h in getattr(node, "handlers", ()))):
                found.extend(_classes(inner, prefix))
    return tuple(found)


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t\\(]", re.M)


def _bindings(text: str, tree: ast.Module) -> tuple[Binding, ...]:
    """The names the file's imports bind, wherever they are (a function's body too): only
    the statements around lines that start with `import` or `from` are walked."""
    starts, line, previous = [], 1, 0
    for match in _IMPORT_LINE.finditer(text):
        line += text.count("\n", previous, match.start())
        previous = match.start()
        starts.append(line)
    found: list[Binding] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            index = bisect.bisect_left(starts, node.lineno)
            if index == len(starts) or starts[index] > node.end_lineno:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(Binding(alias.asname or alias.name, alias.name))
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    found.append(Binding("*" if alias.name == "*" else alias.asname or alias.name, module, alias.name))
            else:
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field, ()))
                for inner in [*getattr(node, "handlers", ()), *getattr(node, "cases", ())]:
                    walk(inner.body)

    walk(tree.body)
    return tuple(dict.fromkeys(found))


def _resolve(name: ast.expr, found: Found) -> ast.AST | None:
    """What a raised variable holds: its last assignment above the raise in the same function,
    or the `except ... as name` handler it was bound by; None when the code does not say."""
    if not isinstance(name, ast.Name):
        return None
    for handler in reversed(found.context):
        if isinstance(handler, ast.ExceptHandler) and handler.name == name.id:
            return handler
    if found.scope is None:
        return None
    latest = None
    for node in ast.walk(found.scope):
        if (
            isinstance(node, ast.Assign)
            and node.lineno < found.node.lineno
            and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets)
            and (latest is None or node.lineno > latest.lineno)
        ):
            latest = node
    if latest is not None and isinstance(latest.value, ast.Call):
        return latest.value
    return None


def _number(sites: list[Site]) -> tuple[Site, ...]:
    """Give each site without literal text its ordinal among like sites of its function, and
    each site whose id key the earlier rules made otherwise its `legacy_key`."""
    seen: dict[tuple, int] = {}
    seen_before: dict[tuple, int] = {}
    seen_one: dict[tuple, int] = {}
    numbered = []
    for site in sites:
        group = (site.function, site.kind, site.exception, site.assert_condition)
        if site.message is None:
            ordinal = seen.get(group, 0)
            seen[group] = ordinal + 1
            site = replace(site, ordinal=ordinal)
        if site.message is None or site.resolved == RESOLVED_LAST:
            # Numbered as when only a variable's one assignment was read.
            ordinal_one = seen_one.get(group, 0)
            seen_one[group] = ordinal_one + 1
        # Before, a message held in a variable had no text, nor had `{expr=}` placeholders,
        # whose key was `{}`; and until messages were read from the last of several assignments
        # (RESOLVED_LAST), such a site had no text either.
        template = site.template
        if site.resolved == RESOLVED_LAST:
            before = replace(site, template=None, ordinal=ordinal_one).key
        elif template is not None and not site.resolved and any(isinstance(part, str) and part.strip() for part in template.parts):
            before = _WHITESPACE.sub(" ", "".join("{}" if isinstance(part, Placeholder) else escape_braces(part) for part in template.parts)).strip()
        else:
            ordinal = seen_before.get(group, 0)
            seen_before[group] = ordinal + 1
            before = replace(site, template=None, ordinal=ordinal).key
        if before != site.key:
            site = replace(site, legacy_key=before)
        numbered.append(site)
    return tuple(numbered)


# -- One-line source and negation ---------------------------------------------------------------


def one_line(text: str) -> str:
    """Source of an expression on one line: line breaks inside brackets become one space (none
    next to a bracket), comments go; everything on a line is kept to the character."""
    if "\n" not in text and "\r" not in text and "#" not in text and "\\" not in text:
        return text.strip()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("(" + text + ")").readline))
    except (tokenize.TokenError, SyntaxError):
        return _WHITESPACE.sub(" ", text).strip()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    tokens = [token for token in tokens if token.type not in skip][1:-1]
    pieces: list[str] = []
    previous = None
    for token in tokens:
        if previous is not None:
            if token.start[0] == previous.end[0]:
                pieces.append(token.line[previous.end[1] : token.start[1]])
            elif previous.string not in "([{" and token.string not in ")]},":
                pieces.append(" ")
        pieces.append(token.string)
        previous = token
    return "".join(pieces)


_FLIPPED = {
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.LessThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
}
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


@lru_cache(maxsize=4096)
def negate(text: str) -> tuple[str, ...]:
    """Conditions that hold when `text` is false, written as a person would: `not is_cuda()`,
    `x not in y`, `x is None`; a negated `a or b` is the two conditions `not a`, `not b`."""
    try:
        node = cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return (f"not ({text})",)
    return tuple(_code(n) for n in _negated(_bare(node)))


def _negated(node: cst.BaseExpression) -> list[cst.BaseExpression | str]:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return [_bare(node.expression)]
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        target = node.comparisons[0]
        flipped = _FLIPPED[type(target.operator)]()
        return [node.with_changes(comparisons=[target.with_changes(operator=flipped)])]
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        return _negated(_bare(node.left)) + _negated(_bare(node.right))
    code = _code(node)
    if isinstance(node, _ATOMS):
        return [f"not {code}"]
    return [f"not ({code})"]


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    if getattr(node, "lpar", None):
        return node.with_changes(lpar=[], rpar=[])
    return node


def _code(node: cst.CSTNode | str) -> str:
    return node if isinstance(node, str) else _EMPTY_MODULE.code_for_node(node)


# -- Message templates --------------------------------------------------------------------------


@lru_cache(maxsize=8192)
def template_of(text: str) -> Template:
    """The template of a message expression's source: literal text as the user sees it, each
    interpolation as a placeholder holding its source. Implicit concatenation, `+`,
    `"...".format(...)` and `%` formatting all fold into the same form."""
    try:
        node = cst.parse_expression("(" + text + ")")
    except cst.ParserSyntaxError:
        return Template((Placeholder(text),))
    return Template(_merge(_parts(_bare(node))))


def _parts(node: cst.BaseExpression) -> list[str | Placeholder]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return [value] if isinstance(value, str) else [_placeholder(node)]
    if isinstance(node, cst.ConcatenatedString):
        return _parts(node.left) + _parts(node.right)
    if isinstance(node, cst.FormattedString):
        return _formatted(node)
    if isinstance(node, cst.BinaryOperation):
        left, right = _bare(node.left), _bare(node.right)
        if isinstance(node.operator, cst.Add) and (_stringy(left) or _stringy(right)):
            return _parts(left) + _parts(right)
        if isinstance(node.operator, cst.Modulo) and _literal(left) is not None:
            return _percent(_literal(left), right)
    if isinstance(node, cst.Call) and _is_format_call(node):
        return _format(_literal(_bare(node.func.value)), node)
    return [_placeholder(node)]


def _stringy(node: cst.BaseExpression) -> bool:
    node = _bare(node)
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        return _stringy(node.left) or _stringy(node.right)
    return isinstance(node, cst.Call) and _is_format_call(node)


def _is_format_call(node: cst.Call) -> bool:
    func = node.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "format"
        and _literal(_bare(func.value)) is not None
    )


def _literal(node: cst.BaseExpression) -> str | None:
    """The value of a plain (not formatted) string literal, else None."""
    node = _bare(node)
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _literal(node.left), _literal(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _formatted(node: cst.FormattedString) -> list[str | Placeholder]:
    raw = "r" in node.prefix.lower()
    parts: list[str | Placeholder] = []
    for part in node.parts:
        if isinstance(part, cst.FormattedStringText):
            value = part.value
            if not raw and "\\" in value:
                value = _unescape(value)
            parts.append(value.replace("{{", "{").replace("}}", "}"))
        else:
            spec = "".join(_code(p) for p in part.format_spec) if part.format_spec else ""
            parts.append(
                Placeholder(
                    expr=one_line(_code(part.expression)),
                    conversion=part.conversion or "",
                    format_spec=spec,
                    equal=part.equal is not None,
                )
            )
    return parts


def _unescape(value: str) -> str:
    try:
        return value.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return value


def _percent(fmt: str, arguments: cst.BaseExpression) -> list[str | Placeholder]:
    arguments = _bare(arguments)
    fields = [m for m in _PERCENT_FIELD.finditer(fmt) if m.group("type") != "%"]
    if isinstance(arguments, cst.Tuple) and len(arguments.elements) == len(fields):
        values = [_placeholder(e.value) for e in arguments.elements]
    elif isinstance(arguments, cst.Dict):
        by_key = {_literal(e.key): e.value for e in arguments.elements if isinstance(e, cst.DictElement)}
        values = [_placeholder(by_key[m.group("key")]) if m.group("key") in by_key else _placeholder(arguments) for m in fields]
    else:
        values = [_placeholder(arguments)] * len(fields)
    parts: list[str | Placeholder] = []
    position = 0
    values_iter = iter(values)
    for match in _PERCENT_FIELD.finditer(fmt):
        parts.append(fmt[position : match.start()])
        position = match.end()
        kind = match.group("type")
        if kind == "%":
            parts.append("%")
            continue
        value = next(values_iter)
        flags, width, precision = match.group("flags") or "", match.group("width") or "", match.group("precision")
        # printf's `-` flag left-justifies; in a format spec `-` is a sign, so it becomes `<`
        # (and a `0` pad is dropped, as printf ignores it then).
        align = "<" if "-" in flags else ""
        flags = flags.replace("-", "").replace("0", "") if align else flags
        size = width + ("." + precision if precision else "")
        if kind in "rsa":
            # `%s`, `%r`, `%a` convert first and pad to the right by default, unlike `format`.
            if size:
                parts.append(replace(value, conversion=kind, format_spec=(align or ">") + size))
            else:
                parts.append(replace(value, conversion=kind) if kind != "s" else value)
        else:
            spec = align + flags + size
            parts.append(replace(value, format_spec=spec + ("d" if kind in "iu" else kind)) if spec else value)
    parts.append(fmt[position:])
    return parts


def _format(fmt: str, call: cst.Call) -> list[str | Placeholder]:
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    parts: list[str | Placeholder] = []
    automatic = 0
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return [fmt]
    for literal, name, spec, conversion in fields:
        parts.append(literal)
        if name is None:
            continue
        head, rest = re.match(r"([^.\[]*)(.*)", name).groups()
        if head == "":
            head, automatic = str(automatic), automatic + 1
        if head.isdigit() and int(head) < len(positional):
            expr = one_line(_code(positional[int(head)])) + rest
        elif head in keywords:
            expr = one_line(_code(keywords[head])) + rest
        else:
            expr = name
        parts.append(Placeholder(expr=expr, conversion=conversion or "", format_spec=spec or ""))
    return parts


def _placeholder(node: cst.BaseExpression) -> Placeholder:
    return Placeholder(one_line(_code(_bare(node))))


def _merge(parts: list[str | Placeholder]) -> tuple[str | Placeholder, ...]:
    merged: list[str | Placeholder] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += part
                continue
        merged.append(part)
    return tuple(merged)
