"""`errorkb check`, `scaffold` and `review` on fixtures and throwaway repositories."""

from __future__ import annotations

import ast
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from generator.audit import fingerprint_of, site_code
from generator.cli import main
from generator.extract import extract_source
from generator.model import error_id
from tests import conftest
from tests.conftest import make_repo, reviewed

DATA = Path(__file__).parent / "data" / "content"
KV4 = "78ce936e309db402"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--cache-dir", str(conftest.test_cache_dir())])
    out, err = capsys.readouterr()
    return code, out, err


def fingerprint_of_source(text: str) -> str:
    text = textwrap.dedent(text)
    sites = extract_source(text.encode(), "python/sglang/m.py")
    assert len(sites) == 1
    return fingerprint_of([site_code(ast.parse(text), text.splitlines(), sites[0])])


BASE = """\
def check(dtype: str) -> None:
    if dtype == "fp4":
        raise ValueError(f"bad {dtype}")
"""


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param("\n\n# moved down\n" + BASE, id="lines-moved"),
        pytest.param(BASE.replace('raise ValueError(f"bad {dtype}")', "raise ValueError(\n            f'bad {dtype}'\n        )"), id="reformatted"),
        pytest.param(BASE.replace("def check", '"""Doc."""\n\n\ndef check'), id="module-docstring"),
    ],
)
def test_fingerprint_ignores_what_explanations_do_not_depend_on(changed):
    assert fingerprint_of_source(changed) == fingerprint_of_source(BASE)


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(BASE.replace('dtype == "fp4"', 'dtype in ("fp4", "int4")'), id="guard"),
        pytest.param(BASE.replace("dtype: str)", "dtype: str, strict: bool = True)"), id="signature"),
        pytest.param(BASE.replace("ValueError", "RuntimeError"), id="exception"),
        pytest.param(BASE.replace("def check", "@cache\ndef check"), id="decorator"),
    ],
)
def test_fingerprint_changes_with_statement_guards_and_signature(changed):
    assert fingerprint_of_source(changed) != fingerprint_of_source(BASE)


def test_site_code_is_the_raise_and_the_innermost_function_around_it():
    """The statement and signature a fingerprint covers are the site's own, whatever surrounds
    them: nested functions, a compound statement on one line, statements sharing the line."""
    text = textwrap.dedent(
        """\
        class Loader:
            def load(self, path: str) -> None:
                def inner(name: str, strict: bool = True):
                    if name: x = 1; raise KeyError(name)
                    try:
                        pass
                    except OSError:
                        with open(path) as f: raise ValueError(f"bad {name}")
                return inner
        """
    )
    tree, lines = ast.parse(text), text.splitlines()
    sites = sorted(extract_source(text.encode(), "python/sglang/m.py"), key=lambda site: site.line)
    codes = [site_code(tree, lines, site) for site in sites]
    assert [code.statement for code in codes] == ["raise KeyError(name)", "raise ValueError(f'bad {name}')"]
    assert {code.signature for code in codes} == {"def inner(name: str, strict: bool=True)"}


@pytest.mark.real
def test_stale_fixture_is_listed_and_fails_unless_allowed(capsys):
    code, out, err = run(capsys, "check", "--content", str(DATA / "stale"))
    path = DATA / "stale" / "errors" / f"{KV4}.yaml"
    assert code == 3
    assert (
        f"{path}: stale: written for the code at v0.5.22; the code changed by v0.5.23; "
        f"re-read it, then run `errorkb review {KV4}`"
    ) in err.splitlines()
    assert out.splitlines()[0] == "coverage: 1/19495 errors curated (0.01%)"
    code, _, _ = run(capsys, "check", "--content", str(DATA / "stale"), "--allow-stale")
    assert code == 0


@pytest.mark.real
def test_orphaned_fixture_reports_unknown_and_moved_ids(capsys):
    code, _, err = run(capsys, "check", "--content", str(DATA / "orphaned"))
    folder = DATA / "orphaned" / "errors"
    assert code == 3
    lines = err.splitlines()
    assert (
        f"{folder / '0123456789abcdef.yaml'}: orphaned: 0123456789abcdef is neither raised upstream nor in the "
        "ledger; check the id against `errorkb extract` (the file is kept)"
    ) in lines
    assert (
        f"{folder / 'fedcba9876543210.yaml'}: orphaned: fedcba9876543210 was reworded and is now {KV4}; "
        f"move the text to {folder / (KV4 + '.yaml')} and review it"
    ) in lines
    assert (folder / "0123456789abcdef.yaml").exists()


@pytest.mark.real
def test_invalid_fixture_fails_with_every_problem(capsys):
    code, _, err = run(capsys, "check", "--content", str(DATA / "invalid"))
    assert code == 1
    assert "'mesage': unknown field; did you mean 'message'?" in err
    assert err.splitlines()[-1].startswith("check: 1 files, 7 problems, 1 orphaned, 0 stale;")


@pytest.mark.real
def test_review_restamps_in_place_keeping_comments(tmp_path, capsys):
    shutil.copytree(DATA / "stale", tmp_path / "content")
    path = tmp_path / "content" / "errors" / f"{KV4}.yaml"
    before = path.read_text()
    code, _, err = run(capsys, "review", KV4, "--content", str(tmp_path / "content"))
    assert code == 0, err
    after = path.read_text()
    changed = [(old, new) for old, new in zip(before.splitlines(), after.splitlines()) if old != new]
    assert len(changed) == 2
    assert changed[0][0] == 'fingerprint: "0123456789abcdef"' and changed[0][1].startswith('fingerprint: "')
    assert changed[1] == ("written_for: v0.5.22", 'written_for: "v0.5.23"')
    assert after.startswith("# A minimal valid entry")
    code, _, _ = run(capsys, "check", "--content", str(tmp_path / "content"))
    assert code == 0


@pytest.mark.real
def test_scaffold_writes_once_and_refuses_to_overwrite(tmp_path, capsys):
    content = tmp_path / "content"
    code, _, err = run(capsys, "scaffold", KV4, "--content", str(content))
    assert code == 0, err
    path = content / "errors" / f"{KV4}.yaml"
    text = path.read_text()
    assert "#   at python/sglang/srt/arg_groups/kv_cache_hook.py:318 in handle_kv4_compatibility" in text
    assert '#     when not get_platform().is_cuda' in text
    assert 'message: "KV4 is not tested on non-CUDA platforms."' in text
    path.write_text(text + "# mine\n")
    code, _, err = run(capsys, "scaffold", KV4, "--content", str(content))
    assert code == 1
    assert err == f"errorkb: {path}: already exists; edit it, or run `errorkb review {KV4}` after a re-read\n"
    assert path.read_text().endswith("# mine\n")
    code, _, err = run(capsys, "check", "--content", str(content))
    assert code == 1
    assert f"{path}:16: 'explanation': must not be empty" in err.splitlines()


@pytest.mark.real
def test_scaffold_unknown_id(tmp_path, capsys):
    code, _, err = run(capsys, "scaffold", "0123456789abcdef", "--content", str(tmp_path))
    assert code == 1
    assert err.startswith("errorkb: 0123456789abcdef: no such error at v0.5.23")
    assert not (tmp_path / "errors").exists()


MODULE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/cache.py": """\
        def check(dtype: str) -> None:
            if dtype == "fp4":
                raise ValueError("Unsupported KV cache dtype.")
        """,
}


def test_git_history_edit_marks_stale_and_line_moves_do_not(tmp_path, capsys):
    moved = {"python/sglang/srt/cache.py": "import os\n\n\n" + textwrap.dedent(MODULE["python/sglang/srt/cache.py"])}
    guarded = {"python/sglang/srt/cache.py": MODULE["python/sglang/srt/cache.py"].replace('== "fp4"', 'in ("fp4", "int4")')}
    first, second, third = make_repo(tmp_path / "repo", [MODULE, moved, guarded])
    content, cache = tmp_path / "content", tmp_path / "cache"

    def errorkb(command: str, *argv: str, at: str) -> tuple[int, str]:
        source = f"git:{tmp_path / 'repo'}@{at}"
        code = main([command, *argv, "--source", source, "--content", str(content), "--cache-dir", str(cache)])
        return code, capsys.readouterr().err

    error = error_id("sgl-project/sglang", "ValueError", "Unsupported KV cache dtype.")
    assert errorkb("scaffold", error, at=first)[0] == 0
    path = content / "errors" / f"{error}.yaml"
    text = path.read_text()
    text = text.replace("explanation: |\n", "explanation: |\n  Only fp16 and fp8 caches exist.\n")
    text = text.replace("  - \n", "  - Asking for an fp4 cache.\n")
    text = text.replace("  - title: \n    body: |\n", "  - title: Use fp8\n    body: |\n      Use fp8.\n")
    text = text.replace("example_fix:\n  before: |\n\n  after: |\n\n", "")
    path.write_text(text)
    reviewed(content, error)
    code, err = errorkb("check", at=first)
    assert code == 0, err
    code, err = errorkb("check", at=second)
    assert code == 0, err
    code, err = errorkb("check", at=third)
    assert code == 3
    assert f"{path}: stale: written for the code at {first}" in err


@pytest.mark.real
def test_the_repositorys_curated_entries_pass_check(capsys):
    content = Path(__file__).parent.parent / "content"
    assert len(list((content / "errors").glob("*.yaml"))) >= 60
    code, out, err = run(capsys, "check", "--content", str(content))
    assert code == 0, err
    assert out.startswith("coverage: ")
    assert " 0 problems, 0 orphaned, 0 stale;" in err


@pytest.mark.real
def test_stale_revisions_for_the_build_name_the_revision_written_for(sglang):
    from generator.audit import stale_revisions
    from generator.config import Config
    from generator.content import load_curated
    from generator.model import group_sites
    from generator.upstream import open_source

    source = open_source("pypi:sglang==0.5.23", Config(), conftest.test_cache_dir())
    entries = {entry.id: entry for entry in group_sites(sglang.sites, "sgl-project/sglang")}
    assert stale_revisions(load_curated(DATA / "stale"), entries, source) == {KV4: "v0.5.22"}
    real = load_curated(Path(__file__).parent.parent / "content")
    assert stale_revisions(real, entries, source) == {}


def test_evidence_is_checked_by_its_quote_and_linked_where_the_quote_is_now(tmp_path, capsys):
    """Each evidence quote must be in its file at the pinned revision (white space aside): a
    missing one fails `check` naming the claim it backed. The page and the API document link
    each quote's line as found at the revision built, even after upstream moved it."""
    moved = {"python/sglang/srt/cache.py": "import os\n\n\n" + textwrap.dedent(MODULE["python/sglang/srt/cache.py"])}
    first, second = make_repo(tmp_path / "repo", [MODULE, moved])
    content, cache = tmp_path / "content", tmp_path / "cache"
    error = error_id("sgl-project/sglang", "ValueError", "Unsupported KV cache dtype.")
    (content / "errors").mkdir(parents=True)
    entry = content / "errors" / f"{error}.yaml"
    entry.write_text(
        f'id: "{error}"\nexception: ValueError\nmessage: "Unsupported KV cache dtype."\n'
        "explanation: Only fp16 and fp8 caches exist.\nsolutions:\n  - title: Use fp8\n    body: Use fp8.\n"
        "reports:\n  - https://github.com/sgl-project/sglang/issues/1\n"
        "evidence:\n"
        "  - path: python/sglang/srt/cache.py\n    line: 2\n    quote: 'if dtype  ==\n      \"fp4\":'\n    claim: fp4 is refused\n"
    )

    def errorkb(command: str, *argv: str, at: str) -> tuple[int, str]:
        code = main([command, *argv, "--source", f"git:{tmp_path / 'repo'}@{at}", "--content", str(content), "--cache-dir", str(cache)])
        return code, capsys.readouterr().err

    assert errorkb("review", error, at=first)[0] == 0
    reviewed(content, error)
    code, err = errorkb("check", at=first)
    assert code == 0, err
    assert errorkb("build", "--out", str(tmp_path / "site"), at=second)[0] == 0
    document = json.loads((tmp_path / f"site/api/errors/{error}.json").read_text())
    url = f"https://github.com/sgl-project/sglang/blob/{second}/python/sglang/srt/cache.py#L5"
    assert document["evidence"] == [{"path": "python/sglang/srt/cache.py", "line": 5, "quote": 'if dtype  == "fp4":', "claim": "fp4 is refused", "url": url}]
    assert document["reports"] == ["https://github.com/sgl-project/sglang/issues/1"]
    page = (tmp_path / f"site/errors/{error}/index.html").read_text()
    assert "Why we say this" in page and f'<a href="{url}"><code>python/sglang/srt/cache.py:5</code></a>' in page
    assert "Reported in" in page and "https://github.com/sgl-project/sglang/issues/1" in page

    extra = "  - path: python/sglang/srt/cache.py\n    quote: 'if dtype == \"int4\":'\n    claim: int4 is refused too\n"
    entry.write_text(entry.read_text().replace("    claim: fp4 is refused\n", "    claim: fp4 is refused\n" + extra))
    code, err = errorkb("check", at=second)
    assert code == 1
    assert f"{entry}:" in err
    assert f"'evidence[1]': quote not found in python/sglang/srt/cache.py at {second} (it backs: int4 is refused too)" in err

    # A quote found, but said to be in a function the file does not define: a reader looking
    # for it finds nothing. One it defines passes.
    entry.write_text(entry.read_text().replace(extra, "").replace("    line: 2\n", "    function: Cache.check\n    line: 2\n"))
    code, err = errorkb("check", at=second)
    assert code == 1 and f"'evidence[0]': function 'Cache.check' is not defined in python/sglang/srt/cache.py at {second}" in err
    entry.write_text(entry.read_text().replace("function: Cache.check", "function: check"))
    code, err = errorkb("check", at=second)
    assert code == 0 and "0 problems" in err, err


@pytest.mark.real
def test_a_review_below_2_keeps_its_entry_from_passing_check(tmp_path, capsys):
    """Reviews live in content/reviews/<id>.yaml; an entry its independent reviewer scored
    below 2 fails check, as do a malformed review, one naming no entry, and an entry with none."""
    shutil.copytree(DATA / "stale", tmp_path / "content")
    content = tmp_path / "content"
    (content / "reviews" / f"{KV4}.yaml").write_text(
        f'id: "{KV4}"\nscore: 1\nreviewer: rev\nreasons:\n  - "python/sglang/srt/server_args.py:1: misses the usual cause"\n'
    )
    (content / "reviews" / "00000000000000aa.yaml").write_text('id: "00000000000000aa"\nscore: 5\n')
    code, _, err = run(capsys, "check", "--content", str(content), "--allow-stale")
    assert code == 1
    assert f"{content}/reviews/{KV4}.yaml:1: 'score': 1: an entry scored below 2 is not published" in err
    assert f"{content}/reviews/00000000000000aa.yaml:1: 'score': must be an integer from 0 to 3" in err
    assert f"{content}/reviews/00000000000000aa.yaml:1: 'id': no curated entry 00000000000000aa" in err
    (content / "reviews" / "00000000000000aa.yaml").unlink()
    (content / "reviews" / f"{KV4}.yaml").write_text((content / "reviews" / f"{KV4}.yaml").read_text().replace("score: 1", "score: 2"))
    code, _, err = run(capsys, "check", "--content", str(content), "--allow-stale")
    assert code == 0, err
    # Nothing unreviewed is published.
    (content / "reviews" / f"{KV4}.yaml").unlink()
    code, _, err = run(capsys, "check", "--content", str(content), "--allow-stale")
    assert code == 1
    assert f"{content}/errors/{KV4}.yaml:1: 'review': no independent review in {content}/reviews/{KV4}.yaml" in err


def test_a_scaffold_of_a_message_over_several_lines_is_valid_yaml():
    """Upstream's messages can span lines; every line of them stays a comment."""
    from ruamel.yaml import YAML

    from generator.authoring import scaffold_text
    from generator.model import Upstream, group_sites

    code = 'def f(x):\n    if x.a:\n        raise ValueError("first line\\nsecond line")\n'
    sites = extract_source(code.encode(), "python/sglang/srt/m.py")
    (entry,) = group_sites(sites, "o/r")
    text = scaffold_text(entry, "0123456789abcdef", Upstream("o/r", "git:x@y", "y", "2026-01-01T00:00:00Z"))
    assert "\n#       second line" in text
    assert YAML(typ="safe").load(text)["id"] == entry.id


@pytest.mark.real
def test_supersedes_names_only_retired_ids_of_the_ledger(tmp_path, capsys):
    """`supersedes` may only name retired ids of the ledger: check says which others are not,
    with the file and line, as the build would refuse them."""
    import shutil

    root = Path(__file__).parent.parent / "content"
    shutil.copytree(root / "ledger", tmp_path / "ledger")
    (tmp_path / "errors").mkdir()
    text = (root / "errors" / f"{KV4}.yaml").read_text()
    from generator.history import load_ledger

    retired = next(r.id for r in sorted(load_ledger(root).values(), key=lambda r: r.id) if r.status == "retired")
    (tmp_path / "errors" / f"{KV4}.yaml").write_text(text + f"supersedes:\n  - \"{retired}\"\n  - \"0123456789abcdef\"\n  - \"{KV4}\"\n")
    code, _, err = run(capsys, "check", "--content", str(tmp_path))
    path = tmp_path / "errors" / f"{KV4}.yaml"
    problems = [line for line in err.splitlines() if "'supersedes'" in line]
    line = text.count("\n") + 1
    assert problems == [
        f"{path}:{line}: 'supersedes': 0123456789abcdef is not a retired id of the ledger (unknown)",
        f"{path}:{line}: 'supersedes': {KV4} is not a retired id of the ledger (active)",
    ]
    assert code == 1


class _OneFile:
    """A source of one file, as `QuotedFiles` reads it."""

    def __init__(self, text: str) -> None:
        from generator.model import SourceFile

        self.file, self.text = SourceFile("python/sglang/a.py", "0" * 40), text

    def files(self):
        return (self.file,)

    def read(self, file) -> bytes:
        return self.text.encode()


def test_a_quote_is_found_on_the_line_it_starts_on_whatever_the_white_space_and_blank_lines():
    from generator.audit import QuotedFiles
    from generator.model import Evidence

    text = "x = 1\n\n\n   if  dtype ==\n\n        'fp4':\n        raise ValueError('fp4')\n\nif dtype == 'fp4':\n    pass\n"
    quoted = QuotedFiles(_OneFile(text))

    def line(quote: str, near: int | None = None) -> int | None:
        return quoted.find(Evidence(path="python/sglang/a.py", quote=quote, line=near))

    assert line("if dtype == 'fp4':") == 4  # across a blank line, the first of two
    assert line("if dtype == 'fp4':", near=9) == 9  # the one nearest the line given
    assert line("'fp4':") == 6  # after two blank lines, not on one
    assert line("raise ValueError('fp4')\nif") == 7
    assert line("x=1") == 1
    assert line("not in the file") is None
