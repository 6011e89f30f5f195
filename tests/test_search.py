"""The paste-to-find matcher: templates as matchers, reading pastes and tracebacks, the index
files, and the hit rate on real pasted SGLang messages (tests/data/pasted.json)."""

from __future__ import annotations

import json
import math
import re
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from generator.extract import extract_source
from generator.model import ErrorEntry, group_sites
from generator.search import (
    INDEX_DIR,
    SearchIndex,
    lookup,
    matcher_of,
    parse_paste,
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


def test_message_less_sites_have_no_matcher() -> None:
    entries = entries_of(
        """
        def f(x):
            assert x is not None
            raise ValueError(x)
        """
    )
    assert [matcher_of(entry) for entry in entries] == [None, None]


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


def test_a_long_log_is_read_from_its_end(small: SearchIndex) -> None:
    noise = "".join(f"[2026-01-01 00:00:{n % 60:02d}] step {n}: throughput {n * 7} tok/s word{n}\n" for n in range(20_000))
    started = time.perf_counter()
    results = lookup(noise + "ValueError: Unsupported fp8_e5m2\n", small)
    assert time.perf_counter() - started < 1.0
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
def real_site(real_entries, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    for path, data in search_files(real_entries, REPO).items():
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


@pytest.mark.real
def test_pasted_set_nothing_sensible(real_site) -> None:
    index = SearchIndex.of_site(real_site)
    for case in pasted_cases():
        if case["expect"] is None:
            assert lookup(case["paste"], index) == [], case["paste"]


@pytest.mark.real
def test_source_and_site_indexes_agree(real_entries, real_site) -> None:
    in_memory, on_disk = SearchIndex.of_entries(real_entries, REPO), SearchIndex.of_site(real_site)
    for case in pasted_cases()[::7]:
        assert lookup(case["paste"], in_memory) == lookup(case["paste"], on_disk)


@pytest.mark.real
def test_real_index_is_fast_and_small(real_entries, real_site) -> None:
    started = time.perf_counter()
    files = search_files(real_entries, REPO)
    built = time.perf_counter() - started
    assert built < 10, f"building the index took {built:.1f}s"
    assert len(files[f"{INDEX_DIR}/manifest.json"]) < 1_000
    assert max(len(data) for data in files.values()) < 200_000
    for case in pasted_cases():
        index = SearchIndex.of_site(real_site)
        started = time.perf_counter()
        lookup(case["paste"], index)
        assert time.perf_counter() - started < 1.0
        loaded = sum((real_site / INDEX_DIR / name).stat().st_size for name in index.loaded)
        # What a browser fetches for one paste (before compression).
        assert loaded < 400_000, (case["paste"][:60], loaded)


def test_placeholder_names_never_leak_into_matching() -> None:
    # A user pastes values, not expression names: `{kv_cache_dtype}` must not need the word.
    (entry,) = entries_of('raise ValueError(f"dtype {kv_cache_dtype} unsupported")')
    matcher = matcher_of(entry)
    assert matcher is not None and not any(re.search("kv_cache", s) for s in matcher.segments)
