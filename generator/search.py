"""Paste-to-find search: an error as a user saw it (message, log line, JSON error body or whole
traceback, whole or cut short) to the errors it most likely is.

A paste is read first (`parse_paste`): log prefixes come off each line, and the error is read
every way it may be held, each a reading: the traceback's last exception line, an exception's
repr (asyncio's `exception=Cls('...')`), a JSON error body's `message`, the text after an HTTP
wrapper, the lines of a log that look most like an error.

Three signals, summed into one score:

- **Template match.** Each message template is a matcher: its literal text must appear exactly
  (whitespace ignored), each placeholder matches any value. A match scores by the share of the
  reading its literal text pins down, so the most specific template wins. A reading that stops
  before the template ends (a paste cut short) matches its beginning, at a lower weight.
- **Frame match.** In a traceback, the last frame inside the package (`.../sglang/srt/x.py`,
  line, function and source line) points at the raise or assert itself; this is how
  message-less asserts and raises are found. A frame whose file moved since the paste's
  release is matched by its function's name and the raising statement.
- **Word match.** BM25 over each error's words (message, exception, function, file, asserted
  condition), the fallback for edited pastes.

Then ranked in tiers: the error the traceback shows raised, then errors whose message or frame
explains the paste and which are raised as the exception it names, then the rest by score. A
class fits the one a paste names when it is that class or a subclass of it, or, when upstream
defines the class named, one of its bases but `Exception` and `BaseException`; upstream's
classes and their ancestors are read from its code (`raisers.exception_classes`) and kept in
`search/classes.json` with Python's own, loaded only for a paste that names a class.

The index is a set of small JSON files under `search/` (see `search_files`): a manifest, token
shards (templates and postings, bucketed by a hash of a word), entry shards (titles, bucketed by
a hash of the error's id), file shards (sites, bucketed by the last two path components) and
function shards (sites, bucketed by their function's name and statement). Every file names
errors by id, never by position, so a new error changes only the shards its own words, id,
files and functions fall in, and a rebuild rewrites a handful of them. A lookup loads only the
shards its words and frame need. `lookup` here and `templates/static/search.js` in the browser
run the same steps on the same files, so they rank alike.
"""
from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.errors import ErrorkbError
from generator.cache import BlobState
from generator.content import printed_template
from generator.history import EarlierPlaces, LedgerFacts, SearchFacts
from generator.model import ErrorEntry, LedgerRecord, Placeholder, Site, Template, Versions
from generator.publish import file_digest

INDEX_VERSION = 6
INDEX_DIR = "search"
TOKEN_BUCKETS = 2560
FILE_BUCKETS = 128
FUNCTION_BUCKETS = 512
ENTRY_BUCKETS = 2048
# Words in more than this share of errors carry almost no evidence; leaving their postings out
# keeps every token shard small.
STOP_SHARE = 0.03
K1, B = 1.2, 0.75
# The document length at which BM25's length normalisation is neutral: a constant near the
# errors' average (15.5 words at 0.5.23), not the index's own average, which any commit moves
# and which weighs every posting. Rounded to a tenth, it still crossed a line when a commit
# added ten short errors (15.550 to 15.549), and the index was made again: 1,983 shards.
PIVOT = 16
# A word only an error's other forms have (an earlier wording, a printed form) counts as this
# share of one its message has: a word of what a release prints now is the better evidence.
FORM_WORD = 0.5
# A pasted log can be long; the error is at its end, and its message has fewer words than this.
MAX_PASTE = 20_000
MAX_WORDS = 80
# A log is read from the lines that look most like an error, at most this many; a match on one
# of them counts this much when the paste names its own error too.
LOG_LINES = 6
LOG_WEIGHT = 0.9
WORD_CANDIDATES = 50
# Results scoring below this are noise (a shared common word or two), not an answer.
MIN_SCORE = 0.4
# A template match that pins down less than this share of the paste, and fewer literal
# characters than CONFIDENT_LITERAL, is only weak evidence (`{x}.` matches most sentences).
CONFIDENT_SHARE = 0.3
CONFIDENT_LITERAL = 20
# ... unless it starts with literal text the paste starts with: `CUDA error: {err}` with a long
# error string is still that error. Needs at least this many characters at the start.
CONFIDENT_START = 8
# Bonus for a template raised as the exception the paste names.
NAMED_EXCEPTION = 0.3
# What a share of the paste pinned down counts when the paste is only a message's beginning.
PARTIAL = 0.8
# The fewest literal characters a beginning pins down to count (`res=` of `{res=}, ...`).
SHORT_START = 4
# A template that starts with text is filed under the rarest of its first this many words.
FIRST_ANCHORS = 3

# The same whitespace as search.js, so both strip the same characters.
_SPACE_CHARS = " \t\n\r\f\v\u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
_SPACE = re.compile(f"[{_SPACE_CHARS}]+")
_TOKEN = re.compile(r"[a-z0-9]+")
_EXCEPTION = r"((?:[A-Za-z_][A-Za-z0-9_.]*)?(?:Error|Exception|Warning|Exit|Interrupt|Failure|Iteration))"
_EXCEPTION_LINE = re.compile(r"^[ \t]*" + _EXCEPTION + r"(?::[ \t]?(.*))?$")
# A line that names the exception after other text: `worker hit: RuntimeError: boom`, and an
# exception printed by its own `__str__` (`KVTransferError(bootstrap_room=1): boom`).
_NAMED_INSIDE = re.compile(r"(?:^|[ \t\]>(])" + _EXCEPTION + r"(?:\([^()]*\))?:[ \t](.*)$")
# An exception's repr, as asyncio prints a task's: `exception=ValueError('...')`.
_REPR = re.compile(r"(?:^|[^A-Za-z0-9_.])" + _EXCEPTION + r"""\((['"])((?:\\.|(?!\2)[^\\])*)(?:\2\)|$)""")
# A JSON error body's message, or a Python dict's (`{'message': "..."}`), maybe cut short.
_BODY_FIELD = re.compile(r"""(["'])(?:message|detail|msg)\1[ \t]*:[ \t]*(["'])((?:\\.|(?!\2)[^\\])*)(?:\2|$)""")
# What an HTTP client puts before a server's message.
_HTTP_WRAPPER = re.compile(r"(?:^|[ \t:])(?:Bad Request|Internal Server Error|Unprocessable Entity|Service Unavailable|HTTP(?:/[0-9.]+)?[ \t]?[0-9]{3}(?:[ \t][A-Z][a-z]+)*|Error code:[ \t]?[0-9]{3})[ \t]*[:-][ \t]*")
# A message an issue title quotes (`dies with "engram target-verify expects one equal block"`):
# long enough to be an error's words, not a value.
_QUOTED = re.compile(r"[\"\u201c`]([^\"\u201d`]{20,})[\"\u201d`]")
# A path a title puts after a message (`Cannot find any model weights /workspace/.../loader.py`).
_PATH_WORD = re.compile(r"[ \t]+(?:[A-Za-z0-9_.~-]*/)+[A-Za-z0-9_.-]+")
_WORD = re.compile(r"\S+")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[^u])")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
# The words of a log line that reports an error.
_ERRORISH = re.compile(r"error|fail|exception|invalid|cannot|can't|unable|unsupported|not supported|out of memory|abort|mismatch|not found|must(?![A-Za-z0-9_])|timed out|killed|leak", re.IGNORECASE)
# What loggers put before a message: docker-compose's `name  | `, ray's `(Worker pid=1) `,
# SGLang's `[2026-01-01 10:00:00 TP0] `, torch's `[rank0]: `, xoscar's `[address=..., pid=1] `,
# a timestamp and logger fields, a level.
_LOG_PREFIX = re.compile(
    r"[A-Za-z0-9_.-]+ +\| ?"
    r"|\([A-Za-z0-9_]* ?pid=[0-9]+[^)]*\) ?"
    r"|\[[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][^\]]*\] ?"
    r"|\[(?:rank|TP|DP|PP|EP)[0-9]+[^\]]*\]:? ?"
    r"|\[[A-Za-z_]+=[^\]]*\] ?"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?Z? +(?:[A-Za-z_][A-Za-z0-9_.]* +[0-9]+ +)?"
    r"|(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)(?::? +|:$)"
)
_FRAME_LINE = re.compile(r'^[ \t]*File "([^"]+)", line (\d+)(?:, in (.+?))?[ \t]*$')
_WARNING_LINE = re.compile(r"^(.*?\.py):(\d+): ([A-Za-z_][A-Za-z0-9_]*Warning): (.*)$")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
_LEADING_NAME = re.compile(r"[A-Za-z0-9_.]*")
_CARETS = re.compile(r"^[ \t]*[\^~]+[ \t]*$")
_RAISING = re.compile(r"(?:raise|assert)(?![A-Za-z0-9_])")
_ASSERT = re.compile(r"assert(?![A-Za-z0-9_])")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One error a paste may be: its id, title (`message` when it has literal text, else what
    it checks), exception, kind, where it is first raised (`file.py in function`, which tells
    apart asserts of the same condition), the score it ranked by (higher is better) and how
    the paste matched it."""

    id: str
    title: str
    message: str | None
    exception: str | None
    kind: str
    where: str
    score: float
    # How the paste matched it: `message` (the template, values filled in), `beginning` (the
    # paste is the message's beginning), `traceback` (the frame), `words`.
    match: str = "words"
    # What to say of the form it matched, when not its message: an earlier wording's releases.
    note: str = ""

    @property
    def page(self) -> str:
        """The error's page, relative to the site root."""
        return f"errors/{self.id}/"


@dataclass(frozen=True, slots=True)
class Frame:
    """A traceback frame: file path as printed, line, function name and first source line."""

    path: str
    line: int
    function: str
    source: str


@dataclass(frozen=True, slots=True)
class Reading:
    """One way to read the error out of a paste: its message, the exception it names (None
    when unknown, or only an HTTP client's), and how much a match on it counts: 1 for the
    paste's own error, less for a line picked out of a log around it."""

    text: str
    exception: str | None
    weight: float


@dataclass(frozen=True, slots=True)
class Paste:
    """What a lookup reads from a paste: the error message and the exception name if shown
    (what its words are searched on), the last frame inside the package if the paste is a
    traceback or a warning line, and every reading of the error templates are matched on."""

    message: str
    exception: str | None
    frame: Frame | None
    readings: tuple[Reading, ...] = ()


# ---------------------------------------------------------------------------------------------
# Text primitives, mirrored one for one in search.js.


def squash(text: str) -> str:
    """Text with all whitespace removed: what template literals are compared on."""
    return _SPACE.sub("", text)


def trim(text: str) -> str:
    """Text without leading and trailing whitespace."""
    return text.strip(_SPACE_CHARS)


def tokens(text: str) -> list[str]:
    """Lowercase words of two or more characters that are not plain numbers (values)."""
    return [t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and not t.isdigit()]


def units(text: str) -> int:
    """Length in UTF-16 code units, the length JavaScript sees."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@functools.lru_cache(maxsize=1 << 16)
def bucket(key: str, buckets: int) -> int:
    """FNV-1a (32-bit) of the UTF-8 key, modulo `buckets`."""
    value = 0x811C9DC5
    for byte in key.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value % buckets


def path_parts(path: str) -> list[str]:
    """A printed path's components, `\\` read as `/`, empty ones dropped."""
    return [p for p in path.replace("\\", "/").split("/") if p]


def path_key(path: str) -> str:
    """The last two components of a path, the key its file shard is chosen by."""
    parts = path_parts(path)
    return "/".join(parts[-2:])


def path_matches(frame_path: str, site_path: str) -> bool:
    """Whether a printed file path is the site's file: it ends with the site's path minus its
    first component (`python/sglang/srt/x.py` is `.../dist-packages/sglang/srt/x.py`). A path
    its paster cut (`.../managers/scheduler.py`) is matched by the two or more components left."""
    site_parts = site_path.split("/")
    frame_parts = path_parts(frame_path)
    need = max(1, min(3, len(site_parts) - 1))
    cut = _cut(frame_parts)
    if cut:
        frame_parts = frame_parts[cut:]
        if len(frame_parts) < 2:
            return False
        need = min(need, len(frame_parts))
    return frame_parts[-need:] == site_parts[-need:] and len(frame_parts) >= need


def _cut(parts: list[str]) -> int:
    """Where what is left of a path cut by an ellipsis (`...` or `…`) starts; 0 if not cut."""
    return max((number + 1 for number, part in enumerate(parts) if part in ("...", "\u2026")), default=0)


# ---------------------------------------------------------------------------------------------
# Reading a paste.


def parse_paste(text: str) -> Paste:
    """What a paste says: the error it reports, read every way a user's paste may hold it.

    Log prefixes are taken off each line first (timestamps, `[... TP0]`, `[rank0]:`, levels,
    docker-compose's `name  |`, ray's `(Worker pid=1)`). A traceback's error is its last
    exception line (`ValueError: ...`) and what follows it, or a warning line
    (`x.py:12: UserWarning: ...`) with its file as the frame; the last frame inside the package
    is the frame. Then more readings: an exception's repr (asyncio's `exception=Cls('...')`),
    the `message` or `detail` of a JSON error body, the text after an HTTP wrapper
    (`Bad Request:`, `Error code: 400 -`), and the lines of a log that look most like an error,
    ranked. Lines inside a chained traceback (its causes) are not read: the error is the last.
    """
    lines = [_unprefixed(line) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    frames: list[Frame] = []
    index = 0
    first_frame = last_frame_end = -1
    while index < len(lines):
        found = _FRAME_LINE.match(lines[index])
        if found:
            source = ""
            end = index
            if index + 1 < len(lines) and not _FRAME_LINE.match(lines[index + 1]):
                candidate = lines[index + 1]
                if candidate.startswith((" ", "\t")) and trim(candidate) and not _CARETS.match(candidate):
                    source = trim(candidate)
                    end = index + 1
            while end + 1 < len(lines) and _CARETS.match(lines[end + 1]):
                end += 1
            frames.append(Frame(found.group(1), int(found.group(2)), found.group(3) or "", source))
            if first_frame < 0:
                first_frame = index
            last_frame_end = end
            index = end + 1
            continue
        index += 1
    # The last frame inside the package; else the last whose path was cut (`.../x.py`).
    frame = next((f for f in reversed(frames) if _in_package(f.path)), None)
    if frame is None:
        frame = next((f for f in reversed(frames) if _cut(path_parts(f.path))), None)
    rest = lines[last_frame_end + 1 :] if frames else lines
    before = lines[:first_frame] if frames else []
    readings: list[Reading] = []
    message, exception = "", None
    for number, line in enumerate(rest):
        warning = _WARNING_LINE.match(trim(line))
        if warning:
            source = trim(rest[number + 1]) if number + 1 < len(rest) else ""
            frame = frame or Frame(warning.group(1), int(warning.group(2)), "", source)
            message, exception = trim(warning.group(4)), warning.group(3)
            break
    else:
        for number, line in enumerate(rest):
            found = _EXCEPTION_LINE.match(line)
            if found:
                message = trim("\n".join([found.group(2) or "", *rest[number + 1 :]]))
                exception = _class_name(found.group(1))
                if not message and exception == "AssertionError":
                    message = _printed_assert(rest[:number], frames)
                break
    if exception is not None:
        readings.extend(_unwrapped(message, exception, 1.0))
    for line in _error_lines(before + rest):
        readings.extend(_unwrapped(line, None, 1.0 if exception is None else LOG_WEIGHT))
    readings = list(dict.fromkeys(readings))
    if exception is None:
        # No exception line: the message is the error line found first (a log line or the
        # whole paste, unwrapped), and its exception if it names one.
        first = next((r for r in readings if r.text), None)
        if first is not None:
            message, exception = first.text, first.exception
        else:
            message = trim("\n".join(rest))
            if message:
                readings.extend(_unwrapped(message, None, 1.0))
    elif not message:
        # An exception line without a message (asyncio's CancelledError under a task that
        # failed): the message is that of an exception named in the log around it, if any.
        first = next((r for r in readings if r.text and r.exception), None)
        if first is not None:
            message, exception = first.text, first.exception
    return Paste(message, exception, frame, tuple(readings))


def _printed_assert(above: list[str], frames: list[Frame]) -> str:
    """What identifies a bare `AssertionError` (one without a message): the statement the
    traceback printed above it, from its last frame, or, in a paste cut below that frame's
    header, the indented line above it. "" when that is no `assert`."""
    lines = [line for line in above if trim(line) and not _CARETS.match(line)]
    if lines:
        source = trim(lines[-1]) if lines[-1][:1] in (" ", "\t") else ""
    else:
        source = frames[-1].source if frames else ""
    return source if _ASSERT.match(source) else ""


# A release the paste names: `sglang==0.4.6`, a path's `sglang-0.4.6` (an sdist's folder, a
# wheel's `.dist-info`), `python -m sglang.check_env`'s `sglang: 0.4.6`, `SGLang version 0.4.6`.
_PASTE_VERSION = re.compile(r"(?<![\w.-])sglang(?:\s*==\s*|-|:\s*|\s+version[\s:=]*v?|\s+v?)(\d+\.\d+\.\d+(?:\.post\d+)?)(?![\w.]*\d)", re.IGNORECASE)


def paste_version(text: str) -> str | None:
    """The SGLang release a paste names, when it names one (the last it names: an upgrade's
    log says the newer last); None when it names none."""
    found = _PASTE_VERSION.findall(text)
    return found[-1] if found else None


def _unprefixed(line: str) -> str:
    """A log line without the prefixes loggers put before the message, indentation kept."""
    for _ in range(6):
        found = _LOG_PREFIX.match(line)
        if not found or not found.group():
            return line
        line = line[found.end() :]
    return line


def _error_lines(lines: list[str]) -> list[str]:
    """The lines of a log that look most like an error, best first (at most `LOG_LINES`): one
    naming an exception (`Cls: ...`, `Cls('...')`, `Cls(...): ...`), then one with an error's
    words, the later first; each with the lines that continue it (indented or not a new record)."""
    ranked = []
    for number, line in enumerate(lines):
        text = trim(line)
        if not text or text.startswith("Traceback (most recent call last)") or _CARETS.match(line):
            continue
        rank = 2 if _NAMED_INSIDE.search(text) or _REPR.search(text) else 1 if _ERRORISH.search(text) else 0
        if rank:
            ranked.append((-rank, -number, text))
    ranked.sort()
    return [text for _rank, _number, text in ranked[:LOG_LINES]]


def _unwrapped(text: str, exception: str | None, weight: float) -> list[Reading]:
    """The readings of one error line: as it is, then the message inside a wrapper. A named
    exception inside the line (`... RuntimeError: boom`) gives `boom` with its class; an
    exception's repr gives its text and class; a JSON error body or an HTTP wrapper gives the
    message with no class (an HTTP client's `BadRequestError` says nothing of what was raised)."""
    text = trim(text)
    readings = []
    for found in _REPR.finditer(text):
        readings.append(Reading(trim(_unescape(found.group(3))), _class_name(found.group(1)), weight))
    for found in _BODY_FIELD.finditer(text):
        readings.append(Reading(trim(_unescape(found.group(3))), None, weight))
    if not readings:
        wrapped = _HTTP_WRAPPER.search(text)
        if wrapped:
            readings.append(Reading(trim(text[wrapped.end() :]), None, weight))
    if exception is None:
        named = _NAMED_INSIDE.search(text)
        if named:
            readings.append(Reading(trim(named.group(2)), _class_name(named.group(1)), weight))
    readings.append(Reading(text, exception, weight))
    if exception is None:
        # A line that only mentions the error (an issue's title): what it quotes, and the line
        # without the paths around the message.
        quoted = [trim(found.group(1)) for found in _QUOTED.finditer(text)]
        bare = trim(_PATH_WORD.sub(" ", text))
        for part in (*quoted, *([bare] if bare != text else [])):
            if len(_WORD.findall(part)) >= 3:
                readings.append(Reading(part, None, weight))
    return [reading for reading in readings if reading.text or reading.exception]


def _class_name(printed: str) -> str | None:
    """The class of a printed exception name (`asyncio.exceptions.CancelledError`), None for a
    bare `Error`, which is a logger's word, not a class."""
    name = printed.rsplit(".", 1)[-1]
    return None if name == "Error" else name


def _unescape(text: str) -> str:
    """A quoted string's escapes (JSON's and Python's) decoded."""
    return _ESCAPE.sub(lambda found: _ESCAPES.get(found.group(1), found.group(1)) if found.group(1)[0] != "u" else chr(int(found.group(1)[1:], 16)), text)


def _in_package(path: str) -> bool:
    return "/sglang/" in "/" + path.replace("\\", "/")


def forms_of(paste: Paste) -> list[tuple[str, str | None, float]]:
    """The squashed texts to match templates against, each with the exception it names and the
    weight of a match on it: every reading, and a KeyError's message (printed quoted) also
    unquoted."""
    readings = paste.readings or (Reading(paste.message, paste.exception, 1.0),)
    forms = []
    for reading in readings:
        text = squash(reading.text)
        if not text:
            continue
        forms.append((text, reading.exception, reading.weight))
        if reading.exception == "KeyError" and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            forms.append((text[1:-1], reading.exception, reading.weight))
    return list(dict.fromkeys(forms))


def messages_of(paste: Paste) -> list[str]:
    """The squashed texts a paste's templates are matched on (`forms_of` without the rest)."""
    return list(dict.fromkeys(form for form, _exception, _weight in forms_of(paste)))


def exceptions_of(paste: Paste) -> set[str]:
    """The exception classes a paste names, in any of its readings."""
    named = {reading.exception for reading in paste.readings if reading.exception}
    if paste.exception:
        named.add(paste.exception)
    return named


def query_tokens(paste: Paste) -> list[str]:
    """The distinct words of a paste a lookup searches on, in order of first appearance."""
    text = paste.message
    if paste.exception:
        text += " " + paste.exception
    if paste.frame is not None:
        text += " " + paste.frame.function + " " + paste.frame.source
    return list(dict.fromkeys(tokens(text)))[:MAX_WORDS]


def shard_tokens(paste: Paste, words: list[str]) -> list[str]:
    """The words whose token shards a lookup reads templates from: the query's, then those of
    the paste's other readings (a template lies in the shard of its rarest anchor word)."""
    found = list(words)
    for reading in paste.readings:
        found.extend(tokens(reading.text))
    return list(dict.fromkeys(found))[:MAX_WORDS]


# ---------------------------------------------------------------------------------------------
# Building the index.


@dataclass(frozen=True, slots=True)
class _Matcher:
    """A template as the index stores it: squashed literal segments in order, and whether the
    template starts and ends with literal text (else any value may come before or after), and
    the words a paste of it always shows whole (`anchors`; the rarest picks its shard): those
    of its first words, when it starts with text, so that its beginning alone finds it."""

    segments: tuple[str, ...]
    starts: bool
    ends: bool
    anchors: tuple[str, ...]


def matcher_of(entry: ErrorEntry) -> _Matcher | None:
    """The matcher of an entry's message, None for one without literal text."""
    if entry.message is None or entry.template is None:
        return None
    return template_matcher(entry.template)


def statement_matcher(entry: ErrorEntry) -> _Matcher | None:
    """The matcher of a product assert without a message by its statement (its title,
    `assert <condition>`), which a traceback prints above `AssertionError` and users quote as
    its message; None for any other entry. Only the product's: a test's assert fails under
    pytest, which prints it otherwise, and 7,800 more rows would make every lookup load a
    tenth more."""
    site = entry.sites[0]
    if entry.message is not None or site.kind != "assert" or not site.assert_condition or entry.scope != "product":
        return None
    matcher = template_matcher(Template((entry.title,)))
    # A paste of a statement shows all its words, and 10,000 statements start "assert": the
    # rarest of the condition's words picks its shard.
    words = _safe_tokens(site.assert_condition, first=True, last=True)
    return None if matcher is None else replace(matcher, anchors=tuple(dict.fromkeys(words)))


def _template_row(entry: ErrorEntry, matcher: _Matcher, note: str = "", retired: bool = False) -> str:
    """A template row of a token shard: the error, its exception and title, and the matcher;
    then, for a form of the error other than its message that a lookup should name (an
    earlier wording: `history.search_facts`), what to say of it; then 1 for an error no
    longer raised, which a lookup ranks after the errors raised now that match as well."""
    row = [entry.id, entry.exception, entry.title, list(matcher.segments), int(matcher.starts), int(matcher.ends)]
    return _json([*row, note, 1] if retired else [*row, note] if note else row)


def template_matcher(template: Template) -> _Matcher | None:
    """The matcher of a template (an entry's, or a curated printed form), None for one
    without literal text."""
    parts = shown_parts(template.parts)
    segments: list[str] = []
    anchors: list[str] = []
    leading = 0
    for number, part in enumerate(parts):
        if isinstance(part, Placeholder):
            continue
        squashed = squash(part)
        if squashed:
            segments.append(squashed)
        anchors.extend(_safe_tokens(part, first=number == 0, last=number == len(parts) - 1))
        if number == 0:
            leading = len(anchors)
    if not segments:
        return None
    starts = isinstance(parts[0], str) and bool(squash(parts[0]))
    ends = isinstance(parts[-1], str) and bool(squash(parts[-1]))
    # A paste cut short still shows the message's first words: a template that starts with
    # text is found by those.
    first = anchors[: min(leading, FIRST_ANCHORS)] if starts else []
    return _Matcher(tuple(segments), starts, ends, tuple(dict.fromkeys(first or anchors)))


def shown_parts(parts: tuple) -> list:
    """A template's parts as a paste shows them: a self-documenting `{expr=}` prints its
    expression's text, `expr=`, before the value."""
    shown: list = []
    for part in parts:
        if isinstance(part, Placeholder) and part.equal:
            text = part.expr + "="
            if shown and isinstance(shown[-1], str):
                shown[-1] += text
            else:
                shown.append(text)
            shown.append(Placeholder(part.expr))
        else:
            shown.append(part)
    return shown


def _safe_tokens(literal: str, first: bool, last: bool) -> list[str]:
    """Words of a literal part that a pasted message shows as whole words whatever the values:
    those not touching a neighbouring placeholder (whose value could be glued on)."""
    lowered = literal.lower()
    safe = []
    for found in _TOKEN.finditer(lowered):
        if found.start() == 0 and not first:
            continue
        if found.end() == len(lowered) and not last:
            continue
        word = found.group()
        if len(word) > 1 and not word.isdigit():
            safe.append(word)
    return safe


def document_tokens(entry: ErrorEntry, forms: Iterable[tuple[str, str]] = ()) -> tuple[list[str], list[str]]:
    """The words an entry is found by: its literal message text, exception, the functions and
    files it is raised in, and for asserts the condition checked; and apart, the words of its
    other forms (`Known.forms`: printed forms, earlier wordings) that those lack, once each.
    A paste of a long message's last lines alone (the suggestions under "Capture cuda graph
    failed", as 0.4.6 worded them) matches no template, but shares its words with the form it
    came from. `IndexState._put` weighs a form's word as `FORM_WORD` of a word of the error's
    own, and normalises by the length of its own words alone, so forms add words without
    diluting the rest (as a field of its own would in BM25F)."""
    text = [entry.exception or ""]
    if entry.template is not None:
        text.extend(part for part in shown_parts(entry.template.parts) if isinstance(part, str))
    for site in _distinct_places(entry.sites):
        text.append(site.function)
        text.append(site.path.rsplit("/", 1)[-1].removesuffix(".py"))
        if site.assert_condition:
            text.append(site.assert_condition)
    words = tokens(" ".join(text))
    seen, extra = set(words), []
    for form, _ in forms:
        literal = " ".join(part for part in shown_parts(printed_template(form).parts) if isinstance(part, str))
        for word in tokens(literal):
            if word not in seen:
                seen.add(word)
                extra.append(word)
    return words, extra


def _distinct_places(sites: tuple[Site, ...]) -> list[Site]:
    seen, places = set(), []
    for site in sites:
        if (site.function, site.path, site.assert_condition) not in seen:
            seen.add((site.function, site.path, site.assert_condition))
            places.append(site)
    return places


def location_of(entry: ErrorEntry) -> str:
    """The entry's first location in short: `model_runner.py in ModelRunner.load`, and how
    many other places raise it."""
    site = entry.sites[0]
    text = site.path.rsplit("/", 1)[-1] + (f" in {site.function}" if site.function else "")
    others = len({(s.path, s.function) for s in entry.sites}) - 1
    return text + (f" and {others} more" if others else "")


def site_signature(site: Site) -> str:
    """The squashed start of the statement a traceback prints for the site: `assert<condition>`,
    `raise<Exception>` or `warnings.warn`."""
    if site.kind == "assert":
        return "assert" + squash(site.assert_condition or "")
    if site.kind == "warning":
        return "warnings.warn"
    return "raise" + (site.exception or "")


@dataclass(frozen=True, slots=True)
class Known:
    """What an index knows of errors beyond their sites, each by id: the curated `printed`
    forms (`content.printed_forms`); the earlier `wordings`, each with what a lookup says of it
    (`history.search_facts`); what a lookup says of an error no longer raised (`retired`,
    `history.search_facts`); and the `places` earlier releases raised an error in before it
    moved (path, function, line: `history.EarlierPlaces`), which an old traceback's raising
    frame points at."""

    printed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    wordings: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    retired: Mapping[str, str] = field(default_factory=dict)
    places: Mapping[str, tuple[tuple[str, str, int, str], ...]] = field(default_factory=dict)

    @classmethod
    def of_ledger(
        cls, printed: Mapping[str, tuple[str, ...]], facts: Mapping[str, SearchFacts], versions: Mapping[str, Versions]
    ) -> tuple[tuple[ErrorEntry, ...], Known]:
        """The errors no longer raised, as entries, and what an index knows beyond the sites:
        the curated `printed` forms, the ledger's `facts` (`history.search_facts`) and the
        earlier places its `versions` say (`history.EarlierPlaces`)."""
        retired = tuple(facts[error].retired for error in sorted(facts) if facts[error].retired is not None)
        wordings = {error: found.wordings for error, found in facts.items() if found.wordings}
        notes = {error: found.note for error, found in facts.items() if found.retired is not None}
        return retired, cls(printed, wordings, notes, EarlierPlaces(versions))

    def forms(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """By id, each form searched beside the message, with its note: the printed forms
        (the note names the form, since a result's title is the error's message, or for one
        raised without text the statement that raises it), then the earlier wordings."""
        return {
            error: (*((text, f"matched as it is printed: {text}") for text in self.printed.get(error, ())), *self.wordings.get(error, ()))
            for error in sorted(self.printed.keys() | self.wordings.keys())
        }


def search_files(entries: Iterable[ErrorEntry], repo: str, classes: Iterable[tuple[str, tuple[str, ...]]] = (), known: Known | None = None) -> dict[str, bytes]:
    """The search index as files relative to the site root (`search/...json`), compact UTF-8
    JSON with sorted keys, so two builds give identical bytes. `classes` are upstream's
    exception classes with their ancestors (`model.Extraction.classes`); `known` what the index
    knows of the errors beyond their sites (`Known`)."""
    return IndexState(repo).update(tuple(entries), None, classes, known)


def classes_file(classes: Iterable[tuple[str, tuple[str, ...]]]) -> bytes:
    """`search/classes.json`: by class name, its ancestors, for Python's exceptions and those
    upstream defines (`defined`, which a class of Python's of the same name gives way to)."""
    from generator.raisers import builtin_exceptions

    ancestors = {name: list(found) for name, found in builtin_exceptions().items()}
    defined = []
    for name, found in classes:
        ancestors[name] = list(found)
        defined.append(name)
    return encode({"ancestors": ancestors, "defined": sorted(defined)})


def same_class(named: str, raised: str, classes: Mapping[str, Any]) -> bool:
    """Whether an error raised as `raised` fits a paste naming `named`: the same class, a
    subclass of it, or (`named` being upstream's) one of its bases but the catch-alls."""
    raised = raised.rsplit(".", 1)[-1]
    if named == raised:
        return True
    ancestors = classes.get("ancestors", {})
    if named in ancestors.get(raised, ()):
        return True
    return raised not in _CATCH_ALL and named in classes.get("defined", ()) and raised in ancestors.get(named, ())


_CATCH_ALL = ("Exception", "BaseException")


def encode(data: Any) -> bytes:
    return (_json(data) + "\n").encode()


# One encoder for every row, since `json.dumps` with options makes a new one each call; and
# strings quoted as it quotes them, in C.
_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
_quote = json.encoder.encode_basestring


class IndexState(BlobState):
    """The search index with what it was made from, kept between builds so that the next
    revision's index is made by taking out and putting in only the errors whose files changed
    (`update` with the blob shas): the same files as made from scratch, for the work of a few
    errors instead of 27,000, and only the shards those errors fall in are encoded again.

    Everything an error adds is stored by its id: its postings (scored against a fixed
    document length, `PIVOT`, so that no error changes the others' scores), its template row
    in the shard of its rarest anchor (an error whose anchors' counts moved may change shard),
    its sites' rows and its title. Postings over the stop share are kept and left out of the files only, so a change of
    the error count re-encodes the shards of the words it moves across the line.

    Rows are kept as the JSON text they are written as, and an error's words, anchors and
    paths as one string each: the state is read and written on every build, and a string
    costs pickle a fraction of a list of strings."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.blobs: dict[str, str] | None = None
        # id -> (its words, its anchors or None without a template); words are letters and
        # digits, so they are joined by spaces. And id -> its paths, joined by NUL.
        self.docs: dict[str, tuple[str, str | None]] = {}
        self.paths: dict[str, str] = {}
        # id -> the names of the functions its sites are in, joined by NUL.
        self.names: dict[str, str] = {}
        self.stop = 0
        # Each word's postings as the text of its flat list (`"id",score,...`, by id), and
        # how many errors it is in; those an update changes are opened into `_opened` for it.
        self.postings: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._opened: dict[str, dict[str, int]] = {}
        self.words: list[set[str]] = [set() for _ in range(TOKEN_BUCKETS)]
        self.anchor_counts: dict[str, int] = {}
        self.anchor_users: dict[str, set[str]] = {}
        self.where: dict[str, int] = {}
        # By shard and id: a template row; the rows of an error's sites in a file, by path;
        # `"id":row` for titles.
        self.templates: list[dict[str, str]] = [{} for _ in range(TOKEN_BUCKETS + 1)]
        self.sites: list[dict[str, dict[str, str]]] = [{} for _ in range(FILE_BUCKETS)]
        self.functions: list[dict[str, dict[str, str]]] = [{} for _ in range(FUNCTION_BUCKETS)]
        self.titles: list[dict[str, str]] = [{} for _ in range(ENTRY_BUCKETS)]
        # Each file's digest (`publish.file_digest`) as last encoded, by path: not its bytes,
        # which the output folder holds (`update`'s `holds`).
        self.digests: dict[str, str] = {}
        # id -> its curated printed forms and earlier wordings (each with its note after a
        # SOH), joined by NUL, and the (key, shard) of each one's template row, keyed `id NUL n`
        # beside the id's own row.
        self.printed: dict[str, str] = {}
        self.extra: dict[str, tuple[tuple[str, int], ...]] = {}
        # id -> what a lookup says of an error no longer raised (`history.search_facts`).
        self.retired: dict[str, str] = {}
        # id -> the places earlier releases raised it in, as indexed (path, function, line).
        self.places: dict[str, str] = {}
        # What the ledger says of each id, as this index last took it in (`update_ledger`).
        self.ledger = LedgerFacts()

    def update(
        self,
        entries: tuple[ErrorEntry, ...],
        blobs: Mapping[str, str] | None,
        classes: Iterable[tuple[str, tuple[str, ...]]] = (),
        known: Known | None = None,
        learned: set[str] | None = None,
        holds: Callable[[str, str | None], bool] | None = None,
    ) -> dict[str, bytes | None]:
        """The index of `entries`, every file by path; `blobs` (path -> blob sha) are those
        the entries were extracted from. With the blobs of the last update, only the errors
        with a site in a file whose blob changed, or of which `known` says something else,
        are taken out and put in again, since an error is made from its sites and those alone;
        without (None), everything is made again. `learned`, when given, holds every id whose
        ledger facts in `known` may differ from the last update's (`update_ledger`): those are
        put in again, and only the curated forms compared. `classes` (upstream's exception classes)
        make `classes.json`, written whole.

        A file this update need not encode again (no error in it changed) comes as None when
        the output folder `holds` it with the bytes it had (by path and digest: `pages.site_holds`);
        without `holds`, every file is encoded."""
        self._classes = classes_file(classes)
        # What this update knows beyond the sites, and the forms it searches, until it ends:
        # not part of the state kept.
        self._known = known or Known()
        self._printed = self._known.forms()
        self._holds = holds
        if learned is None:
            # Facts taken in without `update_ledger`: what it kept says nothing of them.
            self.ledger = LedgerFacts()
        try:
            return self._update(entries, blobs, learned)
        finally:
            del self._known, self._printed, self._holds, self._classes

    def update_ledger(
        self,
        entries: tuple[ErrorEntry, ...],
        blobs: Mapping[str, str],
        classes: Iterable[tuple[str, tuple[str, ...]]],
        printed: Mapping[str, tuple[str, ...]],
        records: Mapping[str, LedgerRecord],
        versions: Mapping[str, Versions],
        texts: Mapping[str, str],
        holds: Callable[[str, str | None], bool] | None = None,
    ) -> dict[str, bytes | None]:
        """`update` with the errors no longer raised and what the ledger's `records` say of
        the others (`Known.of_ledger`), their `versions` digesting as `texts`
        (`history.version_texts`): the facts of the ids whose digests are those of the last
        update are kept (`history.LedgerFacts`), not worked out again."""
        learned = self.ledger.update(records, versions, texts)
        retired, known = Known.of_ledger(printed, self.ledger.facts, versions)
        return self.update(entries + retired, blobs, classes, known, learned, holds)

    def _update(self, entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str] | None, learned: set[str] | None) -> dict[str, bytes | None]:
        changed = self.since(entries, blobs)
        if changed is None:
            return self._remake(entries)
        # What the index knows beyond the sites: the ledger's facts of the ids `learned` (an
        # entry no longer raised among them), else compared for every id; the curated forms.
        if learned is None:
            changed |= {
                entry.id
                for entry in entries
                if self.retired.get(entry.id, "") != self._known.retired.get(entry.id, "")
                or self.places.get(entry.id, "") != _places_key(self._known.places.get(entry.id, ()))
            }
        changed |= learned or set()
        changed |= {error for error in self.printed.keys() | self._printed.keys() if self.printed.get(error, "") != _forms_key(self._printed.get(error, ()))}
        put = [entry for entry in entries if entry.id in changed]
        taken = [error for error in changed if error in self.docs]
        documents = {entry.id: document_tokens(entry, self._printed.get(entry.id, ())) for entry in put}
        count = len(entries)
        touched = _Touched()
        for error in taken:
            self._take(error, touched)
        self._put(put, documents, touched)
        self._close()
        self._restop(_stop(count), touched)
        return self._encode(count, touched)

    def _remake(self, entries: tuple[ErrorEntry, ...]) -> dict[str, bytes | None]:
        blobs, ledger = self.blobs, self.ledger
        self.__init__(self.repo)
        self.blobs, self.ledger = blobs, ledger
        ordered = sorted(entries, key=lambda e: e.id)
        documents = {entry.id: document_tokens(entry, self._printed.get(entry.id, ())) for entry in ordered}
        self.stop = _stop(len(ordered))
        touched = _Touched()
        self._put(ordered, documents, touched)
        self._close()
        return self._encode(len(ordered), touched)

    def _take(self, error: str, touched: _Touched) -> None:
        words, anchors = self.docs.pop(error)
        for word in words.split():
            del self._open(word)[error]
            touched.words.add(word)
        if anchors is not None:
            for word in anchors.split():
                self.anchor_counts[word] -= 1
                self.anchor_users[word].discard(error)
                touched.anchors.add(word)
                if not self.anchor_counts[word]:
                    del self.anchor_counts[word], self.anchor_users[word]
            where = self.where.pop(error)
            del self.templates[where][error]
            touched.tokens.add(where)
        for path in self.paths.pop(error).split("\0"):
            number = bucket(path_key(path), FILE_BUCKETS)
            rows = self.sites[number][path]
            del rows[error]
            if not rows:
                del self.sites[number][path]
            touched.files.add(number)
        for name in self.names.pop(error).split("\0"):
            number = bucket(name, FUNCTION_BUCKETS)
            rows = self.functions[number][name]
            del rows[error]
            if not rows:
                del self.functions[number][name]
            touched.functions.add(number)
        number = bucket(error, ENTRY_BUCKETS)
        del self.titles[number][error]
        touched.titles.add(number)
        self.printed.pop(error, None)
        self.retired.pop(error, None)
        self.places.pop(error, None)
        for key, where in self.extra.pop(error, ()):
            del self.templates[where][key]
            touched.tokens.add(where)

    def _put(self, entries: list[ErrorEntry], documents: Mapping[str, tuple[list[str], list[str]]], touched: _Touched) -> None:
        """Put `entries` in, their own words and their forms' given by id (`document_tokens`)."""
        rows: dict[str, str] = {}
        for entry in entries:
            words, extra = documents[entry.id]
            frequency: dict[str, float] = {}
            for word in words:
                frequency[word] = frequency.get(word, 0) + 1
            frequency.update(dict.fromkeys(extra, FORM_WORD))
            norm = K1 * (1 - B + B * len(words) / PIVOT)
            for word, tf in frequency.items():
                self._open(word)[entry.id] = round(100 * tf * (K1 + 1) / (tf + norm))
            touched.words.update(frequency)
            matcher = matcher_of(entry) or statement_matcher(entry)
            anchors = None
            if matcher is not None:
                anchors = matcher.anchors
                for word in anchors:
                    self.anchor_counts[word] = self.anchor_counts.get(word, 0) + 1
                    self.anchor_users.setdefault(word, set()).add(entry.id)
                touched.anchors.update(anchors)
                rows[entry.id] = _template_row(entry, matcher, retired=entry.id in self._known.retired)
            # Rows written as `encode` writes them, from quoted strings: a site is two rows.
            by_path: dict[str, list[str]] = {}
            by_name: dict[str, list[str]] = {}
            quoted = _quote(entry.id)
            places = []
            for site in entry.sites:
                signature = site_signature(site)
                places.append((site.path, site.function.rsplit(".", 1)[-1], site.line, site.end_line, signature, ""))
                if site.raised_in is not None:
                    # A call to a raiser: a traceback's last frame is the raiser's raise.
                    path, qualname, line, end_line = site.raised_in
                    places.append((path, qualname.rsplit(".", 1)[-1], line, end_line, signature, ""))
            # Where earlier releases raised it, before it moved: an old traceback points there,
            # and the releases that raised it at that line are what its line says.
            earlier = self._known.places.get(entry.id, ())
            for path, qualname, line, releases in earlier:
                places.append((path, qualname.rsplit(".", 1)[-1], line, line, site_signature(entry.sites[0]), releases))
            if earlier:
                self.places[entry.id] = _places_key(earlier)
            # An error no longer raised says so in its rows too (a last 1): a traceback pointing
            # at it and at what it became ranks the one raised now first, as a message does.
            gone = entry.id in self._known.retired
            for path, function, line, end_line, signature, releases in places:
                tail = f",{_quote(releases)},1]" if gone else f",{_quote(releases)}]" if releases else "]"
                row = f"[{quoted},{_quote(function)},{line},{end_line},{_quote(signature)}" + tail
                found = by_path.setdefault(path, [])
                if row not in found:
                    found.append(row)
                row = f"[{quoted},{_quote(path)},{_quote(signature)}" + (",1]" if gone else "]")
                named = by_name.setdefault(statement_key(function or "<module>", signature), [])
                if row not in named:
                    named.append(row)
            for path, found in by_path.items():
                number = bucket(path_key(path), FILE_BUCKETS)
                self.sites[number].setdefault(path, {})[entry.id] = ",".join(found)
                touched.files.add(number)
            for name, found in by_name.items():
                number = bucket(name, FUNCTION_BUCKETS)
                self.functions[number].setdefault(name, {})[entry.id] = ",".join(found)
                touched.functions.add(number)
            self.names[entry.id] = "\0".join(by_name)
            number = bucket(entry.id, ENTRY_BUCKETS)
            title = [entry.exception, entry.kind, entry.title, int(entry.message is not None), location_of(entry)]
            note = self._known.retired.get(entry.id)
            if note:
                self.retired[entry.id] = note
                title.append(note)
            self.titles[number][entry.id] = f"{_quote(entry.id)}:{_json(title)}"
            touched.titles.add(number)
            self.docs[entry.id] = (" ".join(frequency), None if anchors is None else " ".join(anchors))
            self.paths[entry.id] = "\0".join(by_path)
            self._put_printed(entry, touched)
        # The rarest anchor decides a template's shard, so shards stay even and few templates
        # load: placed once every count is known, and moved if an anchor's count changed it.
        choose = set(rows)
        for word in touched.anchors:
            choose.update(self.anchor_users.get(word, ()))
        for error in sorted(choose):
            anchors = self.docs[error][1].split()
            anchor = min(anchors, key=lambda w: (self.anchor_counts[w], anchors.index(w)), default=None)
            where = TOKEN_BUCKETS if anchor is None else bucket(anchor, TOKEN_BUCKETS)
            before = self.where.get(error)
            if error in rows:
                self.templates[where][error] = rows[error]
            elif before != where:
                self.templates[where][error] = self.templates[before].pop(error)
                touched.tokens.add(before)
            else:
                continue
            self.where[error] = where
            touched.tokens.add(where)

    def _put_printed(self, entry: ErrorEntry, touched: _Touched) -> None:
        """The rows of an entry's printed forms, each in the shard of its first anchor: a form's
        words decide nothing else, so its place never moves."""
        forms = self._printed.get(entry.id, ())
        if not forms:
            return
        self.printed[entry.id] = _forms_key(forms)
        extra = []
        for number, (text, note) in enumerate(forms):
            matcher = template_matcher(printed_template(text))
            if matcher is None:
                continue
            key = f"{entry.id}\0{number}"
            where = bucket(matcher.anchors[0], TOKEN_BUCKETS) if matcher.anchors else TOKEN_BUCKETS
            self.templates[where][key] = _template_row(entry, matcher, note)
            extra.append((key, where))
            touched.tokens.add(where)
        self.extra[entry.id] = tuple(extra)

    def _open(self, word: str) -> dict[str, int]:
        found = self._opened.get(word)
        if found is None:
            text = self.postings.get(word)
            flat = json.loads(f"[{text}]") if text else []
            found = self._opened[word] = dict(zip(flat[::2], flat[1::2]))
        return found

    def _close(self) -> None:
        """The opened postings back to text; words in no error left out."""
        for word, found in self._opened.items():
            if found:
                self.postings[word] = ",".join(f"{_quote(error)},{found[error]}" for error in sorted(found))
                self.counts[word] = len(found)
                self.words[bucket(word, TOKEN_BUCKETS)].add(word)
            elif word in self.postings:
                del self.postings[word], self.counts[word]
                self.words[bucket(word, TOKEN_BUCKETS)].discard(word)
        self._opened = {}

    def _restop(self, stop: int, touched: _Touched) -> None:
        """Words in more than `stop` errors are left out of the shards: a new line moves some."""
        if stop != self.stop:
            low, high = sorted((stop, self.stop))
            touched.words.update(word for word, count in self.counts.items() if low < count <= high)
            self.stop = stop

    def _encode(self, count: int, touched: _Touched) -> dict[str, bytes | None]:
        touched.tokens.update(bucket(word, TOKEN_BUCKETS) for word in touched.words)
        files: dict[str, bytes | None] = {}
        # The shards no error of this update is in, the output folder holding them as last
        # encoded: not encoded again. Any other is, and every one without `holds`.
        for kind, numbers, count_of in (("t", touched.tokens, TOKEN_BUCKETS + 1), ("f", touched.files, FILE_BUCKETS), ("g", touched.functions, FUNCTION_BUCKETS), ("e", touched.titles, ENTRY_BUCKETS)):
            for number in range(count_of):
                if number in numbers:
                    continue
                path = _shard_path(kind, number)
                if self._holds is not None and self._holds(path, self.digests.get(path)):
                    files[path] = None
                else:
                    numbers.add(number)
        for number in touched.tokens:
            words = sorted(self.words[number]) if number < TOKEN_BUCKETS else ()
            postings = ",".join(f"{_quote(word)}:[{self.postings[word]}]" for word in words if self.counts[word] <= self.stop)
            rows = self.templates[number]
            # What `encode` makes of {"postings": ..., "templates": [...]}, from text kept.
            files[_shard_path("t", number)] = f'{{"postings":{{{postings}}},"templates":[{",".join(rows[e] for e in sorted(rows))}]}}\n'.encode()
        for number in touched.files:
            shard = self.sites[number]
            paths = (f"{_quote(path)}:[{','.join(rows[e] for e in sorted(rows))}]" for path, rows in sorted(shard.items()))
            files[_shard_path("f", number)] = f"{{{','.join(paths)}}}\n".encode()
        for number in touched.functions:
            shard = self.functions[number]
            names = (f"{_quote(name)}:[{','.join(rows[e] for e in sorted(rows))}]" for name, rows in sorted(shard.items()))
            files[_shard_path("g", number)] = f"{{{','.join(names)}}}\n".encode()
        for number in touched.titles:
            titles = self.titles[number]
            files[_shard_path("e", number)] = f"{{{','.join(titles[e] for e in sorted(titles))}}}\n".encode()
        files[f"{INDEX_DIR}/classes.json"] = self._classes
        files[f"{INDEX_DIR}/manifest.json"] = encode(
            {
                "version": INDEX_VERSION,
                "repo": self.repo,
                "entries": count,
                "token_buckets": TOKEN_BUCKETS,
                "file_buckets": FILE_BUCKETS,
                "function_buckets": FUNCTION_BUCKETS,
                "partial": PARTIAL,
                "short_start": SHORT_START,
                "entry_buckets": ENTRY_BUCKETS,
                "k1": K1,
                "b": B,
                "word_candidates": WORD_CANDIDATES,
                "min_score": MIN_SCORE,
                "named_exception": NAMED_EXCEPTION,
                "confident_share": CONFIDENT_SHARE,
                "confident_literal": CONFIDENT_LITERAL,
                "confident_start": CONFIDENT_START,
            }
        )
        self.digests.update((path, file_digest(data)) for path, data in files.items() if data is not None)
        return files


def _shard_path(kind: str, number: int) -> str:
    """A shard's file: `t/<n>.json` (`t/none.json` for the templates without an anchor),
    `f/`, `g/` or `e/` and its number."""
    return f"{INDEX_DIR}/{kind}/{'none' if kind == 't' and number == TOKEN_BUCKETS else number}.json"


def _forms_key(forms: Iterable[tuple[str, str]]) -> str:
    return "\0".join(f"{text}\1{note}" for text, note in forms)


def _places_key(places: Iterable[tuple[str, str, int, str]]) -> str:
    return "\0".join(f"{path}\1{function}\1{line}\1{releases}" for path, function, line, releases in places)


class _Touched:
    """What an update changed: words whose postings changed, anchors whose counts changed, and
    the token, file, function and entry shards to encode again."""

    def __init__(self) -> None:
        self.words: set[str] = set()
        self.anchors: set[str] = set()
        self.tokens: set[int] = set()
        self.files: set[int] = set()
        self.functions: set[int] = set()
        self.titles: set[int] = set()


def _stop(count: int) -> int:
    """The most errors a word may be in and still be written to its shard."""
    return max(50, int(STOP_SHARE * count))


# ---------------------------------------------------------------------------------------------
# Reading the index.


class SearchIndex:
    """The search files, read one piece at a time as a lookup needs them, and kept once read.

    `read(path)` returns a file's parsed JSON (path relative to the site root) or raises
    `KeyError` / `OSError` when it is missing.
    """

    def __init__(self, read: Callable[[str], Any], origin: str = "") -> None:
        self._read = read
        self._pieces: dict[str, Any] = {}
        self.manifest = self.piece("manifest.json")
        if not isinstance(self.manifest, dict) or self.manifest.get("version") != INDEX_VERSION:
            raise ErrorkbError(f"{origin}{INDEX_DIR}/manifest.json: not a version {INDEX_VERSION} search index; rebuild the site")

    def piece(self, name: str) -> Any:
        if name not in self._pieces:
            self._pieces[name] = self._read(f"{INDEX_DIR}/{name}")
        return self._pieces[name]

    @property
    def loaded(self) -> tuple[str, ...]:
        """The pieces read so far, for measuring what a lookup costs."""
        return tuple(sorted(self._pieces))

    @classmethod
    def of_entries(
        cls, entries: Iterable[ErrorEntry], repo: str, classes: Iterable[tuple[str, tuple[str, ...]]] = (), known: Known | None = None
    ) -> SearchIndex:
        """An index built in memory from entries (a lookup straight from a source), with
        upstream's exception `classes` and what is `known` of them beyond their sites."""
        files = search_files(entries, repo, classes, known)
        return cls(lambda path: json.loads(files[path]))

    @classmethod
    def of_site(cls, root: Path) -> SearchIndex:
        """The index of a built site in folder `root`."""

        def read(path: str) -> Any:
            try:
                return json.loads((root / path).read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ErrorkbError(f"{root / path}: missing; is {root} a site built by errorkb build?") from None
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ErrorkbError(f"{root / path}: unreadable search index ({error})") from None

        return cls(read, f"{root}/")


# ---------------------------------------------------------------------------------------------
# Matching.


def template_matches(message: str, segments: list[str], starts: bool, ends: bool) -> bool:
    """Whether a squashed message is the template with some values filled in: segments in
    order, the first at the very start if the template starts with text, the last at the very
    end if it ends with text, anything (or nothing) where the placeholders are."""
    count = len(segments)
    if starts and ends and count == 1:
        return message == segments[0]
    position, end, first, stop = 0, len(message), 0, count
    if starts:
        if not message.startswith(segments[0]):
            return False
        position, first = len(segments[0]), 1
    if ends:
        last = segments[-1]
        if not message.endswith(last) or len(message) - len(last) < position:
            return False
        end, stop = len(message) - len(last), count - 1
    for segment in segments[first:stop]:
        found = message.find(segment, position, end)
        if found < 0:
            return False
        position = found + len(segment)
    return True


# What a site's earlier place at the traceback's line adds to its frame score: less than any
# other evidence, so it only orders sites the rest cannot tell apart.
AT_LINE = 0.05


def frame_score(frame: Frame, function: str, line: int, end_line: int, signature: str) -> float:
    """How surely a traceback frame is a site in the same file: same function 0.2, the printed
    source line is the site's statement 0.8, the line inside the site's lines 0.8 (same
    release), plus 0.1 for the file. A printed `raise` or `assert` that is not the site's
    statement says the line held another check in the traceback's release: its line is then
    no evidence (a traceback from 0.4 at line 177 of a file whose line 177 now raises another
    error)."""
    score = 0.1
    if function == frame.function or (function == "" and frame.function == "<module>"):
        score += 0.2
    source = squash(frame.source)
    if source and signature and _statement_matches(source, signature):
        score += 0.8
    elif source and signature and _RAISING.match(frame.source):
        return score
    if line <= frame.line <= end_line:
        score += 0.8
    return score


def moved_frame_score(frame: Frame, path: str, signature: str) -> float:
    """How surely a traceback frame is a site of the same function in another file (the file
    moved or was renamed since the paste's release): the function 0.2, the printed source line
    is the site's statement 0.8, plus 0.1 when one file name ends with the other."""
    score = 0.2
    source = squash(frame.source)
    if source and signature and _statement_matches(source, signature):
        score += 0.8
    mine = frame.path.replace("\\", "/").rsplit("/", 1)[-1]
    theirs = path.rsplit("/", 1)[-1]
    if mine.endswith(theirs) or theirs.endswith(mine):
        score += 0.1
    return score


def _statement_matches(source: str, signature: str) -> bool:
    """A printed source line starts the site's statement: equal, the signature followed by
    what ends a condition or an exception name, or (a statement over several lines, or a
    paste cut short) a prefix of it that goes past the keyword."""
    if source == signature:
        return True
    if source.startswith(signature):
        following = source[len(signature)]
        if signature.startswith("assert"):
            return following == ","
        return not _WORD_CHAR.match(following)
    keyword = 6 if signature.startswith("assert") else 5
    return signature.startswith(source) and len(source) >= keyword + 4


def statement_key(function: str, statement: str) -> str:
    """What a function shard files a site under, and a frame is looked up by: the function's
    name and the squashed statement's leading run of name characters (`raiseValueError`,
    `assertx.y`, `warnings.warn`), which a printed source line and the site's signature share."""
    return function + " " + _LEADING_NAME.match(statement).group()


def signature_exception(signature: str) -> str | None:
    """The exception a site with this signature raises, where the signature says."""
    if signature.startswith("assert"):
        return "AssertionError"
    if signature.startswith("raise") and len(signature) > 5:
        return signature[5:]
    return None


def lookup(text: str, index: SearchIndex, limit: int = 10) -> list[Candidate]:
    """The errors a pasted message or traceback most likely is, best first (at most `limit`,
    none when nothing scores above noise)."""
    return lookup_paste(parse_paste(text[-MAX_PASTE:]), index, limit)


def lookup_paste(paste: Paste, index: SearchIndex, limit: int = 10) -> list[Candidate]:
    """`lookup` on a paste already read: evidence from templates, the frame and words, summed.

    Then ranked in tiers: first an error the traceback shows raised (its raising frame is the
    site's function and statement), then those explained by their message or frame and raised
    as an exception the paste names (or names none), those raised now before those no longer
    raised, then the rest, each tier by score.
    """
    manifest = index.manifest
    words = query_tokens(paste)
    forms = forms_of(paste)
    named = exceptions_of(paste)
    classes = index.piece("classes.json") if named else {}
    evidence: dict[str, list[float]] = {}  # error id: [template, frame, word]
    matched_how: dict[str, str] = {}  # error id: "message" or "beginning"
    notes: dict[str, str] = {}  # error id: the note of the form its template match is on
    retired: set[str] = set()  # errors no longer raised, among those a template or the frame matched
    class_fits: dict[str, bool] = {}  # error id: its exception is the one the paste names

    for name in dict.fromkeys([*(str(bucket(w, manifest["token_buckets"])) for w in shard_tokens(paste, words)), "none"]):
        for row in index.piece(f"t/{name}.json")["templates"]:
            error_id, exception, _title, segments, starts, ends = row[:6]
            value, how, form_exception = template_score(forms, segments, bool(starts), bool(ends), exception, manifest, classes)
            if value > 0:
                slot = evidence.setdefault(error_id, [0.0, 0.0, 0.0])
                if value > slot[0]:
                    slot[0] = value
                    matched_how[error_id] = how
                    notes[error_id] = row[6] if len(row) > 6 else ""
                    class_fits[error_id] = form_exception is None or exception is None or same_class(form_exception, exception, classes)
                if len(row) > 7 and row[7]:
                    retired.add(error_id)

    # Words: BM25, normalised by the weight of the query's known words so 1.0 is "all of them".
    totals: dict[str, float] = {}
    matched: dict[str, int] = {}
    known_weight = 0.0
    count = manifest["entries"]
    for word in words:
        flat = index.piece(f"t/{bucket(word, manifest['token_buckets'])}.json")["postings"].get(word)
        if not flat:
            continue
        frequency = len(flat) // 2
        idf = math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
        known_weight += idf
        for position in range(0, len(flat), 2):
            error_id = flat[position]
            totals[error_id] = totals.get(error_id, 0.0) + idf * flat[position + 1] / 100
            matched[error_id] = matched.get(error_id, 0) + 1
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    for error_id, _total in ranked[: manifest["word_candidates"]]:
        # One shared word is chance, not evidence.
        if matched[error_id] >= 2:
            evidence.setdefault(error_id, [0.0, 0.0, 0.0])

    # The traceback's frame: sites in the same file, by function, statement and line; then
    # sites of a function of that name in other files, by statement.
    frame = paste.frame
    raised: set[str] = set()
    at_line: dict[str, str] = {}  # error id: the releases that raised it at the frame's line, when earlier ones
    # Raised in a function of the frame's name in another file: taken as raised only when no
    # template explains the message surely (a `load_model` elsewhere raising a ValueError is no
    # evidence against the exact message of another error).
    elsewhere: set[str] = set()
    if frame is not None:

        def found(error_id: str, value: float, signature: str, moved: bool = False) -> None:
            if value >= 0.9 or error_id in evidence:
                slot = evidence.setdefault(error_id, [0.0, 0.0, 0.0])
                slot[1] = max(slot[1], value)
            if value >= 1.0:
                exception = signature_exception(signature)
                if not named or exception is None or any(same_class(name, exception, classes) for name in named):
                    (elsewhere if moved else raised).add(error_id)

        shard = index.piece(f"f/{bucket(path_key(frame.path), manifest['file_buckets'])}.json")
        for site_path in sorted(shard):
            if path_matches(frame.path, site_path):
                for error_id, function, line, end_line, signature, *rest in shard[site_path]:
                    # A place of an earlier release counts by its function and statement: its
                    # line, in a file whose lines every release moves, only says which
                    # releases the traceback may come from.
                    releases = rest[0] if rest else ""
                    if len(rest) > 1:
                        retired.add(error_id)
                    value = frame_score(frame, function, 0, -1, signature) if releases else frame_score(frame, function, line, end_line, signature)
                    if releases and line == frame.line and value >= 1.0:
                        at_line[error_id] = releases
                        # Of sites alike (the `raise NotImplementedError`s of one function), the
                        # one an earlier release raised at the traceback's line goes first.
                        value += AT_LINE
                    found(error_id, value, signature)
        if frame.function and frame.source:
            key = statement_key(frame.function, squash(frame.source))
            rows = index.piece(f"g/{bucket(key, manifest['function_buckets'])}.json").get(key, [])
            for error_id, site_path, signature, *gone in rows:
                if gone:
                    retired.add(error_id)
                if not path_matches(frame.path, site_path):
                    found(error_id, moved_frame_score(frame, site_path, signature), signature, moved=True)
    sure = any(slot[0] >= 1.0 and class_fits.get(error_id, False) for error_id, slot in evidence.items())
    # The same statement in a function of that name in several other places (`__init__`,
    # `forward`) is no sign of which one the traceback went through.
    active = [error_id for error_id in elsewhere if error_id not in retired]
    if len(active or elsewhere) == 1:
        raised.update(error_id for error_id in elsewhere if not sure or evidence[error_id][0] >= 1.0)

    scored = []
    for error_id, (template, frame_value, _) in evidence.items():
        word = min(1.0, totals.get(error_id, 0.0) / known_weight) if known_weight else 0.0
        score = round(template + frame_value + word, 6)
        if score >= manifest["min_score"]:
            fits = (template >= 1.0 and class_fits[error_id]) or error_id in raised
            scored.append((error_id in raised, fits, template, error_id, score))
    # An error raised now that explains the message as well as one no longer raised comes
    # before it: a user of an old release who pastes a message both explain is best served by
    # the page of what it is now; the retired one follows, saying since when it is gone. One
    # that explains it better (its exact wording against another's beginning) keeps its rank.
    best: dict[bool, float] = {}
    for was_raised, fits, template, error_id, _score in scored:
        if fits and error_id not in retired:
            best[was_raised] = max(best.get(was_raised, template), template)
    results = sorted(
        (not was_raised, not fits, fits and error_id in retired and template <= best.get(was_raised, -1.0), -score, error_id, score)
        for was_raised, fits, template, error_id, score in scored
    )
    candidates = []
    for _raised, _fits, _retired, _negative, error_id, score in results[:limit]:
        shard = index.piece(f"e/{bucket(error_id, manifest['entry_buckets'])}.json")
        exception, kind, title, has_message, place, *status = shard[error_id]
        # A bare assert found by the statement its frame printed: where it was raised says more.
        printed = frame is not None and paste.message == frame.source and error_id in raised
        how = "traceback" if printed else matched_how.get(error_id) or ("traceback" if evidence[error_id][1] >= 0.9 else "words")
        note = notes.get(error_id, "") if error_id in matched_how else ""
        # An error no longer raised says so, whatever form it matched by.
        note = "; ".join(filter(None, (note, *status, line_note(at_line.get(error_id)))))
        candidates.append(Candidate(error_id, title, title if has_message else None, exception, kind, place, score, how, note))
    return candidates


def line_note(releases: str | None) -> str:
    """What a traceback's line says when it is where earlier releases raised the error."""
    return f"the traceback's line is where SGLang {releases} raised it" if releases else ""


def template_score(
    forms: list[tuple[str, str | None, float]], segments: list[str], starts: bool, ends: bool, exception: str | None, manifest: dict, classes: Mapping[str, Any] | None = None
) -> tuple[float, str, str | None]:
    """How well a template explains the paste, over its forms (squashed text, the exception it
    names, weight), with how and on which form's exception: 0 when no form matches.

    A form the template matches scores the share of it that the literal text pins down, plus 1
    when that is enough to be sure (a large share, much literal text, or the form's start); a
    template found only inside a form (a prefix before it, text after it) counts nine tenths.
    A form that is the template's beginning (the paste stops before the message does) scores
    the share its literal text pins down, at `partial` weight, plus 1 when that is enough.
    A form naming the template's own exception (`same_class` with `classes`) adds
    `named_exception`."""
    literal = sum(units(s) for s in segments)
    best, how, best_exception = 0.0, "", None
    for form, form_exception, form_weight in forms:
        fits = form_exception is not None and exception is not None and same_class(form_exception, exception, classes or {})
        size = max(units(form), 1)
        kind = "message"
        if template_matches(form, segments, starts, ends):
            weight = 1.0
            pinned = literal
        elif (starts or ends) and template_matches(form, segments, False, False):
            weight = 0.9
            pinned = literal
        else:
            pinned = template_prefix(form, segments, starts)
            # A short beginning is chance, unless it is a whole literal of the exception named.
            whole_first = fits and form.startswith(segments[0])
            if pinned < manifest["confident_start"] and not (whole_first and pinned >= manifest["short_start"]):
                continue
            weight = manifest["partial"]
            kind = "beginning"
        share = min(1.0, pinned / size)
        if kind == "beginning":
            confident = pinned >= manifest["confident_literal"] or (pinned >= manifest["confident_start"] and share >= manifest["confident_share"])
        else:
            confident = (
                share >= manifest["confident_share"]
                or literal >= manifest["confident_literal"]
                or (weight == 1.0 and starts and units(segments[0]) >= manifest["confident_start"])
            )
        value = ((1.0 if confident else 0.0) + weight * share) * form_weight
        if fits:
            value += manifest["named_exception"]
        if kind == "message" and not confident:
            # A template whose little literal text the paste holds somewhere (`{e=}` in
            # `tp_size == 0`) counts, but is no exact match: the result says how else it was found.
            kind = ""
        if value > best:
            best, how, best_exception = value, kind, form_exception
    return best, how, best_exception


def template_prefix(message: str, segments: list[str], starts: bool) -> int:
    """How much literal text (in UTF-16 units) a squashed message pins down as the beginning
    of a template that starts with text: the message starts as the template does and stops
    before it ends (inside a literal or a value); 0 when it is not such a beginning."""
    if not starts:
        return 0
    first = segments[0]
    if len(message) <= len(first):
        return units(message) if first.startswith(message) else 0
    if not message.startswith(first):
        return 0
    pinned, position = units(first), len(first)
    for segment in segments[1:]:
        at = message.find(segment, position)
        if at >= 0:
            pinned += units(segment)
            position = at + len(segment)
            continue
        # The message may stop inside this literal: its longest end that starts the literal.
        for size in range(min(len(segment) - 1, len(message) - position), 0, -1):
            if message.endswith(segment[:size]):
                pinned += units(segment[:size])
                break
        break
    return pinned
