"""A content file's YAML as plain dicts, lists and scalars that know the line they are on, read
by libyaml through PyYAML's composer.

ruamel.yaml's round-trip loader gave the same lines but parses in Python: 7 ms a file, three
seconds of a cold build at 432 files, against 0.15 ms here (bench/README.md). ruamel.yaml still
writes the files (`schema.yaml_round_trip`), keeping their comments and quotes.

Plain scalars are resolved by YAML 1.2's core schema, as ruamel.yaml reads them (PyYAML's own
resolver is YAML 1.1's, where `yes` and `off` are booleans); a quoted or block scalar is a
string. A key given twice is an error, as in ruamel.yaml.
"""

from __future__ import annotations

import math
import re

import yaml
from yaml.error import Mark, MarkedYAMLError, YAMLError

__all__ = ["Block", "Map", "MarkedYAMLError", "Quoted", "Seq", "YAMLError", "read"]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Map(dict):
    """A mapping; `line` is its first line, `key_lines` and `value_lines` each key's and
    value's (1-based)."""

    __slots__ = ("line", "key_lines", "value_lines")


class Seq(list):
    """A sequence; `line` is its first line, `item_lines` each item's (1-based)."""

    __slots__ = ("line", "item_lines")


class Quoted(str):
    """A string written in quotes."""

    __slots__ = ()


class Block(str):
    """A string written as a block (`|` or `>`): its text starts on the line after the value's."""

    __slots__ = ()


def read(text: str) -> object:
    """The document in `text` (None when empty); `MarkedYAMLError` when it is not YAML."""
    node = yaml.compose(text, Loader=_Loader)
    return None if node is None else _value(node)


def _value(node: yaml.Node) -> object:
    if isinstance(node, yaml.MappingNode):
        out = Map()
        out.line, out.key_lines, out.value_lines = node.start_mark.line + 1, {}, {}
        for key_node, value_node in node.value:
            key = _value(key_node)
            if not isinstance(key, str | int | float | bool | None):
                raise _error(key_node, "found a key that is not a scalar")
            if key in out:
                raise _error(key_node, f"found duplicate key {key!r}")
            out[key] = _value(value_node)
            out.key_lines[key] = key_node.start_mark.line + 1
            out.value_lines[key] = value_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out = Seq(_value(item) for item in node.value)
        out.line, out.item_lines = node.start_mark.line + 1, [item.start_mark.line + 1 for item in node.value]
        return out
    if node.style in ("|", ">"):
        return Block(node.value)
    if node.style in ("'", '"'):
        return Quoted(node.value)
    return _plain_scalar(node.value)


def _error(node: yaml.Node, problem: str) -> MarkedYAMLError:
    mark: Mark = node.start_mark
    return MarkedYAMLError("while constructing a mapping", None, problem, mark)


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_NULL = re.compile(r"~|null|Null|NULL|")
_TRUE = re.compile(r"true|True|TRUE")
_FALSE = re.compile(r"false|False|FALSE")
_INT = re.compile(r"[-+]?[0-9]+")
_OCT = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)")
_NAN = re.compile(r"\.(nan|NaN|NAN)")


def _plain_scalar(value: str) -> object:
    if _NULL.fullmatch(value):
        return None
    if _TRUE.fullmatch(value):
        return True
    if _FALSE.fullmatch(value):
        return False
    if _INT.fullmatch(value):
        return int(value)
    if _OCT.fullmatch(value):
        return int(value[2:], 8)
    if _HEX.fullmatch(value):
        return int(value[2:], 16)
    if _FLOAT.fullmatch(value):
        return float(value)
    if _INF.fullmatch(value):
        return -math.inf if value.startswith("-") else math.inf
    if _NAN.fullmatch(value):
        return math.nan
    return value
