"""SGLang's server command-line arguments at a revision, read from upstream's source, and the
checks that keep curated text honest about them.

Upstream declares most arguments as annotated fields of the namespace classes in
`srt/arg_groups/fields/` (`tp_size: A[int, Arg(aliases=["--tensor-parallel-size"])] = 1`),
turned into `add_argument` calls at run time, and registers a few by hand in
`ServerArgs.add_cli_args`. Both are read here with `ast`, statically: choices written as
literals, module-level constants (followed through imports), `+` of lists, `set()`/`list()` of
those and `Literal[...]` types are resolved; choices computed at run time are left open.
"""

from __future__ import annotations

import ast
import difflib
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from generator.cache import kept
from generator.content import ContentProblem, CuratedFile, markdown_fields, markdown_parser
from generator.files import read_cache, state_bytes, write_cache
from generator.model import Servers, Setting, SourceFile
from generator.pysource import decode_source
from generator.upstream import Source

FIELDS_FOLDER = "sglang/srt/arg_groups/fields/"
SERVER_ARGS = "sglang/srt/server_args.py"
# The diffusion server (`sglang/multimodal_gen/`) has a command line of its own, declared with
# `add_argument` calls in this folder; its errors name its flags, not the language server's.
DIFFUSION_FOLDER = "sglang/multimodal_gen/runtime/server_args/"
_BOOLEAN_OPTIONAL = "BooleanOptionalAction"
_STORE_CONST = ("store_true", "store_false", "store_const", "count")


@dataclass(frozen=True, slots=True)
class Argument:
    """One server argument: every spelling, the dataclass field it sets, its choices (None when
    any value goes or they are only known at run time), and whether it takes a value."""

    names: tuple[str, ...]
    field: str
    choices: tuple[str, ...] | None
    takes_value: bool
    path: str
    line: int
    many: bool = False
    # Upstream's help text and the default as written (source text), where the code says.
    help: str | None = None
    default: str | None = None


@dataclass(frozen=True, slots=True)
class Arguments:
    """All server arguments of one revision, by every spelling."""

    by_name: dict[str, Argument]
    by_field: dict[str, Argument]

    @classmethod
    def of(cls, arguments: Iterable[Argument]) -> Arguments:
        by_name, by_field = {}, {}
        for argument in arguments:
            for name in argument.names:
                by_name.setdefault(name, argument)
            by_field.setdefault(argument.field, argument)
        return cls(by_name, by_field)

    def __len__(self) -> int:
        return len(self.by_field)


# -- Reading arguments from source -----------------------------------------------------------------

Resolver = Callable[[str, str], "tuple[str, ...] | None"]


def arguments_of_module(text: str, path: str, resolve: Resolver) -> list[Argument]:
    """The arguments one module declares: annotated fields of classes that set `_NS_PATH`, and
    `add_argument("--flag", ...)` calls with literal names. `resolve(module, name)` gives the
    values of a constant another module defines."""
    tree = ast.parse(text)
    constants = _Constants(tree, resolve)
    found: list[Argument] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _declares_namespace(node):
            for statement in node.body:
                argument = _field_argument(statement, constants, path)
                if argument is not None:
                    found.append(argument)
        elif isinstance(node, ast.Call) and _called_name(node.func) == "add_argument":
            argument = _call_argument(node, constants, path)
            if argument is not None:
                found.append(argument)
    return found


def server_arguments(source: Source, cache_dir: Path | None = None) -> Arguments:
    """Every server argument of the source (none when it has no `srt/arg_groups/fields/`).
    With `cache_dir`, the last result is reused while every file it looked for (found or
    not) has the same blob: a build reads them all only when one of them changed."""
    files = {file.path: file for file in source.files()}
    if cache_dir is None:
        return _read_arguments(source, files, {})
    path = kept(cache_dir, "arguments", [__file__])
    # Which files hold the arguments decides what is read: one added or removed is a change.
    layout = sorted(p for p in files if p.endswith(SERVER_ARGS) or FIELDS_FOLDER in p)
    stored = read_cache(path, tuple)
    if stored is not None and stored[0] == layout and all(files[p].blob_sha == sha if p in files else sha is None for p, sha in stored[1].items()):
        return stored[2]
    looked: dict[str, str | None] = {}
    arguments = _read_arguments(source, files, looked)
    write_cache(path, state_bytes((layout, looked, arguments)))
    return arguments


def diffusion_arguments(source: Source, cache_dir: Path | None = None) -> Arguments:
    """Every argument of the diffusion server's command line (none when the source has no
    `multimodal_gen/runtime/server_args/`), kept in the cache as `server_arguments` is. A
    default written as the dataclass's own field (`default=ServerArgs.num_gpus`) is shown as
    that field's default."""
    files = {file.path: file for file in source.files()}
    layout = sorted(p for p in files if DIFFUSION_FOLDER in p and p.endswith(".py"))
    if cache_dir is None:
        return _read_diffusion(source, files, layout, {})
    path = kept(cache_dir, "diffusion-arguments", [__file__])
    stored = read_cache(path, tuple)
    if stored is not None and stored[0] == layout and all(files[p].blob_sha == sha for p, sha in stored[1].items()):
        return stored[2]
    looked: dict[str, str] = {}
    arguments = _read_diffusion(source, files, layout, looked)
    write_cache(path, state_bytes((layout, looked, arguments)))
    return arguments


def _read_diffusion(source: Source, files: Mapping[str, SourceFile], layout: list[str], looked: dict[str, str]) -> Arguments:
    texts = {}
    for path in layout:
        looked[path] = files[path].blob_sha
        texts[path] = decode_source(source.read(files[path]))
    # The fields' defaults as written, by `Class.field`, from every class of the folder.
    defaults: dict[str, str] = {}
    trees = {}
    for path, text in texts.items():
        try:
            trees[path] = tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value is not None:
                        defaults[f"{node.name}.{statement.target.id}"] = _field_default(statement.value)
    # `cls.field` in a mixin's classmethod: the field of that name, when one class has it.
    owners: dict[str, list[str]] = {}
    for name in defaults:
        owners.setdefault(name.rpartition(".")[2], []).append(name)
    for field, names in owners.items():
        if len(names) == 1:
            defaults[f"cls.{field}"] = defaults[names[0]]
    arguments = []
    for path in trees:
        for argument in arguments_of_module(texts[path], path, lambda module, name: None):
            if argument.default in defaults:
                argument = replace(argument, default=defaults[argument.default])
            arguments.append(argument)
    return Arguments.of(arguments)


def _field_default(value: ast.expr) -> str:
    """A dataclass field's default as written: `field(default=x)`'s `x`, else the value."""
    if isinstance(value, ast.Call) and _called_name(value.func) in ("field", "dataclasses.field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                return ast.unparse(keyword.value)
            if keyword.arg == "default_factory":
                return ast.unparse(keyword.value) + "()"
    return ast.unparse(value)


def _read_arguments(source: Source, files: Mapping[str, SourceFile], looked: dict[str, str | None]) -> Arguments:
    """`server_arguments` read from the source; `looked` gets the blob of every path it looked
    for (None: not there)."""
    def read(path: str) -> str | None:
        file = files.get(path)
        looked[path] = file.blob_sha if file is not None else None
        return decode_source(source.read(file)) if file is not None else None

    anchor = next((path for path in files if path.endswith(SERVER_ARGS)), None)
    if anchor is None:
        return Arguments.of(())
    prefix = anchor[: -len(SERVER_ARGS)]
    texts: dict[str, str | None] = {}

    def text_of(module: str) -> str | None:
        stem = prefix + module.replace(".", "/")
        for path in (stem + ".py", stem + "/__init__.py"):
            if path not in texts:
                texts[path] = read(path)
            if texts[path] is not None:
                return texts[path]
        return None

    resolving: set[tuple[str, str]] = set()

    def resolve(module: str, name: str) -> tuple[str, ...] | None:
        if (module, name) in resolving:
            return None
        text = text_of(module)
        if text is None:
            return None
        resolving.add((module, name))
        try:
            owner, _, attribute = name.partition(".")
            node = ast.Attribute(ast.Name(owner), attribute) if attribute else ast.Name(name)
            return _Constants(ast.parse(text), resolve).value(node)
        finally:
            resolving.discard((module, name))

    arguments = []
    modules = sorted(p for p in files if p.startswith(prefix + FIELDS_FOLDER)) + [anchor]
    for path in modules:
        arguments.extend(arguments_of_module(read(path), path, resolve))
    return Arguments.of(arguments)


def _declares_namespace(node: ast.ClassDef) -> bool:
    return any(
        isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in s.targets)
        for s in node.body
    )


def _called_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _field_argument(statement: ast.stmt, constants: _Constants, path: str) -> Argument | None:
    """`name: A[T, "help"]` or `name: A[T, Arg(...)]` as the argument `add_cli_args_from_dataclass` adds."""
    if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
        return None
    annotation = statement.annotation
    if not (isinstance(annotation, ast.Subscript) and _called_name(annotation.value) in ("A", "Annotated")):
        return None
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if len(parts) < 2:
        return None
    kind, meta = parts[0], parts[1]
    keywords: dict[str, ast.expr] = {}
    if isinstance(meta, ast.Call) and _called_name(meta.func) == "Arg":
        keywords = {k.arg: k.value for k in meta.keywords if k.arg}
    elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
        return None
    if _is_true(keywords.get("no_cli")):
        return None
    described = dict(
        help=meta.value if isinstance(meta, ast.Constant) else _text(keywords.get("help"), constants),
        default=ast.unparse(statement.value) if statement.value is not None else None,
    )
    field = statement.target.id
    cli_name = keywords.get("cli_name")
    first = cli_name.value if isinstance(cli_name, ast.Constant) else "--" + field.replace("_", "-")
    names = [first, *(constants.value(keywords["aliases"]) or ())] if "aliases" in keywords else [first]
    inner = _unwrap_optional(kind)
    action = keywords.get("action")
    if action is not None:
        action_name = _called_name(action) if not isinstance(action, ast.Constant) else str(action.value)
        if action_name == _BOOLEAN_OPTIONAL:
            names += ["--no-" + name[2:] for name in names]
        takes_value = action_name not in (_BOOLEAN_OPTIONAL, *_STORE_CONST)
        return Argument(tuple(names), field, None, takes_value, path, statement.lineno, **described)
    literal = _literal_values(inner)
    if "choices" in keywords:
        choices = constants.value(keywords["choices"])
    else:
        choices = literal
    takes_value = not (isinstance(inner, ast.Name) and inner.id == "bool")
    many = _many_values(keywords.get("nargs")) or (
        "type_parser" not in keywords and isinstance(inner, ast.Subscript) and _called_name(inner.value) in ("List", "list")
    )
    return Argument(tuple(names), field, choices if takes_value else None, takes_value, path, statement.lineno, many, **described)


def _call_argument(call: ast.Call, constants: _Constants, path: str) -> Argument | None:
    """`parser.add_argument("--flag", "--alias", choices=..., action=...)` with literal names."""
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or len(names) != len(call.args) or not all(n.startswith("--") for n in names):
        return None
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    dest = keywords.get("dest")
    field = dest.value if isinstance(dest, ast.Constant) else names[0][2:].replace("-", "_")
    action = keywords.get("action")
    action_name = ""
    if action is not None:
        action_name = str(action.value) if isinstance(action, ast.Constant) else _called_name(action)
    if action_name == _BOOLEAN_OPTIONAL:
        names += ["--no-" + name[2:] for name in names]
    takes_value = not (action_name in (_BOOLEAN_OPTIONAL, *_STORE_CONST) or action_name.endswith("StoreTrueAction"))
    if "nargs" in keywords:
        takes_value = True
    choices = constants.value(keywords["choices"]) if "choices" in keywords and takes_value else None
    default = ast.unparse(keywords["default"]) if "default" in keywords else None
    return Argument(
        tuple(names), field, choices, takes_value, path, call.lineno, _many_values(keywords.get("nargs")),
        _text(keywords.get("help"), constants), default,
    )


def _text(node: ast.expr | None, constants: _Constants) -> str | None:
    """A help text: a string literal, or a name or `+` of them the module resolves."""
    values = constants.value(node) if node is not None else None
    return " ".join(values) if values else None


def _many_values(nargs: ast.expr | None) -> bool:
    return isinstance(nargs, ast.Constant) and nargs.value in ("+", "*")


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _unwrap_optional(node: ast.expr) -> ast.expr:
    """`Optional[X]` and `X | None` -> `X`."""
    if isinstance(node, ast.Subscript) and _called_name(node.value) == "Optional":
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        if len(sides) == 1:
            return sides[0]
    return node


def _literal_values(node: ast.expr) -> tuple[str, ...] | None:
    """`Literal["a", "b", None]` -> ("a", "b"): the values a user can type."""
    if not (isinstance(node, ast.Subscript) and _called_name(node.value) == "Literal"):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = [str(i.value) for i in items if isinstance(i, ast.Constant) and i.value is not None]
    return tuple(values) if len(values) == len([i for i in items if not _is_none(i)]) else None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def settings_of(arguments: Arguments) -> dict[str, Setting]:
    """Each server argument by every spelling, as a page explains it."""
    return {
        name: Setting(name, argument.help, argument.default, argument.choices, argument.path, argument.line)
        for name, argument in sorted(arguments.by_name.items())
    }


def servers_of(source: Source, cache_dir: Path | None = None) -> Servers:
    """The settings of the language server and of the diffusion server, as pages explain them."""
    return Servers(settings_of(server_arguments(source, cache_dir)), settings_of(diffusion_arguments(source, cache_dir)))


class _Constants:
    """Module-level names of one module, resolved to the strings they hold where that is static."""

    def __init__(self, tree: ast.Module, resolve: Resolver) -> None:
        self._resolve = resolve
        self._assigned: dict[str, ast.expr] = {}
        self._imported: dict[str, tuple[str, str]] = {}
        self._classes: dict[str, ast.ClassDef] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        self._assigned[target.id] = statement.value
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
                self._assigned[statement.target.id] = statement.value
            elif isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
                for alias in statement.names:
                    self._imported[alias.asname or alias.name] = (statement.module, alias.name)
            elif isinstance(statement, ast.ClassDef):
                self._classes[statement.name] = statement

    def value(self, node: ast.expr) -> tuple[str, ...] | None:
        """The strings an expression holds, or None when only running the code would tell."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            values: list[str] = []
            for item in node.elts:
                if _is_none(item):
                    continue
                inner = self.value(item.value if isinstance(item, ast.Starred) else item)
                if inner is None:
                    return None
                values.extend(inner)
            return tuple(values)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
            return (str(node.value),)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
            left, right = self.value(node.left), self.value(node.right)
            return None if left is None or right is None else left + tuple(v for v in right if v not in left)
        if isinstance(node, ast.Call) and _called_name(node.func) in ("set", "frozenset", "list", "tuple", "sorted"):
            return self.value(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        if isinstance(node, ast.Name):
            if node.id in self._assigned:
                return self.value(self._assigned[node.id])
            if node.id in self._imported:
                return self._resolve(*self._imported[node.id])
            return None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = self._classes.get(node.value.id)
            if owner is not None:
                for statement in owner.body:
                    if isinstance(statement, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == node.attr for t in statement.targets
                    ):
                        return _Constants(ast.Module(body=owner.body, type_ignores=[]), self._resolve).value(
                            statement.value
                        )
            elif node.value.id in self._imported:
                module, name = self._imported[node.value.id]
                return self._resolve(module, f"{name}.{node.attr}") if "." not in name else None
        return None


# -- Checking curated text -------------------------------------------------------------------------

_PROSE_FLAG = re.compile(r"(?<![\w/-])(--[a-z0-9][a-z0-9-]*)(?:=([\w+:/@-]+(?:\.[\w+:/@-]+)*))?")
_SHELL = ("", "shell", "sh", "bash", "console", "zsh")
_PYTHON = ("python", "py", "python3")
_SEPARATORS = ("&&", "||", ";", "|", "&")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ENTRY_POINTS = ("Engine", "ServerArgs")


def flag_problems(files: dict[str, CuratedFile], arguments: Arguments) -> list[ContentProblem]:
    """Every flag in curated text that SGLang does not have, every value outside a flag's
    choices, and every code block that does not parse, with file and line."""
    problems = []
    for error, file in sorted(files.items()):
        curated = file.curated
        for field, text in markdown_fields(curated):
            for offset, problem in markdown_flag_problems(text, arguments):
                problems.append(ContentProblem(curated.path, file.line(field, offset), field, problem))
        fix = curated.example_fix
        if fix is not None:
            for side in ("before", "after"):
                field = f"example_fix.{side}"
                for offset, problem in code_problems(getattr(fix, side), fix.language, arguments):
                    problems.append(ContentProblem(curated.path, file.line(field, offset), field, problem))
    return problems


def markdown_flag_problems(text: str, arguments: Arguments) -> Iterator[tuple[int, str]]:
    """Problems in one Markdown text, as (line offset, problem)."""
    for token in markdown_parser().parse(text):
        start = token.map[0] if token.map else 0
        if token.type in ("fence", "code_block"):
            language = token.info.strip().split()[0].lower() if token.info.strip() else ""
            for offset, problem in code_problems(token.content, language, arguments):
                yield start + 1 + offset if token.type == "fence" else start + offset, problem
        elif token.type == "inline":
            for child in token.children or ():
                if child.type == "text":
                    for problem in prose_problems(child.content, arguments):
                        yield start, problem
                elif child.type == "code_inline":
                    code = child.content.strip()
                    if _runs_sglang(code):
                        for _, problem in shell_problems(code, arguments):
                            yield start, problem
                    elif code.startswith("--"):
                        # A flag named in passing (`--tp-size`) needs no value; one given is checked.
                        for _, problem in shell_problems("sglang serve " + code, arguments, complete=False):
                            yield start, problem


def code_problems(code: str, language: str, arguments: Arguments) -> Iterator[tuple[int, str]]:
    """A code block: Python must parse (and pass real server arguments to `Engine`/`ServerArgs`);
    shell commands that run the server must use real flags and values."""
    if language in _PYTHON:
        try:
            tree = ast.parse(code)
        except SyntaxError as error:
            yield (error.lineno or 1) - 1, f"python code does not parse: {error.msg}"
            return
        yield from python_argument_problems(tree, arguments)
    elif language in _SHELL:
        yield from shell_problems(code, arguments)


def prose_problems(text: str, arguments: Arguments) -> Iterator[str]:
    for match in _PROSE_FLAG.finditer(text):
        yield from _flag_problems(match[1], match[2], arguments)


def shell_problems(code: str, arguments: Arguments, complete: bool = True) -> Iterator[tuple[int, str]]:
    """Flags and values of every `python -m sglang.launch_server` / `sglang serve` command;
    `complete` commands must also give a value to every flag that takes one."""
    physical = code.splitlines()
    for first, end, tokens in sglang_commands(code):
        if isinstance(tokens, ValueError):
            yield first, f"shell command does not parse: {tokens}"
            continue
        for token, problem in _command_problems(tokens, arguments, complete):
            yield _line_of_token(physical, first, end, token), problem


def sglang_commands(code: str) -> Iterator[tuple[int, int, list[str] | ValueError]]:
    """Each logical line of shell `code` (backslash continuations joined) that runs SGLang's
    server: its first and end physical line (0-based, end exclusive) and its shell words, or
    the `ValueError` shlex gave when it does not parse."""
    physical = code.splitlines()
    index = 0
    while index < len(physical):
        first, command = index, physical[index]
        while command.rstrip().endswith("\\") and index + 1 < len(physical):
            index += 1
            command = command.rstrip()[:-1] + " " + physical[index]
        index += 1
        if not _runs_sglang(command):
            continue
        try:
            lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            yield first, index, list(lexer)
        except ValueError as error:
            yield first, index, error


def server_argv(tokens: list[str]) -> tuple[dict[str, str], list[str]] | None:
    """The variables set for the server and the arguments given to it in one command's shell
    words: the `NAME=value` words (after an optional `env`) that open its simple command, and
    the words after `sglang.launch_server` or `sglang serve` up to the next `&&`, `|`, `;`...;
    None when the words start no server."""
    for position, token in enumerate(tokens):
        if _starts_server(tokens, position):
            rest = tokens[position + 1 :]
            ends = [index for index, word in enumerate(rest) if word in _SEPARATORS]
            opening = max([index + 1 for index, word in enumerate(tokens[:position]) if word in _SEPARATORS], default=0)
            words = [word for word in tokens[opening:position] if word != "env"]
            variables = dict(word.split("=", 1) for word in words if _ASSIGNMENT.match(word))
            return variables, rest[: ends[0]] if ends else rest
    return None


def _runs_sglang(command: str) -> bool:
    return bool(re.search(r"-m\s+sglang\.launch_server\b|(^|[\s/])sglang\s+serve\b", command))


def _starts_server(tokens: list[str], position: int) -> bool:
    token = tokens[position]
    return token == "sglang.launch_server" or (token == "serve" and position >= 1 and tokens[position - 1].endswith("sglang"))


def _command_problems(tokens: list[str], arguments: Arguments, complete: bool) -> Iterator[tuple[str, str]]:
    position, active = 0, False
    while position < len(tokens):
        token = tokens[position]
        position += 1
        if token in _SEPARATORS:
            active = False
        elif _starts_server(tokens, position - 1):
            active = True
        elif active and token.startswith("--"):
            name, has_value, value = token.partition("=")
            argument = arguments.by_name.get(name)
            values: list[str] = [value] if has_value else []
            if argument is not None and argument.takes_value and not has_value:
                while position < len(tokens) and not tokens[position].startswith("--") and tokens[position] not in _SEPARATORS:
                    values.append(tokens[position])
                    position += 1
                    if not argument.many:
                        break
                if not values and complete:
                    yield name, f"{name} needs a value"
            for problem in _flag_problems(name, values, arguments):
                yield name, problem


def _flag_problems(name: str, values: list[str] | str | None, arguments: Arguments) -> Iterator[str]:
    """An unknown flag (with a did-you-mean), a value given to a switch, a value outside the choices."""
    argument = arguments.by_name.get(name)
    if argument is None:
        close = difflib.get_close_matches(name, list(arguments.by_name), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else ""
        yield f"{name} is not an SGLang server argument{hint}"
        return
    if values is None:
        return
    if isinstance(values, str):
        values = [values]
    if not argument.takes_value and values:
        yield f"{name} is a switch and takes no value (got {values[0]!r})"
        return
    if argument.choices is not None:
        for value in values:
            if value not in argument.choices:
                close = difflib.get_close_matches(value, argument.choices, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                yield f"{value!r} is not a choice of {name} ({', '.join(argument.choices)}){hint}"


def _line_of_token(lines: list[str], first: int, end: int, token: str) -> int:
    for number in range(first, end):
        if token in lines[number]:
            return number
    return first


def python_argument_problems(tree: ast.Module, arguments: Arguments) -> Iterator[tuple[int, str]]:
    """Keyword arguments of `Engine(...)` / `ServerArgs(...)` must be server arguments, and
    string values of arguments with choices must be among them."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _called_name(node.func) in _ENTRY_POINTS):
            continue
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            argument = arguments.by_field.get(keyword.arg)
            if argument is None:
                close = difflib.get_close_matches(keyword.arg, list(arguments.by_field), n=1, cutoff=0.75)
                hint = f"; did you mean {close[0]}?" if close else ""
                yield keyword.lineno - 1, f"{keyword.arg}= is not an SGLang server argument{hint}"
            elif (
                argument.choices is not None
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
                and keyword.value.value not in argument.choices
            ):
                yield keyword.lineno - 1, f"{keyword.value.value!r} is not a choice of {keyword.arg} ({', '.join(argument.choices)})"
