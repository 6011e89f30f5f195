"""Docstrings read from a file's lines around a site, without parsing the file: the
excerpt cache (`highlight`) keeps them with the snippets, under a digest of this module."""

from __future__ import annotations

import ast
import io
import re
import tokenize


_DEFINITION = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


def docstring_of(lines: list[str], line: int, function: str, read: dict[int, str | None] | None = None) -> str | None:
    """The docstring of `function` (a qualified name) around 1-based `line` in a file's lines,
    cleaned like `inspect.cleandoc`; None at module level or when it has none.

    It reads only the definition's head, found by scanning up from the site, so it costs a
    few lines of tokenizing rather than a parse of the file. `read`, when given, keeps the
    docstrings already read from `lines` by definition line, for the file's other sites.
    """
    name = function.rsplit(".", 1)[-1] if function else ""
    if not name or name.startswith("<"):
        return None
    indent = _indent(lines[line - 1]) if 0 < line <= len(lines) else 0
    for number in range(min(line, len(lines)) - 1, -1, -1):
        match = _DEFINITION.match(lines[number])
        if match and match[2] == name and len(match[1]) < indent:
            if read is None:
                return _docstring_after(lines, number)
            if number not in read:
                read[number] = _docstring_after(lines, number)
            return read[number]
    return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _docstring_after(lines: list[str], start: int) -> str | None:
    """The string that opens the body of the definition starting at index `start`."""
    head = "".join(lines[start : start + 200])
    tokens = tokenize.generate_tokens(io.StringIO(head).readline)
    try:
        depth, seen_colon = 0, False
        for token in tokens:
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
            elif token.type == tokenize.OP and token.string == ":" and depth == 0:
                seen_colon = True
            elif seen_colon and token.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.COMMENT):
                if token.type != tokenize.STRING:
                    return None
                value = ast.literal_eval(token.string)
                if not isinstance(value, str):
                    return None
                return _cleandoc(value) or None
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return None
    return None


def _cleandoc(text: str) -> str:
    import inspect

    return inspect.cleandoc(text)
