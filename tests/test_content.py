"""Reading curated content: the schema, line-numbered problems, template keys."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from generator.content import load_curated, read_content, template_key
from generator.errors import ContentError
from generator.schema import curated_json_schema, parse_curated

DATA = Path(__file__).parent / "data" / "content"
KV4 = "78ce936e309db402"
PATH = f"content/errors/{KV4}.yaml"

VALID = f"""\
id: "{KV4}"
exception: RuntimeError
message: "KV4 is not tested on non-CUDA platforms."
explanation: |
  A 4-bit KV cache was requested off CUDA.
solutions:
  - title: Use fp8
    body: Pass `--kv-cache-dtype fp8_e4m3`.
"""


def problems_of(text: str, path: str = PATH) -> list[str]:
    curated, problems = parse_curated(textwrap.dedent(text), path)
    assert (curated is None) == bool(problems)
    return [str(problem) for problem in problems]


def test_valid_fixture_loads_every_field():
    curated = load_curated(DATA / "stale")
    entry = curated[KV4]
    assert entry.message == "KV4 is not tested on non-CUDA platforms."
    assert entry.solutions[0].title == "Use an fp8 KV cache"
    assert entry.solutions[0].body == "Pass `--kv-cache-dtype fp8_e4m3`.\n"
    assert entry.fingerprint == "0123456789abcdef"
    assert entry.written_for == "v0.5.22"
    assert entry.example_fix is None and entry.situations == () and entry.review is False


def test_invalid_fixture_lists_every_problem_at_once():
    with pytest.raises(ContentError) as raised:
        load_curated(DATA / "invalid")
    path = DATA / "invalid" / "errors" / "0000000000000001.yaml"
    assert str(raised.value).splitlines() == [
        f"{path}:1: 'id': expected a string, got a number (2); write it quoted",
        f"{path}:3: 'mesage': unknown field; did you mean 'message'?",
        f"{path}:5: 'explanation': must not be empty",
        f"{path}:6: 'situations': empty section: write at least one item or remove the field",
        f"{path}:8: 'solutions[0].title': expected a string, got a number (3)",
        f"{path}:9: 'solutions[0].body': broken or unsafe link near '[bad](': write [text](https://...)",
        f"{path}:10: 'tags[0]': 'Bad Tag' does not match ^[a-z0-9][a-z0-9-]*$",
    ]


def test_missing_folder_is_no_content(tmp_path):
    assert load_curated(tmp_path / "nothing") == {}


def test_valid_text_has_no_problems():
    assert problems_of(VALID) == []




INVALID = [
    pytest.param(
        VALID.replace(f'id: "{KV4}"', f"id: {KV4}"),
        [f'{PATH}:1: \'id\': write it quoted ("...") so YAML never reads it as a number'],
        id="id-unquoted",
    ),
    pytest.param(
        VALID.replace(f'"{KV4}"', '"0123456789abcdef"'),
        [
            f"{PATH}:1: 'id': 0123456789abcdef does not match the file name {KV4}.yaml",
            f"{PATH}:3: 'message': exception and message give id {KV4}, not 0123456789abcdef: "
            "copy the message from `errorkb extract` exactly",
        ],
        id="id-not-file-name",
    ),
    pytest.param(
        VALID.replace("non-CUDA", "non-ROCm"),
        [
            f"{PATH}:3: 'message': exception and message give id c7a2104dc492d424, not {KV4}: "
            "copy the message from `errorkb extract` exactly"
        ],
        id="message-not-the-id",
    ),
    pytest.param(
        VALID + "tgas: [kv-cache]\n",
        [f"{PATH}:9: 'tgas': unknown field; did you mean 'tags'?"],
        id="unknown-field",
    ),
    pytest.param(
        VALID.replace("  - title: Use fp8\n    body: Pass `--kv-cache-dtype fp8_e4m3`.\n", " []\n"),
        [f"{PATH}:6: 'solutions': empty section: write at least one item or remove the field"],
        id="no-solutions",
    ),
    pytest.param(
        VALID.replace("Pass `", "See [the docs](ftp://x) and pass `"),
        [
            f"{PATH}:8: 'solutions[0].body': link target 'ftp://x': use an https:// URL, "
            "a site path (/errors/<id>/) or #anchor"
        ],
        id="unsafe-link",
    ),
    pytest.param(
        VALID + "example_fix:\n  before: a\n",
        [f"{PATH}:9: 'example_fix.after': required field is missing"],
        id="example-fix-half",
    ),
    pytest.param(
        VALID + "review: yes please\n",
        [f"{PATH}:9: 'review': expected true or false, got a string"],
        id="wrong-type",
    ),
    pytest.param(
        VALID + "tags: [a\n",
        None,
        id="yaml-syntax",
    ),
    # YAML 1.2, as the files are written: `yes` is a word, not YAML 1.1's true.
    pytest.param(
        VALID + "review: yes\n",
        [f"{PATH}:9: 'review': expected true or false, got a string"],
        id="yes-is-a-string",
    ),
    pytest.param(
        VALID + 'printed:\n  - "{rank}: {error}"\n',
        [f"{PATH}:10: 'printed[0]': needs at least 8 characters of text outside its placeholders to be matched"],
        id="printed-without-text",
    ),
    pytest.param(
        VALID + "tags: [a]\ntags: [b]\n",
        [f"{PATH}:10: file: not valid YAML: while constructing a mapping found duplicate key 'tags'"],
        id="duplicate-key",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_invalid_text_names_line_field_and_problem(text, expected):
    found = problems_of(text)
    if expected is None:
        assert len(found) == 1 and found[0].startswith(f"{PATH}:") and "not valid YAML" in found[0]
    else:
        assert found == expected


def test_file_name_must_be_an_id():
    assert problems_of(VALID, "content/errors/kv4.yaml") == [
        "content/errors/kv4.yaml:1: file: file name must be the error's id: 16 lowercase hex digits and .yaml"
    ]


def test_non_yaml_files_are_reported(tmp_path):
    (tmp_path / "errors").mkdir()
    (tmp_path / "errors" / f"{KV4}.yml").write_text(VALID)
    files, problems = read_content(tmp_path)
    assert files == {}
    assert [p.problem for p in problems] == ["not a .yaml file; content files are named <id>.yaml"]


def test_json_schema_describes_every_field():
    schema = curated_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) >= {"id", "message", "explanation", "solutions", "example_fix", "fingerprint"}
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"id", "exception", "message", "explanation", "solutions"}


@pytest.mark.parametrize(
    ("message", "key"),
    [
        pytest.param("plain text", "plain text", id="plain"),
        pytest.param("got {x}  and\n{y!r:>3}", "got {} and {}", id="placeholders"),
        pytest.param("dict {{a}} is {d['k']}", "dict {{a}} is {}", id="escaped-braces"),
        pytest.param("set {{1, 2}} vs { {1, 2} }", "set {{1, 2}} vs {}", id="nested-braces"),
        pytest.param("{res=}, {res.text=!r}, {x[1:2]=:>4}, {a != b}", "res={}, res.text={}, x[1:2]={}, {}", id="self-documenting"),
        pytest.param("Not enough memory.{[ Current value: {v}]}", "Not enough memory.{}", id="optional-part"),
    ],
)
def test_template_key(message, key):
    assert template_key(message) == key


@pytest.mark.real
def test_template_key_of_every_real_message_is_the_extractors(sglang):
    templates = {site.template.text: site.template.key for site in sglang.sites if site.message is not None}
    assert len(templates) > 1000
    assert {text: template_key(text) for text in templates} == templates


def test_readme_example_is_a_valid_entry():
    readme = (Path(__file__).parent.parent / "content" / "README.md").read_text()
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    curated, problems = parse_curated(example, f"content/errors/{KV4}.yaml")
    assert problems == []
    assert curated is not None and curated.curated.example_fix.language == "shell"


def test_a_build_cache_skips_parsing_unchanged_files_and_parses_edited_ones(tmp_path, monkeypatch):
    import generator.schema as schema

    folder, cache = tmp_path / "content", tmp_path / "cache"
    (folder / "errors").mkdir(parents=True)
    (folder / "errors" / f"{KV4}.yaml").write_text(VALID)
    (folder / "errors" / "0000000000000001.yaml").write_text("id: [unclosed\n")
    first = read_content(folder, cache_dir=cache)
    assert read_content(folder) == first
    parsed = []
    real = schema.parse_curated
    monkeypatch.setattr(schema, "parse_curated", lambda text, path, repo: parsed.append(path) or real(text, path, repo))
    # Unchanged: valid entries and the problems of invalid files both come from the cache.
    assert read_content(folder, cache_dir=cache) == first and parsed == []
    (folder / "errors" / f"{KV4}.yaml").write_text(VALID.replace("Use fp8", "Use an fp8 KV cache"))
    files, problems = read_content(folder, cache_dir=cache)
    assert parsed == [str(folder / "errors" / f"{KV4}.yaml")]
    assert files[KV4].curated.solutions[0].title == "Use an fp8 KV cache" and problems == first[1]
