"""Families of errors: what a match block claims, which family explains an error, how `check`
reports conflicts and empty families, and how a member's page and document show the text."""

from __future__ import annotations

import dataclasses
import json
import textwrap

import jsonschema
import pytest

from generator import api
from generator.build import build, inputs_of
from generator.cli import main
from generator.config import Config
from generator.families import FamilyState, assign, claims, conflict_lines, members
from generator.model import ErrorEntry, Family, FamilyMatch, Site, Solution, Template, error_id
from generator.schema import parse_family
from tests.conftest import make_repo, reviewed
from tests.test_render import UPSTREAM, article, page

# -- Matching --------------------------------------------------------------------------------------


def entry(
    message: str | None, exception="ValueError", path="python/sglang/srt/models/llama.py", function="LlamaAttention.__init__",
    kind="raise", more=(), condition=None, guards=(),
) -> ErrorEntry:
    template = Template((message,)) if message is not None else None
    sites = tuple(
        Site(kind, exception, template, p, 3, 3, f, guards, (), condition, 1, 5) for p, f in ((path, function), *more)
    )
    return ErrorEntry("0" * 15 + "1", kind, exception, template, sites, message)


DIVISIBLE = entry("num_heads must be divisible by tp_size")

CLAIMED = [
    pytest.param(FamilyMatch(exceptions=("ValueError",)), DIVISIBLE, id="exception"),
    pytest.param(FamilyMatch(exceptions=("RuntimeError", "ValueError")), DIVISIBLE, id="one-of-exceptions"),
    pytest.param(FamilyMatch(message=r"divisible by \w+_size"), DIVISIBLE, id="message-regex"),
    pytest.param(FamilyMatch(paths=("python/sglang/srt/models/*",)), DIVISIBLE, id="path-glob-crosses-folders"),
    pytest.param(FamilyMatch(functions=("*Attention.__init__",)), DIVISIBLE, id="function-glob"),
    pytest.param(FamilyMatch(exceptions=("ValueError",), scopes=("product",), kinds=("raise",), has_message=True), DIVISIBLE, id="all-criteria"),
    pytest.param(FamilyMatch(kinds=("assert",), has_message=False), entry(None, "AssertionError", kind="assert"), id="bare-assert"),
    pytest.param(FamilyMatch(condition=r"heads % tp_size"), entry(None, "AssertionError", kind="assert", condition="self.heads % tp_size == 0"), id="assert-condition"),
    pytest.param(FamilyMatch(condition=r"heads % tp_size"), entry("bad", guards=("x", "heads % tp_size")), id="guard-condition"),
    pytest.param(
        FamilyMatch(paths=("python/sglang/srt/models/*", "python/sglang/srt/layers/*")),
        entry("x must be divisible by tp_size", more=(("python/sglang/srt/layers/linear.py", "f"),)),
        id="every-location-matches-some-glob",
    ),
]

NOT_CLAIMED = [
    pytest.param(FamilyMatch(exceptions=("RuntimeError",)), DIVISIBLE, id="other-exception"),
    pytest.param(FamilyMatch(message="^divisible"), DIVISIBLE, id="regex-anchored-elsewhere"),
    pytest.param(FamilyMatch(message="."), entry(None), id="no-text-never-matches-a-message"),
    pytest.param(FamilyMatch(paths=("python/sglang/srt/layers/*",)), DIVISIBLE, id="other-path"),
    pytest.param(FamilyMatch(functions=("Llama*",)), entry("m", function="load_weights"), id="other-function"),
    pytest.param(FamilyMatch(scopes=("test",)), DIVISIBLE, id="other-scope"),
    pytest.param(FamilyMatch(condition="tp_size"), DIVISIBLE, id="no-condition"),
    pytest.param(FamilyMatch(has_message=False), DIVISIBLE, id="has-a-message"),
    pytest.param(
        FamilyMatch(paths=("python/sglang/srt/models/*",)),
        entry("x must be divisible by tp_size", more=(("python/sglang/srt/server_args.py", "f"),)),
        id="one-location-elsewhere",
    ),
]


@pytest.mark.parametrize(("match", "error"), CLAIMED)
def test_a_family_claims_an_error_when_every_criterion_holds(match, error):
    assert claims(match, error)


@pytest.mark.parametrize(("match", "error"), NOT_CLAIMED)
def test_a_family_does_not_claim_an_error_when_a_criterion_fails(match, error):
    assert not claims(match, error)


def family(name: str, priority: int | None = None, explanation: str = "Shared cause.", **match) -> Family:
    return Family(
        name=name,
        path=f"content/families/{name}.yaml",
        title=f"The {name} family",
        match=FamilyMatch(**match),
        explanation=explanation,
        solutions=(Solution("Fix it", "Do so."),),
        priority=priority,
    )


A, B = entry("a must be divisible by tp_size"), dataclasses.replace(entry("b is not supported"), id="0" * 15 + "2")


@pytest.mark.parametrize(
    ("families", "explained", "conflicts"),
    [
        pytest.param([family("div", message="divisible")], {A.id: "div"}, [], id="one-family"),
        pytest.param(
            [family("div", 2, message="divisible"), family("value", 1, exceptions=("ValueError",))],
            {A.id: "div", B.id: "value"},
            [],
            id="higher-priority-wins",
        ),
        pytest.param(
            [family("div", message="divisible"), family("value", exceptions=("ValueError",))],
            {A.id: "div", B.id: "value"},
            [("div", "value", A.id, 1)],
            id="no-priorities-conflict",
        ),
        pytest.param(
            [family("div", 1, message="divisible"), family("value", 1, exceptions=("ValueError",))],
            {A.id: "div", B.id: "value"},
            [("div", "value", A.id, 1)],
            id="equal-priorities-conflict",
        ),
        pytest.param(
            [family("div", 5, message="divisible"), family("value", exceptions=("ValueError",))],
            {A.id: "div", B.id: "value"},
            [("div", "value", A.id, 1)],
            id="only-one-priority-conflicts",
        ),
    ],
)
def test_each_error_gets_one_family_and_unresolved_claims_conflict(families, explained, conflicts):
    found = assign(families, [A, B])
    assert {error: f.name for error, f in found.by_error.items()} == explained
    assert [(c.first, c.second, c.example, c.count) for c in found.conflicts] == conflicts


def test_family_members_kept_between_builds_equal_members_worked_out_from_scratch():
    def at(error: str, message: str, path: str) -> ErrorEntry:
        return dataclasses.replace(entry(message, path=path), id=error)

    one, two = "python/sglang/srt/a.py", "python/sglang/srt/b.py"
    steps = [
        # (entries, blob of each file, families)
        ([at("1", "x must be divisible by tp", one), at("2", "y not supported", two)], {one: "a1", two: "b1"}, [family("div", message="divisible")]),
        # b.py changed: its error now reads "divisible" and another appears in it.
        ([at("1", "x must be divisible by tp", one), at("2", "y divisible by dp", two), at("3", "z", two)], {one: "a1", two: "b2"}, [family("div", message="divisible")]),
        # a.py gone, and a family added while another's match block is edited.
        ([at("2", "y divisible by dp", two), at("3", "z", two)], {two: "b2"}, [family("div", message="by dp"), family("any", exceptions=("ValueError",))]),
        # Nothing of the upstream changed; a family dropped.
        ([at("2", "y divisible by dp", two), at("3", "z", two)], {two: "b2"}, [family("any", exceptions=("ValueError",))]),
    ]
    state = FamilyState()
    for entries, blobs, families in steps:
        assert state.update(families, tuple(entries), blobs) == members(families, entries)


def test_an_error_with_its_own_entry_shows_no_family_and_an_empty_family_is_a_failure():
    families = [family("div", message="divisible"), family("gone", message="never raised")]
    found = assign(families, [A, B], curated={A.id})
    assert found.by_error == {}
    assert found.members == {"div": (A.id,), "gone": ()}
    assert conflict_lines(found, {f.name: f for f in families}) == [
        ("content/families/gone.yaml", "matches no error: widen or fix its match block, or remove the file")
    ]


# -- The file --------------------------------------------------------------------------------------

VALID = """\
name: divisible
title: A size must divide evenly across GPUs
match:
  exception: [ValueError, AssertionError]
  message: "divisible by (tp_size|the tensor parallel size)"
  path: python/sglang/srt/models/*
priority: 2
explanation: |
  The model's shape does not split evenly over your GPUs.
solutions:
  - title: Pick another tensor-parallel size
    body: Use `--tp-size` with a divisor of the head count.
"""


def test_a_valid_family_file_gives_its_record():
    parsed, problems = parse_family(VALID, "content/families/divisible.yaml")
    assert problems == []
    found = parsed.curated
    assert (found.name, found.priority) == ("divisible", 2)
    assert found.match == FamilyMatch(
        exceptions=("ValueError", "AssertionError"),
        message="divisible by (tp_size|the tensor parallel size)",
        paths=("python/sglang/srt/models/*",),
    )


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        pytest.param(VALID.replace("name: divisible", "name: other"), ["1: 'name': 'other' does not match the file name divisible.yaml"], id="name"),
        pytest.param(VALID.replace("  path:", "  paths:"), ["6: 'match.paths': unknown field; did you mean 'path'?"], id="unknown-match-field"),
        pytest.param(VALID.replace("priority: 2", "priorty: 2"), ["7: 'priorty': unknown field; did you mean 'priority'?"], id="unknown-field"),
        pytest.param(VALID.replace('message: "divisible by (', 'message: "divisible by (('), ["5: 'match.message': not a regular expression: missing ), unterminated subpattern at position 13"], id="bad-regex"),
        pytest.param(
            VALID.replace("  exception: [ValueError, AssertionError]\n", "  scope: product\n").replace('  message: "divisible by (tp_size|the tensor parallel size)"\n', "").replace("  path: python/sglang/srt/models/*\n", ""),
            ["3: 'match': give at least one of exception, message, condition, path, function"],
            id="match-nothing",
        ),
    ],
)
def test_every_problem_of_a_family_file_is_named_with_its_line(text, problems):
    parsed, found = parse_family(text, "content/families/divisible.yaml")
    assert parsed is None
    assert [f"{p.line}: '{p.field}': {p.problem}" for p in found] == problems


def test_the_readme_family_example_is_a_valid_family():
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "content" / "README.md").read_text()
    example = readme.split("## Families", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    parsed, problems = parse_family(example, "content/families/attention-heads-tp.yaml")
    assert problems == []
    assert parsed.curated.match.paths == ("python/sglang/srt/models/*",)


# -- Pages and documents ---------------------------------------------------------------------------


def test_a_member_page_shows_its_family_text_escaped_and_its_document_says_not_curated():
    member = dataclasses.replace(
        article(["bad size"]), family=family("divisible", explanation="Heads <script>alert(1)</script> split **unevenly**.")
    )
    html = page(member)
    assert 'About this family of errors: <a href="../../families/divisible/">The divisible family</a>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "<strong>unevenly</strong>" in html
    assert "No explanation has been written for this error yet" not in html
    assert "Fix it" in html
    document = api.error_document(member, UPSTREAM)
    jsonschema.Draft202012Validator(api.error_schema("https://kb.example.org/")).validate(document)
    assert document["curated"] is False and document["explanation"] is None
    assert document["family"]["name"] == "divisible" and document["family"]["solutions"] == [{"title": "Fix it", "body": "Do so."}]
    plain = api.error_document(article(["bad size"]), UPSTREAM)
    assert plain["family"] is None


# -- check and build on a throwaway repository -----------------------------------------------------

MODULE = {
    "python/sglang/srt/models/llama.py": """\
        def check_heads(heads, tp_size):
            if heads % tp_size:
                raise ValueError(f"heads {heads} must be divisible by tp_size {tp_size}")
            if heads < 1:
                raise ValueError(f"heads must be positive, got {heads}")
        """,
    "python/sglang/srt/sampling.py": """\
        def check_sampling(top_p):
            if top_p > 1:
                raise ValueError(f"top_p must be at most 1, got {top_p}")
        """,
}
DIVISIBLE_ID = error_id("sgl-project/sglang", "ValueError", "heads {} must be divisible by tp_size {}")


def family_file(name: str, match: str, explanation: str = "The heads do not split evenly.", extra: str = "") -> str:
    return textwrap.dedent(
        f"""\
        name: {name}
        title: Sizes that must divide evenly
        match:
        {textwrap.indent(match, "  ")}
        explanation: "{explanation}"
        solutions:
          - title: Change the tensor-parallel size
            body: Pick a tensor-parallel size that divides the head count.
        """
    ) + extra


def test_check_lists_families_and_fails_on_conflicts_and_empty_families(tmp_path, capsys):
    (sha,) = make_repo(tmp_path / "repo", [MODULE])
    content = tmp_path / "content"
    (content / "families").mkdir(parents=True)
    (content / "families" / "divisible.yaml").write_text(family_file("divisible", 'message: "divisible by tp_size"'))
    (content / "families" / "models.yaml").write_text(family_file("models", "path: python/sglang/srt/models/*"))
    for name in ("divisible", "models", "gone"):
        reviewed(content, name, family=True)

    def check(*argv: str) -> tuple[int, str, str]:
        code = main(["check", *argv, "--source", f"git:{tmp_path / 'repo'}@{sha}", "--content", str(content), "--cache-dir", str(tmp_path / "cache")])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = check()
    assert code == 1
    assert (
        f"{content}/families/divisible.yaml:3: 'match': claims 1 errors that family 'models' ({content}/families/models.yaml) "
        f"also claims, e.g. {DIVISIBLE_ID}: give both different priorities, or narrow one's match"
    ) in err.splitlines()
    assert out.splitlines()[:2] == ["coverage: 0/3 errors curated (0.00%)", "  explained by an entry: 0, by a family: 2, neither: 1"]
    assert out.splitlines()[-2:] == [
        "family divisible: 1 members, explains 1 product errors",
        "family models: 2 members, explains 1 product errors",
    ]

    (content / "families" / "divisible.yaml").write_text(family_file("divisible", 'message: "divisible by tp_size"', extra="priority: 2\n"))
    (content / "families" / "models.yaml").write_text(family_file("models", "path: python/sglang/srt/models/*", extra="priority: 1\n"))
    (content / "families" / "gone.yaml").write_text(family_file("gone", 'message: "no such message"'))
    code, out, err = check("--json")
    assert code == 1
    assert [line for line in err.splitlines() if "families/" in line] == [
        f"{content}/families/gone.yaml:3: 'match': matches no error: widen or fix its match block, or remove the file"
    ]
    report = json.loads(out)
    assert {f["name"]: (len(f["members"]), len(f["explains"])) for f in report["families"]} == {"divisible": (1, 1), "gone": (0, 0), "models": (2, 1)}
    assert (report["coverage"]["family"], report["coverage"]["neither"]) == (2, 1)

    (content / "families" / "gone.yaml").unlink()
    (content / "families" / "models.yaml").write_text(
        family_file("models", "path: python/sglang/srt/models/*", extra="priority: 1\nevidence:\n  - path: python/sglang/srt/models/llama.py\n    quote: if heads % tp_size = 0\n")
    )
    code, out, err = check()
    assert code == 1
    assert f"{content}/families/models.yaml:11: 'evidence[0]': quote not found in python/sglang/srt/models/llama.py at {sha}" in err

    # A family nobody reviewed is not published, and a review scoring it below 2 keeps it out.
    (content / "family-reviews" / "models.yaml").unlink()
    (content / "family-reviews" / "divisible.yaml").write_text((content / "family-reviews" / "divisible.yaml").read_text().replace("score: 3", "score: 1"))
    code, out, err = check()
    assert code == 1
    assert f"{content}/families/models.yaml:1: 'review': no independent review in {content}/family-reviews/models.yaml; unreviewed, this family is not published (content/README.md: Reviews)" in err.splitlines()
    assert f"{content}/family-reviews/divisible.yaml:1: 'score': 1: a family scored below 2 is not published; fix it and have it reviewed again, or remove it" in err.splitlines()


def files_of(site):
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def test_a_family_text_change_rewrites_exactly_its_members_and_a_rebuild_equals_a_fresh_build(tmp_path):
    (sha,) = make_repo(tmp_path / "up", [MODULE])
    content = tmp_path / "content"
    (content / "families").mkdir(parents=True)
    path = content / "families" / "divisible.yaml"
    path.write_text(family_file("divisible", 'message: "divisible by tp_size"'))

    def run(out: str, cache: str = "cache"):
        inputs = inputs_of(Config(), f"git:{tmp_path / 'up'}@{sha}", tmp_path / out, content, tmp_path / cache)
        return build(Config(), inputs, jobs=1)

    run("site")
    before = files_of(tmp_path / "site")
    member = f"errors/{DIVISIBLE_ID}/index.html"
    assert json.loads(before[f"api/errors/{DIVISIBLE_ID}.json"])["family"]["explanation"] == "The heads do not split evenly."
    assert json.loads(before["api/coverage.json"])["family"] == 1
    assert '1 more are explained by\nthe <a href="../families/">family of errors</a>' in before["coverage/index.html"].decode()
    assert 'About this family of errors: <a href="../../families/divisible/">Sizes that must divide evenly</a>' in before[member].decode()
    family_page = before["families/divisible/index.html"].decode()
    assert f'<li><a href="../../errors/{DIVISIBLE_ID}/">heads {{heads}} must be divisible by tp_size {{tp_size}}</a></li>' in family_page
    assert "The heads do not split evenly." in family_page and "Sizes that must divide evenly" in before["families/index.html"].decode()

    path.write_text(family_file("divisible", 'message: "divisible by tp_size"', explanation="The heads must split evenly over the GPUs."))
    run("site")
    after = files_of(tmp_path / "site")
    changed = {p for p in after if after[p] != before.get(p)}
    per_error = {p for p in changed if p.startswith(("errors/", "api/errors/")) and p != "api/errors/index.json"}
    assert per_error == {member, f"api/errors/{DIVISIBLE_ID}.json"}
    assert "families/divisible/index.html" in changed
    assert "The heads must split evenly over the GPUs." in after[member].decode()

    run("fresh", cache="fresh-cache")
    assert files_of(tmp_path / "fresh") == after


def test_a_family_page_shows_its_text_escaped_and_links_its_members():
    from generator import render

    hostile = family("divisible", explanation="Heads <img src=x onerror=alert(1)> split **unevenly**.")
    files = dict(render.render_families({"divisible": (hostile, [("0123456789abcdef", "bad <size>")])}, render.OutputInfo(UPSTREAM, "https://kb.example.org/", "https://example.org/report")))
    page = files["families/divisible/index.html"].decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    assert '<li><a href="../../errors/0123456789abcdef/">bad &lt;size&gt;</a></li>' in page
    assert '<a href="divisible/">The divisible family</a> <span class="count">1</span>' in files["families/index.html"].decode()
