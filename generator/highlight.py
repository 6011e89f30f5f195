"""Source excerpts for the pages: each site's snippet, highlighted with Pygments, and the
docstring of the function around it.

Three layers, as for extraction: `excerpt_blob` turns one file's bytes into excerpts (pure),
`ExcerptCache` keeps them per blob sha and requested ranges, and `Highlighting` with
`excerpts_of` fans out over the files of a source on every core. Lexing is most of the cost of a
cold build's highlighting, so overlapping snippets of one file are lexed once, as merged
ranges, and by `QuickPythonLexer`, which gives Pygments' own tokens with one regex call each.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from re import _constants, _parser

import pygments
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.token import Error, Token, Whitespace, _TokenType

from generator import docstrings as docstring_reader
from generator import workers
from generator.cache import Store
from generator.model import ErrorEntry, Site, Snippet, SourceFile
from generator.progress import Progress
from generator.upstream import Source


class OneMatchPerToken:
    """A `RegexLexer` giving exactly its own tokens, with one regex call per token.

    A `RegexLexer` tries its current state's rules one `match` at a time, first match wins:
    about 34 calls a token for Python, nine tenths of highlighting's cost. Each state's rules
    are joined here into one alternation, which Python's `re` also tries in order, first
    match wins, so the rule that matches is the same; `lastindex` names it, since its group
    closes last. A rule with a callback is matched again on its own, so the callback sees
    the match object it was written for. A state whose rules cannot be joined (backreferences,
    a pattern that does not compile joined) keeps the rule-by-rule loop. And since `re` tries
    every branch in turn, a state has one alternation per ASCII character, of only the rules
    whose match can start with it (`_first_characters`), in their order: a name no longer
    tries forty rules of strings, numbers and operators first. Mixed in before the lexer
    class: `class Quick(OneMatchPerToken, SomeRegexLexer)`.
    """

    def __init__(self, **options) -> None:
        super().__init__(**options)
        # By state, made on first use: a rebuild highlights a few files, which meet few of
        # the states and characters, and compiling every alternation took half a second.
        self._tables: dict[str, _Dispatch] = {}

    def _dispatch(self, state: str) -> _Dispatch:
        dispatch = self._tables.get(state)
        if dispatch is None:
            dispatch = self._tables[state] = _Dispatch(self._tokens[state], self.flags)
        return dispatch

    def get_tokens_unprocessed(self, text, stack=("root",)):
        stack = list(stack)
        dispatch = self._dispatch(stack[-1])
        table = dispatch.table
        pos = 0
        while True:
            # The finder of the rules that can match at this character ("" past the end).
            char = text[pos : pos + 1]
            find = table.get(char)
            if find is None:
                find = dispatch.finder(char)
            found = find(text, pos)
            if found is None:
                if pos >= len(text):
                    return
                if text[pos] == "\n":
                    # The lexer's own recovery: an unmatched line end starts over at the root.
                    stack = ["root"]
                    dispatch = self._dispatch("root")
                    table = dispatch.table
                    yield pos, Whitespace, "\n"
                else:
                    yield pos, Error, text[pos]
                pos += 1
                continue
            (_, action, new_state), match = found
            if type(action) is _TokenType:
                yield pos, action, match.group()
            elif action is not None:
                yield from action(self, match)
            pos = match.end()
            if new_state is not None:
                _change_state(stack, new_state)
                dispatch = self._dispatch(stack[-1])
                table = dispatch.table


class QuickPythonLexer(OneMatchPerToken, PythonLexer):
    """Pygments' Python lexer, faster on snippets by matching one token per rule (bench/README.md)."""


_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _finder(rules, flags: int):
    """A function giving the first of `rules` that matches at a position, and its match."""

    def one_by_one(text, pos):
        for rule in rules:
            match = rule[0](text, pos)
            if match:
                return rule, match
        return None

    alternatives, by_group, group = [], {}, 0
    for rule in rules:
        pattern = rule[0].__self__
        if _BACKREFERENCE.search(pattern.pattern):
            return one_by_one
        leading = _GLOBAL_FLAGS.match(pattern.pattern)
        # A leading (?i) applies to the whole pattern; joined, it must be scoped to it.
        text = f"(?{leading[1]}:{pattern.pattern[leading.end():]})" if leading else pattern.pattern
        # An empty group after each pattern names it: it closes last. Before the pattern, it
        # would hide the pattern's first character from re's quick check of each branch.
        alternatives.append(f"(?:{text})()")
        group += pattern.groups
        by_group[group + 1] = rule
        group += 1
    try:
        joined = re.compile("|".join(alternatives), flags).match
    except re.error:
        return one_by_one

    def at_once(text, pos):
        match = joined(text, pos)
        if match is None:
            return None
        rule = by_group.get(match.lastindex)
        if rule is None:
            return one_by_one(text, pos)
        if type(rule[1]) is _TokenType or rule[1] is None:
            return rule, match
        return rule, rule[0](text, pos)

    return at_once


class _Dispatch:
    """A state's finders by the character at the position (`table`), each made on first use
    (`finder`): for an ASCII character, and "" for the end of the text, a finder of only the
    rules that can match there, in their order; for any other character, of all of them."""

    def __init__(self, rules, flags: int) -> None:
        self.rules, self.flags = rules, flags
        self.firsts = [_first_characters(rule[0].__self__, flags) for rule in rules]
        self.table: dict[str, Callable] = {}
        self._made: dict[tuple[int, ...], Callable] = {}

    def every(self) -> Callable:
        """The finder of all the state's rules."""
        return self._finder(tuple(range(len(self.rules))))

    def finder(self, char: str) -> Callable:
        """The finder for a position at `char`, made and kept in `table`."""
        if len(char) == 1 and ord(char) >= 128:
            found = self.every()
        else:
            # Past the end ("") only a rule that may match nothing can match.
            code = ord(char) if char else -1
            found = self._finder(tuple(n for n, first in enumerate(self.firsts) if first is None or code in first))
        self.table[char] = found
        return found

    def _finder(self, subset: tuple[int, ...]) -> Callable:
        found = self._made.get(subset)
        if found is None:
            found = self._made[subset] = _finder([self.rules[number] for number in subset], self.flags)
        return found


_ASCII = range(128)
_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _first_characters(pattern: re.Pattern, flags: int) -> frozenset[int] | None:
    """The ASCII code points a match of `pattern` can start with; None when it may match the
    empty string or the pattern holds what this reading does not follow (a backreference, a
    conditional): such a rule is tried at every character."""
    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags | flags)
        codes, empty = _first_of(list(parsed), bool(parsed.state.flags & re.IGNORECASE))
    except Exception:  # noqa: BLE001 - `re`'s own parser, whose records may change: tried everywhere
        return None
    return None if empty else codes


def _first_of(items: list, ignorecase: bool) -> tuple[frozenset[int] | None, bool]:
    """(ASCII code points a match of the sequence `items` can start with, or None for any;
    whether it can match the empty string). Lookarounds and anchors match no character and
    only narrow a match, so they are passed over."""
    codes: set[int] = set()
    for op, value in items:
        empty = False
        if op is _constants.LITERAL:
            found = _class(value, value, ignorecase)
        elif op is _constants.IN:
            found, negated = set(), False
            for kind, item in value:
                if kind is _constants.LITERAL:
                    found |= _class(item, item, ignorecase)
                elif kind is _constants.RANGE:
                    found |= _class(*item, ignorecase)
                elif kind is _constants.CATEGORY and str(item) in _CATEGORIES:
                    found |= _category(str(item))
                elif kind is _constants.NEGATE:
                    negated = True
                else:
                    return None, False
            if negated:
                found = set(_ASCII) - found
        elif op is _constants.BRANCH:
            found = set()
            for branch in value[1]:
                branch_codes, branch_empty = _first_of(branch, ignorecase)
                if branch_codes is None:
                    return None, False
                found |= branch_codes
                empty = empty or branch_empty
        elif op is _constants.SUBPATTERN:
            _, added, removed, inner = value
            found, empty = _first_of(inner, (ignorecase or bool(added & re.IGNORECASE)) and not removed & re.IGNORECASE)
        elif op in _REPEATS:
            found, empty = _first_of(value[2], ignorecase)
            empty = empty or value[0] == 0
        elif op is _constants.ATOMIC_GROUP:
            found, empty = _first_of(value, ignorecase)
        elif op in (_constants.AT, _constants.ASSERT, _constants.ASSERT_NOT):
            continue
        else:
            return None, False
        if found is None:
            return None, False
        codes |= found
        if not empty:
            return frozenset(codes), False
    return frozenset(codes), True


_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT)


@cache
def _class(low: int, high: int, ignorecase: bool) -> frozenset[int]:
    """The ASCII code points `[low-high]` matches; under IGNORECASE that includes the other
    case, and a non-ASCII letter may match an ASCII one (the Kelvin sign matches k)."""
    pattern = re.compile(f"[{re.escape(chr(low))}-{re.escape(chr(high))}]", re.IGNORECASE if ignorecase else 0)
    return frozenset(code for code in _ASCII if pattern.match(chr(code)))


@cache
def _category(name: str) -> frozenset[int]:
    pattern = re.compile(_CATEGORIES[name])
    return frozenset(code for code in _ASCII if pattern.match(chr(code)))


def _change_state(stack: list[str], new_state) -> None:
    """A rule's state change applied to the lexer's stack, as RegexLexer does it."""
    if isinstance(new_state, tuple):
        for state in new_state:
            if state == "#pop":
                if len(stack) > 1:
                    stack.pop()
            elif state == "#push":
                stack.append(stack[-1])
            else:
                stack.append(state)
    elif isinstance(new_state, int):
        # Pop that many, keeping the root.
        del stack[max(new_state, 1 - len(stack)) :]
    elif new_state == "#push":
        stack.append(stack[-1])


@cache
def _lexer() -> QuickPythonLexer:
    """Made on first use: joining its rules takes a fifth of a second, which a rebuild that
    highlights nothing in this process would pay for nothing."""
    return QuickPythonLexer(stripnl=False, ensurenl=False)


_FORMATTER = HtmlFormatter(nowrap=True)
# Tokens both site themes (render.pygments_css) show in the code's own text colour, so a span
# for each would only add bytes: most tokens of Python are names and punctuation, and pages
# are half snippet markup. Shown as plain text instead.
_PLAIN = frozenset({Token.Text, Token.Text.Whitespace, Token.Name, Token.Punctuation})


@dataclass(frozen=True, slots=True)
class Request:
    """What the pages need from one file: snippet ranges and (line, function) pairs whose
    enclosing docstring to read."""

    ranges: tuple[tuple[int, int], ...]
    functions: tuple[tuple[int, str], ...]

    def key(self, blob_sha: str) -> str:
        payload = json.dumps([blob_sha, self.ranges, self.functions], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class Excerpts:
    """One file's excerpts: (plain, html) for every line a snippet covers, and docstrings by
    (line, function)."""

    lines: dict[int, tuple[str, str]]
    docstrings: dict[tuple[int, str], str | None]

    def snippet(self, start: int, end: int) -> Snippet | None:
        numbers = [n for n in range(start, end + 1) if n in self.lines]
        if not numbers:
            return None
        return Snippet(
            numbers[0],
            tuple(self.lines[n][0] for n in numbers),
            tuple(self.lines[n][1] for n in numbers),
        )


def highlight_lines(code: str) -> list[str]:
    """Pygments HTML for each line of `code`; every line's markup is closed on that line."""
    if not code:
        return []
    # What `Lexer.get_tokens` does to the text first (`_preprocess_lexer_input`, with this
    # lexer's options): no byte-order mark, newlines as "\n".
    text = code.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return _html_lines(_lexer().get_tokens_unprocessed(text))


# The opening tag of each token type's span ("" for none), made on first use as
# `HtmlFormatter(nowrap=True)` makes it; the types of `_PLAIN` have none.
_OPENERS: dict = dict.fromkeys(_PLAIN, "")


def _opener(kind) -> str:
    css_class = _FORMATTER._get_css_classes(kind)
    return f'<span class="{css_class}">' if css_class else ""


def _html_lines(tokens: Iterable[tuple[int, object, str]]) -> list[str]:
    """The lines of `HtmlFormatter(nowrap=True)`'s markup for a lexer's `(position, type, text)`
    tokens, byte for byte: its line loop (`_format_lines`) without the options it is never given
    here (line numbers, tag files, inline styles), writing lines to a list instead of a stream
    to be joined and split again. It was a third of highlighting's cost (bench/README.md)."""
    openers = _OPENERS
    lines: list[str] = []
    line: list[str] = []
    lspan = ""
    for _, kind, value in tokens:
        cspan = openers.get(kind)
        if cspan is None:
            cspan = openers[kind] = _opener(kind)
        if "&" in value or "<" in value or ">" in value:
            value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if "\n" in value:
            parts = value.split("\n")
            for part in parts[:-1]:
                if line:
                    if lspan != cspan and part:
                        line.extend(((lspan and "</span>"), cspan, part, (cspan and "</span>")))
                    else:
                        line.extend((part, (lspan and "</span>")))
                    lines.append("".join(line))
                    line = []
                elif part:
                    lines.append(f"{cspan}{part}{cspan and '</span>'}")
                else:
                    lines.append("")
            value = parts[-1]
        if not value:
            continue
        if line:
            if lspan != cspan:
                line.extend(((lspan and "</span>"), cspan, value))
                lspan = cspan
            else:
                line.append(value)
        else:
            line = [cspan, value]
            lspan = cspan
    if line:
        line.append(lspan and "</span>")
        lines.append("".join(line))
    return lines


def merge_ranges(ranges) -> list[tuple[int, int]]:
    """Overlapping or touching line ranges merged, so shared lines are lexed once."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def excerpt_blob(data: bytes, request: Request) -> Excerpts:
    """The excerpts one file's bytes give for a request; undecodable bytes are replaced."""
    text = data.decode("utf-8", errors="replace").replace("\0", "\ufffd")
    source_lines = text.splitlines()
    lines: dict[int, tuple[str, str]] = {}
    for start, end in merge_ranges(request.ranges):
        start, end = max(start, 1), min(end, len(source_lines))
        if start > end:
            continue
        chunk = source_lines[start - 1 : end]
        html = highlight_lines("\n".join(chunk) + "\n")
        # A lexer never merges lines, but guard against a count mismatch all the same.
        if len(html) != len(chunk):
            html = [_escape(line) for line in chunk]
        for offset, (plain, markup) in enumerate(zip(chunk, html)):
            lines[start + offset] = (plain, markup)
    keep_ends = text.splitlines(keepends=True)
    read: dict[int, str | None] = {}
    docstrings = {(line, function): docstring_reader.docstring_of(keep_ends, line, function, read) for line, function in request.functions}
    return Excerpts(lines, docstrings)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def excerpter_version() -> str:
    """Changes with this module, the docstring reader and Pygments, so stale markup is never
    served from the cache."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(docstring_reader.__file__).read_bytes())
    digest.update(pygments.__version__.encode())
    return digest.hexdigest()[:16]


class ExcerptCache(Store):
    """Excerpts per blob and request under `root/excerpts/<version>.sqlite` (`cache.Store`)."""

    def __init__(self, root: Path, version: str) -> None:
        super().__init__(root, "excerpts", version)

    def load(self, key: str) -> Excerpts | None:
        entry = self.get(key)
        try:
            lines = {int(n): (plain, html) for n, plain, html in entry["lines"]}
            docstrings = {(line, function): doc for line, function, doc in entry["docstrings"]}
            return Excerpts(lines, docstrings)
        except (ValueError, KeyError, TypeError):
            return None

    def store(self, key: str, excerpts: Excerpts) -> None:
        entry = {
            "lines": [[n, plain, html] for n, (plain, html) in sorted(excerpts.lines.items())],
            "docstrings": [[line, function, doc] for (line, function), doc in sorted(excerpts.docstrings.items())],
        }
        self.put(key, entry)


def requests_of(entries: tuple[ErrorEntry, ...], paths: Collection[str] | None = None) -> dict[str, Request]:
    """What each file (of `paths`, or every one) must give: the snippet range and function of
    every site in it."""
    ranges: dict[str, set[tuple[int, int]]] = defaultdict(set)
    functions: dict[str, set[tuple[int, str]]] = defaultdict(set)
    for entry in entries:
        for site in entry.sites:
            if paths is not None and site.path not in paths:
                continue
            ranges[site.path].add((site.snippet_start, site.snippet_end))
            if site.function:
                functions[site.path].add((site.line, site.function))
    return {path: Request(tuple(sorted(ranges[path])), tuple(sorted(functions[path]))) for path in sorted(ranges)}


def _excerpt_batch(cache: ExcerptCache, batch: list[tuple[str, bytes, Request]]) -> list[Excerpts]:
    """A worker's share: each file's excerpts, stored in the cache as they are made."""
    made = []
    with cache.batch():
        for key, data, request in batch:
            excerpts = excerpt_blob(data, request)
            cache.store(key, excerpts)
            made.append(excerpts)
    return made


class Highlighting:
    """The excerpts of a build's files: what each file must give (`requests_of`), and those the
    cache lacks being made on every core from `start` on, while the build does its
    single-core work (history, derivations); `excerpts_of` takes them from here. Highlighting
    is the costliest part of a cold build. `close` stops what is left."""

    def __init__(self, source: Source, entries: tuple[ErrorEntry, ...], cache_dir: Path) -> None:
        self.source = source
        self.entries = entries
        self.cache = ExcerptCache(cache_dir, excerpter_version())
        self.files: dict[str, SourceFile] = {file.path: file for file in source.files()}
        # What each file must give, and its key in the cache: worked out as they are asked for.
        self.requests: dict[str, Request] = {}
        self.keys: dict[str, str] = {}
        # By path: a function waiting for the batch being made with it, and its place there.
        self._pending: dict[str, tuple[Callable[[], list[Excerpts]], int]] = {}
        self._pool: ProcessPoolExecutor | None = None

    def ask(self, paths: Collection[str] | None = None) -> list[str]:
        """The files among `paths` (None: all) that have sites, sorted, with their requests
        and keys worked out."""
        new = requests_of(self.entries, None if paths is None else {path for path in paths if path not in self.requests})
        for path, request in new.items():
            self.requests[path] = request
            self.keys[path] = request.key(self.files[path].blob_sha)
        return sorted(self.requests if paths is None else (path for path in paths if path in self.requests))

    def start(self, jobs: int | None = None, paths: Collection[str] | None = None) -> None:
        """Begin highlighting every file (or every one of `paths`: those whose blobs are new
        since the last build, say) whose excerpts the cache lacks, in worker processes."""
        jobs = workers.cores(jobs)
        missing = [path for path in self.ask(paths) if not self.cache.has(self.keys[path])]
        if jobs == 1 or not missing:
            return
        if len(missing) < 16:
            # A rebuild's few changed files: in one forked process, which ends long before
            # the pages need them (and with it the pages its fork shares), rather than in a
            # pool forked from the build's largest state on its critical path.
            for paths, payload in self.batches(missing):
                (result,) = workers.background([partial(_excerpt_batch, self.cache, payload)], jobs, len(self.entries))
                for number, path in enumerate(paths):
                    self._pending[path] = (result, number)
            return
        # Spawned, not forked: this process goes on building large records meanwhile, and
        # every page it touched after a fork would be copied, costing more than a fresh start.
        # Deferred: the pages need the excerpts last, once the history, the related errors
        # and every article are made, and those wait for each other on the way.
        self._pool = workers.pool(jobs, start="spawn", deferred=True)
        for paths, payload in self.batches(missing):
            future = self._pool.submit(_excerpt_batch, self.cache, payload)
            for number, path in enumerate(paths):
                self._pending[path] = (future.result, number)

    def batches(self, paths: list[str]) -> Iterator[tuple[list[str], list[tuple[str, bytes, Request]]]]:
        """`paths` sixteen at a time, each with what `_excerpt_batch` takes for them."""
        for first in range(0, len(paths), 16):
            batch = paths[first : first + 16]
            yield batch, [(self.keys[path], self.source.read(self.files[path]), self.requests[path]) for path in batch]

    def take(self, path: str) -> Excerpts | None:
        """A file's excerpts if a worker was making them (waiting for it); None otherwise, or
        when the worker failed, so the caller makes them itself."""
        pending = self._pending.pop(path, None)
        if pending is None:
            return None
        result, number = pending
        try:
            return result()[number]
        except Exception:  # noqa: BLE001 - a worker that died or failed: made again by the caller
            return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()


def excerpts_of(made: Highlighting, paths: Collection[str], jobs: int | None = None) -> dict[str, Excerpts]:
    """The excerpts of the files at `paths` that have requests: taken from the workers `made`
    started, or the cache, the rest highlighted here on every core. `made` is closed after."""
    try:
        wanted = made.ask(paths)
        progress = Progress("highlight", len(wanted))
        found: dict[str, Excerpts] = {}
        missing: list[str] = []
        for path in wanted:
            excerpts = made.take(path) or made.cache.load(made.keys[path])
            if excerpts is None:
                missing.append(path)
            else:
                found[path] = excerpts
            progress.update(len(found), "files")
        for path, excerpts in zip(missing, _run(made, missing, jobs)):
            found[path] = excerpts
            progress.update(len(found), "files")
        progress.close()
        return found
    finally:
        made.close()


def site_excerpts(found: Mapping[str, Excerpts], sites: Iterable[Site]) -> dict[tuple[str, int], tuple[Snippet | None, str | None]]:
    """(snippet, docstring) of each site whose file is in `found`, keyed by (path, line)."""
    result: dict[tuple[str, int], tuple[Snippet | None, str | None]] = {}
    for site in sites:
        excerpts = found.get(site.path)
        if excerpts is not None:
            result[(site.path, site.line)] = (
                excerpts.snippet(site.snippet_start, site.snippet_end),
                excerpts.docstrings.get((site.line, site.function)),
            )
    return result


def _run(made: Highlighting, missing: list[str], jobs: int | None):
    """The excerpts of `missing` files in order, stored in the cache, made on every core when
    there is enough work."""
    jobs = workers.cores(jobs)
    batches = [payload for _, payload in made.batches(missing)]
    if jobs == 1 or len(missing) < 8:
        for batch in batches:
            yield from _excerpt_batch(made.cache, batch)
        return
    with workers.pool(jobs) as pool:
        for batch_result in pool.map(partial(_excerpt_batch, made.cache), batches):
            yield from batch_result
