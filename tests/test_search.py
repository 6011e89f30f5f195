"""The paste-to-find matcher: templates as matchers, reading pastes and tracebacks, the index
files, and the hit rate on real pasted SGLang messages (tests/data/pasted.json)."""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from generator.extract import extract_source
from generator.model import ErrorEntry, group_sites
from generator.content import load_curated, printed_forms
from generator.search import (
    INDEX_DIR,
    Known,
    SearchIndex,
    lookup,
    matcher_of,
    parse_paste,
    path_matches,
    statement_matcher,
    search_files,
    squash,
    template_matches,
)

PASTED = Path(__file__).parent / "data" / "pasted.json"
REPO = "sgl-project/sglang"


def entries_of(source: str, path: str = "python/sglang/srt/x.py") -> tuple[ErrorEntry, ...]:
    sites = extract_source(textwrap.dedent(source).encode(), path)
    return group_sites(tuple(sites), REPO)


def matches(template_source: str, pasted: str) -> bool:
    """Whether the message of the one raise in `template_source` matches `pasted`."""
    (entry,) = entries_of(template_source)
    matcher = matcher_of(entry)
    assert matcher is not None
    return template_matches(squash(pasted), list(matcher.segments), matcher.starts, matcher.ends)


MATCHING = [
    pytest.param('raise ValueError(f"got {x}")', "got fp8_e5m2", id="value"),
    pytest.param('raise ValueError(f"got {x}")', "got ('bfloat16', 'fp8 e4m3')", id="value-with-spaces-quotes"),
    pytest.param('raise ValueError(f"bad {x} here")', "bad [1,\n 2] here", id="value-with-newline"),
    pytest.param('raise ValueError(f"bad {x} here")', "bad  here", id="empty-value"),
    pytest.param('raise ValueError(f"{a} must divide {b}.")', "--dcp-size 3 must divide --tp-size 8.", id="starts-with-value"),
    pytest.param('raise ValueError("one two " "three")', "one\n  two three", id="whitespace-insensitive"),
    pytest.param('raise ValueError(f"use {{x}} as {y}")', "use {x} as 5", id="literal-braces"),
    pytest.param('raise ValueError("use %s as %d" % (x, y))', "use a b as 5", id="percent-format"),
    pytest.param('raise ValueError("a {} b {}".format(x, y))', "a b b c", id="value-equal-to-literal"),
]

NOT_MATCHING = [
    pytest.param('raise ValueError(f"got {x}")', "we got fp8", id="text-before-a-literal-start"),
    pytest.param('raise ValueError(f"{x} is bad.")', "fp8 is bad. Really", id="text-after-a-literal-end"),
    pytest.param('raise ValueError(f"a {x} b {y} c")', "a 1 c 2 b", id="literals-out-of-order"),
    pytest.param('raise ValueError("exactly this")', "exactly that", id="different-literal"),
    pytest.param('raise ValueError(f"Got {x}")', "got 1", id="case-matters"),
]


@pytest.mark.parametrize(("source", "pasted"), MATCHING)
def test_template_matches_filled_in_values(source: str, pasted: str) -> None:
    assert matches(source, pasted)


@pytest.mark.parametrize(("source", "pasted"), NOT_MATCHING)
def test_template_rejects(source: str, pasted: str) -> None:
    assert not matches(source, pasted)


def test_a_bare_assert_matches_its_statement_and_a_raise_without_text_nothing() -> None:
    entries = entries_of(
        """
        def f(x):
            assert x is not None
            raise ValueError(x)
        """
    )
    by_kind = {entry.kind: entry for entry in entries}
    # Neither has a message: the example runner takes any message as theirs.
    assert matcher_of(by_kind["assert"]) is None and matcher_of(by_kind["raise"]) is None
    statement, bare_raise = statement_matcher(by_kind["assert"]), statement_matcher(by_kind["raise"])
    assert (statement.segments, statement.starts, statement.ends) == (("assertxisnotNone",), True, True)
    # Its shard is that of a word of its condition, not of "assert", which all of them start with.
    assert statement.anchors == ("is", "not", "none")
    assert bare_raise is None


TRACEBACK = """\
Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 40, in loop
    self.step()
  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 12, in step
    assert self.req is None, (
           ^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl
    return forward_call(*args, **kwargs)
KeyError: 'layer 3 missing'
"""


def test_parse_traceback_takes_the_last_exception_and_the_last_package_frame() -> None:
    paste = parse_paste(TRACEBACK)
    assert (paste.exception, paste.message) == ("KeyError", "'layer 3 missing'")
    assert paste.frame is not None
    assert (paste.frame.function, paste.frame.line, paste.frame.source) == ("step", 12, "assert self.req is None, (")


def test_parse_chained_traceback_uses_the_final_exception() -> None:
    chained = TRACEBACK + "\nDuring handling of the above exception, another exception occurred:\n\n" + TRACEBACK.replace(
        "KeyError: 'layer 3 missing'", "sglang.srt.errors.LoadError: could not load layer 3\nsee above"
    )
    paste = parse_paste(chained)
    assert (paste.exception, paste.message) == ("LoadError", "could not load layer 3\nsee above")


@pytest.mark.parametrize(
    ("text", "exception", "message"),
    [
        pytest.param("ValueError: bad value", "ValueError", "bad value", id="exception-prefix"),
        pytest.param("bad value: really", None, "bad value: really", id="plain-message"),
        pytest.param("[2026-01-01 TP0] worker hit: RuntimeError: boom", "RuntimeError", "boom", id="log-prefix"),
        pytest.param("AssertionError", "AssertionError", "", id="bare-exception"),
    ],
)
def test_parse_message(text: str, exception: str | None, message: str) -> None:
    paste = parse_paste(text)
    assert (paste.exception, paste.message) == (exception, message)


def test_parse_warning_line_gives_file_and_category() -> None:
    paste = parse_paste(
        "/opt/venv/lib/python3.11/site-packages/sglang/srt/utils.py:88: UserWarning: fp8 is slow here\n"
        "  warnings.warn(f'fp8 is slow {where}')\n"
    )
    assert (paste.exception, paste.message) == ("UserWarning", "fp8 is slow here")
    assert paste.frame is not None and paste.frame.line == 88


SOURCE = """
def check_dtype(kv_cache_dtype):
    if kv_cache_dtype not in ("bfloat16",):
        raise ValueError(f"requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.")
    raise ValueError(f"Unsupported {kv_cache_dtype}")

def generic(what, value):
    raise ValueError(f"{what} KV cache dtypes, but got {value}.")

def load(path, found):
    assert found is not None
    assert path.endswith(".bin")
    raise KeyError(f"missing layer {path}")

def other(found):
    assert found is not None
    raise RuntimeError(f"Unsupported {found}")
"""


@pytest.fixture(scope="module")
def small() -> SearchIndex:
    return SearchIndex.of_entries(entries_of(SOURCE), REPO)


def test_the_most_specific_template_wins(small: SearchIndex) -> None:
    results = lookup("requires one of ('bfloat16',) KV cache dtypes, but got --kv-cache-dtype=fp8.", small)
    assert [r.message for r in results[:2]] == [
        "requires one of {CHOICES} KV cache dtypes, but got --kv-cache-dtype={kv_cache_dtype}.",
        "{what} KV cache dtypes, but got {value}.",
    ]
    assert results[0].score > results[1].score


def test_the_named_exception_breaks_a_tie(small: SearchIndex) -> None:
    assert lookup("RuntimeError: Unsupported x", small)[0].exception == "RuntimeError"
    assert lookup("ValueError: Unsupported x", small)[0].exception == "ValueError"


def test_key_error_message_is_unquoted(small: SearchIndex) -> None:
    assert lookup("KeyError: 'missing layer model.layers.3'", small)[0].message == "missing layer {path}"


def test_traceback_frame_finds_a_message_less_assert(small: SearchIndex) -> None:
    traceback = """\
    Traceback (most recent call last):
      File "/x/sglang/srt/x.py", line 3, in load
        assert found is not None
    AssertionError
    """
    results = lookup(textwrap.dedent(traceback), small)
    assert results[0].title == "assert found is not None"
    assert results[0].id == next(e.id for e in entries_of(SOURCE) if e.sites[0].function == "load" and e.kind == "assert" and "found" in e.title)


def test_traceback_frame_from_another_release_still_needs_the_function(small: SearchIndex) -> None:
    traceback = """\
    Traceback (most recent call last):
      File "/x/sglang/srt/x.py", line 400, in other
        assert found is not None
    AssertionError
    """
    (best, *_) = lookup(textwrap.dedent(traceback), small)
    other_assert = next(e for e in entries_of(SOURCE) if e.sites[0].function == "other" and e.kind == "assert")
    assert best.id == other_assert.id


def test_a_bare_assert_pasted_without_its_frame_is_found_by_its_statement(small: SearchIndex) -> None:
    """A paste of a traceback's last lines only, or the statement quoted as the error: the
    statement is the bare `AssertionError`'s message, and every assert that checks it is an
    exact match."""
    checks_found = {e.id for e in entries_of(SOURCE) if e.title == "assert found is not None"}
    ends_bin = next(e.id for e in entries_of(SOURCE) if e.title == 'assert path.endswith(".bin")')
    for paste in ("    assert found is not None\n           ^^^^^\nAssertionError", "AssertionError: assert found is not None", "assert found is not None"):
        results = lookup(paste, small)
        assert {r.id for r in results[:2]} == checks_found, paste
        assert [r.match for r in results[:2]] == ["message", "message"]
    [best, *_] = lookup('[rank0]:     assert path.endswith(".bin")\n[rank0]: AssertionError', small)
    assert (best.id, best.match) == (ends_bin, "message")
    # A line above that is no source line says nothing of which assert failed.
    assert parse_paste("ERROR worker died\nAssertionError").message == ""


def test_a_frame_whose_line_printed_another_check_is_not_where_it_was_raised(small: SearchIndex) -> None:
    """A traceback from another release at a line where this release raises something else:
    the printed statement says the line held another check then, so the line is no evidence."""
    traceback = """\
    Traceback (most recent call last):
      File "/x/sglang/srt/x.py", line 12, in load
        assert path.exists()
    AssertionError
    """
    results = lookup(textwrap.dedent(traceback), small)
    assert all(r.match != "traceback" for r in results)
    # The same frame printing the statement of the site at that line is that site, raised there.
    [best, *_] = lookup(textwrap.dedent(traceback).replace("path.exists()", 'path.endswith(".bin")'), small)
    assert (best.title, best.match) == ('assert path.endswith(".bin")', "traceback")


def test_a_frame_whose_path_the_paster_cut_is_still_the_frame(small: SearchIndex) -> None:
    """Users shorten long paths (`.../srt/x.py`): what is left still names the file, and the
    frame is where it was raised, even with a library's frame below it."""
    for path in (".../srt/x.py", "\u2026/srt/x.py"):
        paste = f"""Traceback (most recent call last):\n  File "{path}", line 12, in load\n    assert path.endswith(".bin")\n  File "/usr/lib/python3.10/posixpath.py", line 3, in f\n    x()\nAssertionError"""
        parsed = parse_paste(paste)
        assert parsed.frame is not None and parsed.frame.path == path
        [best, *_] = lookup(paste, small)
        assert (best.title, best.match) == ('assert path.endswith(".bin")', "traceback"), path
    # A file name alone could be any file of that name.
    assert not path_matches(".../x.py", "python/sglang/srt/x.py")
    assert path_matches(".../srt/x.py", "python/sglang/srt/x.py") and not path_matches(".../other/x.py", "python/sglang/srt/x.py")


def test_a_long_log_is_read_from_its_end(small: SearchIndex) -> None:
    noise = "".join(f"[2026-01-01 00:00:{n % 60:02d}] step {n}: throughput {n * 7} tok/s word{n}\n" for n in range(20_000))
    results = lookup(noise + "ValueError: Unsupported fp8_e5m2\n", small)
    assert results[0].message == "Unsupported {kv_cache_dtype}"


NOTHING = [
    pytest.param("", id="empty"),
    pytest.param("completely unrelated words about cooking pasta", id="unrelated"),
    pytest.param('Traceback (most recent call last):\n  File "/x/y.py", line 1, in f\n    g()\nZeroDivisionError: division by zero', id="foreign-traceback"),
]


@pytest.mark.parametrize("text", NOTHING)
def test_finds_nothing(small: SearchIndex, text: str) -> None:
    assert lookup(text, small) == []


def test_search_files_are_deterministic_json_under_search() -> None:
    entries = entries_of(SOURCE)
    files = search_files(entries, REPO)
    assert files == search_files(tuple(reversed(entries)), REPO)
    assert all(path.startswith(f"{INDEX_DIR}/") and path.endswith(".json") for path in files)
    manifest = json.loads(files[f"{INDEX_DIR}/manifest.json"])
    assert manifest["entries"] == len(entries) and manifest["repo"] == REPO
    for data in files.values():
        json.loads(data)


def test_site_index_reads_what_search_files_wrote(tmp_path: Path, small: SearchIndex) -> None:
    for path, data in search_files(entries_of(SOURCE), REPO).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    pasted = "requires one of ('bfloat16',) KV cache dtypes, but got --kv-cache-dtype=fp8."
    assert lookup(pasted, SearchIndex.of_site(tmp_path)) == lookup(pasted, small)


# ---------------------------------------------------------------------------------------------
# What users paste: wrapped, cut short, under another exception, from another release.

PASTED_SOURCE = """
def launch(mem):
    raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")

def validate(n, context):
    raise ValueError(f"The input ({n} tokens) is longer than the model's context length ({context} tokens).")

def disconnect(obj):
    raise ValueError(f"Request is disconnected from the client side (type 1). Abort request {obj.rid=}")

def parse(name):
    raise ValueError(f"Unsupported tool_call_parser: {name}")

def lora(adapter):
    raise ValueError(f"LoRA adapter '{adapter}' was requested, but LoRA is not enabled. Please launch the server with --enable-lora.")

def balance(a, b):
    raise RuntimeError(f"The memory capacity is unbalanced. Some GPUs may be occupied by other processes. {a} {b}")

def capacity(a, b):
    raise ValueError(f"The memory capacity is {a} GB, less than {b} GB needed.")

def keys(names):
    raise ValueError(f"Cannot find any of {names} in the model's quantization config.")

def quant(name):
    raise ValueError(f"Cannot find {name!r} in the model's quantization config.")

def warmup(res):
    assert res.status_code == 200, f"{res=}, {res.text=}"

def asserted(width):
    assert width > 0, f"width must be positive, got {width}"

def raised(width):
    raise ValueError(f"width must be positive, got {width} here")
"""

MOVED_SOURCE = """
class SWAComponent:
    def build_hicache_transfers(self, cd):
        assert cd.host_value is not None or cd.value is not None
        assert cd.value is not None
"""


@pytest.fixture(scope="module")
def pasted_index() -> SearchIndex:
    entries = entries_of(PASTED_SOURCE) + entries_of(MOVED_SOURCE, "python/sglang/srt/mem_cache/unified_cache/components/swa.py")
    return SearchIndex.of_entries(entries, REPO)


WRAPPED = [
    pytest.param(
        "[2025-01-01 10:00:00 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "Not enough memory. Please try to increase --mem-fraction-static.",
        id="log-prefix",
    ),
    pytest.param(
        "sglang-1  | [2026-04-30 16:02:26 DP0 TP3] Not enough memory. Please try to increase --mem-fraction-static.",
        "Not enough memory. Please try to increase --mem-fraction-static.",
        id="docker-compose-prefix",
    ),
    pytest.param(
        "(Worker pid=8) ERROR 2025-04-07T19:13:52.31Z RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "Not enough memory. Please try to increase --mem-fraction-static.",
        id="ray-level-timestamp-prefixes",
    ),
    pytest.param(
        "[2026-01-12 21:03:30] Task exception was never retrieved\n"
        "future: <Task finished name='Task-9' coro=<f()> exception=ValueError(\"Request is disconnected from the client side "
        "(type 1). Abort request obj.rid='f2ea'\")>\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/asyncio/tasks.py", line 520, in wait_for\n'
        "    return await fut\n"
        "asyncio.exceptions.CancelledError",
        "Request is disconnected from the client side (type 1). Abort request {obj.rid=}",
        id="asyncio-task-repr",
    ),
    pytest.param(
        '{"object":"error","message":"The input (61709 tokens) is longer than the model\\\'s context length (40960 tokens).",'
        '"type":"BadRequestError","param":null,"code":400}',
        "The input ({n} tokens) is longer than the model's context length ({context} tokens).",
        id="json-error-body",
    ),
    pytest.param(
        '{"detail": "Unsupported tool_call_parser: pythonic2"}',
        "Unsupported tool_call_parser: {name}",
        id="json-detail",
    ),
    pytest.param(
        '{"error": {"message": "Unsupported tool_call_parser: None", "type": "invalid_request_error"}}',
        "Unsupported tool_call_parser: {name}",
        id="json-error-message",
    ),
    pytest.param(
        "BadRequestError: Error code: 400 - {'object': 'error', 'message': \"LoRA adapter 'x' was requested, but LoRA is not enabled. "
        "Please launch the server with --enable-lora.\", 'type': 'BadRequestError'}",
        "LoRA adapter '{adapter}' was requested, but LoRA is not enabled. Please launch the server with --enable-lora.",
        id="openai-client-error",
    ),
    pytest.param(
        "requests.exceptions.HTTPError: Bad Request: Unsupported tool_call_parser: qwen9",
        "Unsupported tool_call_parser: {name}",
        id="bad-request",
    ),
    pytest.param("HTTP 400: Unsupported tool_call_parser: qwen9", "Unsupported tool_call_parser: {name}", id="http-status"),
    pytest.param(
        "[2025-08-12 08:24:37] Error in request: Unsupported tool_call_parser: None\n"
        "Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/openai/serving_chat.py", line 154, in _process_messages',
        "Unsupported tool_call_parser: {name}",
        id="log-line-before-a-cut-traceback",
    ),
    pytest.param(
        "".join(f"[2026-01-01 00:00:{n % 60:02d} TP0] Decode batch. #running-req: {n}, #token: {n * 7}, gen throughput (token/s): 51.2\n" for n in range(200))
        + "[2026-01-01 00:01:00 TP0] Scheduler hit an exception: Not enough memory. Please try to increase --mem-fraction-static.\n"
        + "".join(f"[2026-01-01 00:01:{n:02d}] INFO: 127.0.0.1:{n} - \"POST /generate HTTP/1.1\" 200 OK\n" for n in range(50)),
        "Not enough memory. Please try to increase --mem-fraction-static.",
        id="error-line-in-a-whole-log",
    ),
]


@pytest.mark.parametrize(("paste", "message"), WRAPPED)
def test_a_wrapped_error_is_found(pasted_index: SearchIndex, paste: str, message: str) -> None:
    assert lookup(paste, pasted_index)[0].message == message


CHAINED = [
    pytest.param("During handling of the above exception, another exception occurred:", id="during-handling"),
    pytest.param("The above exception was the direct cause of the following exception:", id="direct-cause"),
]


@pytest.mark.parametrize("separator", CHAINED)
def test_a_chained_traceback_is_its_last_error_not_its_cause(pasted_index: SearchIndex, separator: str) -> None:
    paste = f"""\
Traceback (most recent call last):
  File "/x/sglang/srt/x.py", line 20, in parse
    parser = PARSERS[name]
KeyError: 'Cannot find qwen9 in the model's quantization config.'

{separator}

Traceback (most recent call last):
  File "/x/sglang/srt/x.py", line 21, in parse
    raise ValueError(f"Unsupported tool_call_parser: {{name}}")
ValueError: Unsupported tool_call_parser: qwen9
"""
    (best, *_) = lookup(paste, pasted_index)
    assert best.message == "Unsupported tool_call_parser: {name}"


def test_a_traceback_cut_inside_the_raise_is_its_frame(pasted_index: SearchIndex) -> None:
    paste = """\
Traceback (most recent call last):
  File "/x/sglang/srt/x.py", line 4, in launch
    raise Runt"""
    (best, *_) = lookup(paste, pasted_index)
    assert (best.message, best.match) == ("Not enough memory. Please try to increase --mem-fraction-static.", "traceback")


BEGINNINGS = [
    pytest.param("The memory capacity is unbalanced", "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. {a} {b}", id="inside-the-first-literal"),
    pytest.param("RuntimeError: The memory capacity is unbalanced. Some GPUs may", "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. {a} {b}", id="cut-mid-literal"),
    pytest.param("ValueError: Cannot find any of ['quant_method']", "Cannot find any of {names} in the model's quantization config.", id="cut-inside-a-value"),
    pytest.param(
        "ValueError: LoRA adapter '/home/u/.cache/finetune/qwen3-0_6b' was reque",
        "LoRA adapter '{adapter}' was requested, but LoRA is not enabled. Please launch the server with --enable-lora.",
        id="cut-after-a-value",
    ),
    pytest.param("AssertionError: res=<Response [503]> Process was always killed", "{res=}, {res.text=}", id="short-beginning-of-the-exception-named"),
]


@pytest.mark.parametrize(("paste", "message"), BEGINNINGS)
def test_a_paste_cut_short_finds_the_message_it_begins(pasted_index: SearchIndex, paste: str, message: str) -> None:
    (best, *rest) = lookup(paste, pasted_index)
    assert (best.message, best.match) == (message, "beginning")
    assert all(other.score < best.score for other in rest)


NOT_BEGINNINGS = [
    pytest.param("The mem", id="too-short"),
    pytest.param("res=<Response [503]> Process was always killed", id="short-beginning-without-its-exception"),
    pytest.param("The memory capacity was fine", id="diverges-inside-the-first-literal"),
]


@pytest.mark.parametrize("paste", NOT_BEGINNINGS)
def test_a_beginning_too_short_or_wrong_is_not_a_match(pasted_index: SearchIndex, paste: str) -> None:
    assert all(result.match != "beginning" for result in lookup(paste, pasted_index))


def test_the_exception_named_outranks_a_closer_text(pasted_index: SearchIndex) -> None:
    # Both templates match; the assert's pins down more of the paste, but the paste says ValueError.
    (best, *_) = lookup("ValueError: width must be positive, got 3 here", pasted_index)
    assert (best.message, best.exception) == ("width must be positive, got {width} here", "ValueError")
    (best, *_) = lookup("AssertionError: width must be positive, got 3 here", pasted_index)
    assert best.exception == "AssertionError"


def test_another_exception_still_finds_the_only_message(pasted_index: SearchIndex) -> None:
    # An older release raised it as another class: nothing of the class named fits, so the text wins.
    (best, *_) = lookup("TypeError: Not enough memory. Please try to increase --mem-fraction-static.", pasted_index)
    assert best.message == "Not enough memory. Please try to increase --mem-fraction-static."


MOVED_FRAME = """\
Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/sglang/srt/mem_cache/unified_cache_components/swa_component.py", line 448, in build_hicache_transfers
    assert {condition}
           ^^^^^^^^^^^
AssertionError
"""


def test_a_frame_in_a_file_that_moved_finds_the_statement_of_its_function(pasted_index: SearchIndex) -> None:
    (best, *_) = lookup(MOVED_FRAME.format(condition="cd.host_value is not None or cd.value is not None"), pasted_index)
    assert (best.title, best.match) == ("assert cd.host_value is not None or cd.value is not None", "traceback")


def test_a_frame_in_a_file_that_moved_needs_the_statement(pasted_index: SearchIndex) -> None:
    # The function's name alone is only words: another release may assert something else there.
    assert all(result.match != "traceback" for result in lookup(MOVED_FRAME.format(condition="cd.other is None"), pasted_index))


# ---------------------------------------------------------------------------------------------
# The real release: the pasted set.


def pasted_cases() -> list[dict]:
    return json.loads(PASTED.read_text(encoding="utf-8"))


def naive_word_search(entries: tuple[ErrorEntry, ...]):
    """What a generic full-text index over the pages does: BM25 over each page title's words
    (lowercased, split on whitespace, punctuation stripped at the edges), no templates."""

    def words(text: str) -> list[str]:
        return [w for w in (w.strip(".,;:!?()[]{}'\"`").lower() for w in text.split()) if w]

    documents = [Counter(words(entry.title)) for entry in entries]
    lengths = [sum(d.values()) for d in documents]
    average = sum(lengths) / len(lengths)
    frequency = Counter(word for document in documents for word in document)
    postings: dict[str, list[int]] = {}
    for number, document in enumerate(documents):
        for word in document:
            postings.setdefault(word, []).append(number)

    def search(text: str) -> str | None:
        scores: dict[int, float] = {}
        for word in set(words(text)):
            idf = math.log(1 + (len(entries) - frequency[word] + 0.5) / (frequency[word] + 0.5))
            for number in postings.get(word, ()):
                tf = documents[number][word]
                scores[number] = scores.get(number, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * lengths[number] / average))
        if not scores:
            return None
        return entries[max(scores, key=lambda n: (scores[n], -n))].id

    return search


@pytest.fixture(scope="module")
def real_entries(sglang) -> tuple[ErrorEntry, ...]:
    return group_sites(sglang.sites, sglang.upstream.repo)


@pytest.fixture(scope="module")
def real_printed() -> dict[str, tuple[str, ...]]:
    """The printed forms of the curated entries in content/, as a build indexes them."""
    return printed_forms(load_curated(Path(__file__).parent.parent / "content", REPO))


@pytest.fixture(scope="module")
def real_site(real_entries, real_printed, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    for path, data in search_files(real_entries, REPO, (), Known(real_printed)).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.mark.real
def test_pasted_set_is_real(real_entries) -> None:
    cases = pasted_cases()
    ids = {entry.id for entry in real_entries}
    expected = [case["expect"] for case in cases if case["expect"] is not None]
    assert len(expected) >= 50 + 3 and sum(case["kind"] == "traceback" for case in cases) >= 3
    assert [error_id for error_id in expected if error_id not in ids] == []
    assert sum(case["expect"] is None for case in cases) >= 2


@pytest.mark.real
def test_pasted_set_hit_rate(real_entries, real_site, capsys) -> None:
    """The right page first for nearly every pasted message, and more often than words alone."""
    index = SearchIndex.of_site(real_site)
    naive = naive_word_search(real_entries)
    cases = [case for case in pasted_cases() if case["expect"] is not None]
    misses, naive_hits, by_kind = [], 0, Counter()
    for case in cases:
        results = lookup(case["paste"], index)
        if results and results[0].id == case["expect"]:
            by_kind[case["kind"]] += 1
        else:
            misses.append((case["expect"], case["paste"][:80], [r.id for r in results[:3]]))
        naive_hits += naive(case["paste"]) == case["expect"]
    rate, naive_rate = 1 - len(misses) / len(cases), naive_hits / len(cases)
    with capsys.disabled():
        print(
            f"\npasted set: right page first {len(cases) - len(misses)}/{len(cases)} ({rate:.0%}) "
            f"{dict(sorted(by_kind.items()))}; words only (BM25 over titles) {naive_hits}/{len(cases)} ({naive_rate:.0%})"
        )
    assert rate >= 0.95, misses
    assert rate > naive_rate


REPORTS = Path(__file__).parent / "data" / "real_reports.json"
# Labelled reports whose page must come first: 59 of 62 at 0.5.23 (95%), the four KVTransferError
# log lines by their entries' printed forms. The issue's target is 90%; the three misses are
# listed in the note of the change that set the floor at 48 of 51. Eleven more were found by a
# scout on 2026-12-07; one of them (ktransformers#1666) needs a function of the frame's name in
# another file not to outrank an exact message (`lookup`'s `elsewhere`). Twenty more from a
# second scout that day (14 of them raised today): the 14 first, after issue titles that quote
# the message or put a path after it were read (`_unwrapped`).
REPORTS_FIRST = 73


@pytest.mark.real
def test_real_reports_hit_rate(real_entries, real_site, capsys) -> None:
    """Errors users pasted in public issue threads, verbatim with their wrappers: the right
    page first for at least `REPORTS_FIRST` of those SGLang still raises."""
    cases = json.loads(REPORTS.read_text(encoding="utf-8"))
    # Those only earlier releases raised as pasted are found through the ledger, which this
    # index has not (tests/test_history_real.py).
    labelled = [case for case in cases if case.get("expect") and not case.get("history")]
    ids = {entry.id for entry in real_entries}
    assert [case["expect"] for case in labelled if case["expect"] not in ids] == []
    assert all(case.get("reason") for case in cases if not case.get("expect"))
    index = SearchIndex.of_site(real_site)
    misses = []
    for case in labelled:
        results = lookup(case["paste"], index)
        if not results or results[0].id != case["expect"]:
            misses.append((case["url"], case["expect"], results[0].id if results else None))
    hits = len(labelled) - len(misses)
    with capsys.disabled():
        print(f"\nreal reports: right page first {hits}/{len(labelled)} ({hits / len(labelled):.0%})")
    assert hits >= REPORTS_FIRST, misses


@pytest.mark.real
def test_pasted_set_nothing_sensible(real_site) -> None:
    index = SearchIndex.of_site(real_site)
    for case in pasted_cases():
        if case["expect"] is None:
            assert lookup(case["paste"], index) == [], case["paste"]


@pytest.mark.real
def test_source_and_site_indexes_agree(real_entries, real_printed, real_site) -> None:
    in_memory, on_disk = SearchIndex.of_entries(real_entries, REPO, (), Known(real_printed)), SearchIndex.of_site(real_site)
    for case in pasted_cases()[::7]:
        assert lookup(case["paste"], in_memory) == lookup(case["paste"], on_disk)


@pytest.mark.real
def test_real_index_is_small_and_a_paste_loads_little_of_it(real_entries, real_site) -> None:
    """Sizes, which a browser pays for; how long the index takes to build is measured by the
    build benchmarks (bench/), not here."""
    files = search_files(real_entries, REPO)
    assert len(files[f"{INDEX_DIR}/manifest.json"]) < 1_000
    assert max(len(data) for data in files.values()) < 200_000
    for case in pasted_cases():
        index = SearchIndex.of_site(real_site)
        lookup(case["paste"], index)
        loaded = sum((real_site / INDEX_DIR / name).stat().st_size for name in index.loaded)
        # What a browser fetches for one paste (before compression).
        assert loaded < 400_000, (case["paste"][:60], loaded)


def test_placeholder_names_never_leak_into_matching() -> None:
    # A user pastes values, not expression names: `{kv_cache_dtype}` must not need the word.
    (entry,) = entries_of('raise ValueError(f"dtype {kv_cache_dtype} unsupported")')
    matcher = matcher_of(entry)
    assert matcher is not None and not any(re.search("kv_cache", s) for s in matcher.segments)


CLASSES_SOURCE = """\
class KVTransferError(RuntimeError):
    pass

def send(room):
    raise KVTransferError(f"Transfer failed for room {room}")

def check(room):
    raise ValueError(f"Transfer failed for room {room}")

def retry(room):
    raise RuntimeError(f"Transfer failed for room {room}")

def catch_all(room):
    raise Exception(f"Transfer failed for room {room}")

def lookup_key(name):
    raise KeyError(f"no layer named {name} here")

def lookup_value(name):
    raise ValueError(f"no layer named {name} here")
"""


@pytest.fixture
def classes_index() -> SearchIndex:
    from generator.extract import extract_file
    from generator.raisers import exception_classes

    path = "python/sglang/srt/x.py"
    extracted = {path: extract_file(CLASSES_SOURCE.encode(), path)}
    classes = exception_classes(extracted, [path])
    assert classes == (("KVTransferError", ("BaseException", "Exception", "RuntimeError")),)
    return SearchIndex.of_entries(entries_of(CLASSES_SOURCE, path), REPO, classes)


CLASS_FITS = [
    # A subclass of the class named fits: upstream's class and the class itself, above
    # ValueError and Exception (a base of a class of Python's is no fit).
    pytest.param("RuntimeError: Transfer failed for room 7", {"KVTransferError", "RuntimeError"}, id="subclass-of-the-class-named"),
    # Upstream's class named: it, and its bases but the catch-alls.
    pytest.param("KVTransferError: Transfer failed for room 7", {"KVTransferError", "RuntimeError"}, id="base-of-upstreams-class"),
    # Python's own classes: KeyError is a LookupError.
    pytest.param("LookupError: no layer named x here", {"KeyError"}, id="python-subclass"),
    pytest.param("ValueError: Transfer failed for room 7", {"ValueError"}, id="same-class-only"),
]


@pytest.mark.parametrize("paste, fitting", CLASS_FITS)
def test_a_class_fits_the_class_named_its_subclasses_and_upstreams_bases(classes_index: SearchIndex, paste: str, fitting: set) -> None:
    results = lookup(paste, classes_index)
    fits = [r.exception in fitting for r in results]
    # Every candidate whose class fits ranks above every one whose class does not.
    assert fits == sorted(fits, reverse=True) and fits[0]
    assert {r.exception for r in results if r.exception in fitting} == fitting


def test_a_class_that_fits_nothing_still_finds_the_message(classes_index: SearchIndex) -> None:
    (best, *_) = lookup("TypeError: no layer named x here", classes_index)
    assert best.message == "no layer named {name} here"


def test_classes_json_holds_pythons_and_upstreams_classes() -> None:
    from generator.search import classes_file

    data = json.loads(classes_file((("KVTransferError", ("BaseException", "Exception", "RuntimeError")),)))
    assert data["defined"] == ["KVTransferError"]
    assert data["ancestors"]["KeyError"] == ["LookupError", "Exception", "BaseException"]
    assert data["ancestors"]["KVTransferError"] == ["BaseException", "Exception", "RuntimeError"]


RAISER_SOURCE = """\
def raise_error_or_warn(obj, strict, counter_name, message):
    if strict:
        raise ValueError(message)

def report_leak(pool_name, token_msg):
    msg = f"{pool_name} memory leak detected! {token_msg}"
    raise_error_or_warn(None, True, "count", msg)

def double_free(n):
    raise_error_or_warn(None, True, "count", f"KV double free: {n} duplicate pages.")
"""

RAISER_TRACEBACK = """\
Traceback (most recent call last):
  File "/v/sglang/srt/x.py", line 7, in report_leak
    raise_error_or_warn(None, True, "count", msg)
  File "/v/sglang/srt/x.py", line 3, in raise_error_or_warn
    raise ValueError(message)
ValueError: token_to_kv_pool_allocator memory leak detected! available_size=644, protected_size=0
"""


def test_a_traceback_ending_in_a_raiser_finds_the_call_whose_message_it_shows() -> None:
    index = SearchIndex.of_entries(entries_of(RAISER_SOURCE), REPO)
    results = lookup(RAISER_TRACEBACK, index)
    assert results[0].message == "{pool_name} memory leak detected! {token_msg}"
    # The raiser's own, message-less site is still found, below it.
    assert any(r.message is None and r.exception == "ValueError" for r in results[1:])
    # Without the traceback, the message alone finds it too.
    assert lookup(RAISER_TRACEBACK.splitlines()[-1], index)[0].message == "{pool_name} memory leak detected! {token_msg}"


@pytest.mark.parametrize(
    ("paste", "version"),
    [
        ("$ pip install sglang==0.4.6\nValueError: x", "0.4.6"),
        ('  File "/opt/sglang-0.4.3.post2/python/sglang/srt/server_args.py", line 9, in f', "0.4.3.post2"),
        ("Python: 3.10.12\nsglang: 0.5.18\nflashinfer_python: 0.2.5", "0.5.18"),
        ("SGLang version 0.5.2 on 8xH100", "0.5.2"),
        ("upgraded from sglang 0.4.6 to sglang v0.5.1, now:", "0.5.1"),
        ("sgl-kernel 0.1.0", None),
        ("sglang-router==0.1.4", None),
        ("sglang_router 0.1.4", None),
        ("mysglang-0.4.6", None),
        ("ValueError: must be divisible by tp_size 0.4.6", None),
    ],
)
def test_the_release_a_paste_names(paste: str, version: str | None) -> None:
    """A paste that names its SGLang release (pip's pin, a path, check_env's line) gives that
    release, the last it names; a router's or kernel's version, or a bare number, is none."""
    from generator.search import paste_version

    assert paste_version(paste) == version


CAPTURE = """
def capture(runner):
    try:
        runner.capture()
    except RuntimeError as e:
        raise Exception(f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")

def other(kind):
    raise ValueError(f"cannot disable {kind}: open an issue if you need it")
"""

# How 0.4.6 worded the first message: its suggestions were part of it then.
OLD_CAPTURE = (
    "Capture cuda graph failed: {e}\nPossible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def test_the_last_lines_of_an_earlier_wording_find_its_error() -> None:
    """A long message's cause comes first and can run to pages, so users paste the end of the
    log: only the suggestions, as their release worded them (sgl-project/sglang#6218). No
    template matches a paste without the message's beginning; the words of the earlier
    wording do."""
    entries = entries_of(CAPTURE)
    capture = next(e for e in entries if e.sites[0].function == "capture")
    index = SearchIndex.of_entries(entries, REPO, (), Known(wordings={capture.id: ((OLD_CAPTURE, "matched an earlier wording"),)}))
    paste = "\n".join(OLD_CAPTURE.splitlines()[4:])
    assert [result.id for result in lookup(paste, index)][:1] == [capture.id]


def test_a_template_whose_little_text_the_paste_holds_somewhere_is_not_an_exact_match() -> None:
    """`f"{e=}"` has two characters of text: any paste holding `e=` contains it. Its error may
    still be found (here by its function's name), but a result that says "exact match" for it
    misleads; one whose text the paste holds surely is labelled so."""
    entries = entries_of(
        """
        def validate_experts(e):
            raise ValueError(f"{e=}")

        def check_experts(self):
            raise ValueError(f"num_experts ({self.num_experts}) must be divisible by tp_size ({self.tp_size})")
        """
    )
    index = SearchIndex.of_entries(entries, REPO)
    loose, sure = entries
    found = {result.id: result.match for result in lookup("ValueError: validate_experts num_experts (64) must be divisible by tp_size (3), e=7", index)}
    assert found[sure.id] == "message"
    assert found[loose.id] != "message"
