"""`check --run-examples` against a toy `sglang` (no torch): the child runner, the judging of
before and after, the record and the badge it gives a page."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from generator import examples
from generator.cli import main
from generator.content import load_curated
from generator.extract import extract_source
from generator.model import ExampleFix, group_sites
from tests.conftest import make_repo, reviewed
from tests.test_render import article, curated_with, page

CONFIGS = Path(__file__).parent / "data" / "model_configs"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"

# The toy's resolution, in upstream's layout: raises the entry's error for `fp4` at
# line 10, another error for `int2` at line 12, warns for `int8` at line 14, and its check after
# resolution (the launcher's `check_server_args`) raises for `int3`; nothing otherwise.
SERVER_ARGS = """\
import os
import warnings

class ServerArgs:
    def __init__(self, argv):
        self.argv = argv

    def resolve_once(self):
        if "fp4" in self.argv and not os.environ.get("TOY_ALLOW_FP4"):
            raise ValueError(f"Unsupported KV cache dtype {self.argv[-3]}.")
        if "int2" in self.argv:
            raise ValueError("Something else went wrong.")
        if "int8" in self.argv:
            warnings.warn(f"Toy int8 cache {self.argv[-3]} is slow.")

    def check_server_args(self):
        if "int3" in self.argv:
            raise ValueError("Checked after resolution.")

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--kv-cache-dtype", type=str)
        parser.add_argument("--device", type=str)


def prepare_server_args(argv):
    return ServerArgs(argv)
"""
RAISES_AT = 10
OTHER_AT = 12
WARNS_AT = 14
MESSAGE = "Unsupported KV cache dtype {self.argv[-3]}."


def toy_entry():
    sites = extract_source(SERVER_ARGS.encode(), "python/sglang/srt/server_args.py")
    (entry,) = [e for e in group_sites(sites, "sgl-project/sglang") if e.message == MESSAGE]
    return entry


def toy_python(tmp_path: Path) -> Path:
    """An interpreter whose `sglang` is the toy: this Python with the toy on its path."""
    package = tmp_path / "toy" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (package / "srt" / "__init__.py").write_text("")
    (package / "srt" / "server_args.py").write_text(SERVER_ARGS)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={package.parent} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def command(*argv: str, **environment: str) -> examples.Command:
    return examples.Command(tuple(sorted(environment.items())), argv)


# -- Reading commands ------------------------------------------------------------------------------


def test_commands_replace_models_keep_variables_and_add_the_cpu():
    example = ExampleFix(
        f"python -m sglang.launch_server --model-path {LLAMA} --kv-cache-dtype nvfp4\n",
        f"TOY=1 sglang serve --model-path={LLAMA} --device mps && curl localhost:30000\n",
    )
    commands = examples.example_commands(example, CONFIGS)
    folder = str(CONFIGS / "meta-llama--Llama-3.1-8B-Instruct")
    assert commands == examples.ExampleCommands(
        command("--model-path", folder, "--kv-cache-dtype", "nvfp4", "--device", "cpu"),
        command("--model-path", folder, "--device", "mps", TOY="1"),
    )


@pytest.mark.parametrize(
    ("example", "reason"),
    [
        pytest.param(ExampleFix("x", "y", needs=("cuda", "multi-gpu")), "needs: cuda, multi-gpu", id="needs"),
        pytest.param(ExampleFix("import sglang", "import sglang", "python"), "a python example, not a server command", id="python"),
        pytest.param(
            ExampleFix("curl localhost:30000/generate", "curl localhost:30000/generate"),
            "before is not a `python -m sglang.launch_server` command",
            id="curl",
        ),
        pytest.param(
            ExampleFix("python -m sglang.launch_server --model-path org/unknown", "python -m sglang.launch_server --model-path org/unknown"),
            "no config for model org/unknown",
            id="no-config",
        ),
        pytest.param(
            ExampleFix(f"python -m sglang.launch_server --model-path {LLAMA}", "pip install sglang[http2]"),
            "after is not a `python -m sglang.launch_server` command",
            id="after-no-server",
        ),
    ],
)
def test_examples_that_cannot_run_say_why(example, reason):
    assert examples.example_commands(example, CONFIGS) == reason


def test_every_model_config_is_a_json_object_naming_its_architecture():
    folders = sorted(CONFIGS.iterdir())
    assert len(folders) >= 10
    for folder in folders:
        config = json.loads((folder / "config.json").read_text())
        assert config["architectures"] and config["model_type"], folder.name


# -- Judging ---------------------------------------------------------------------------------------

FRAME = ("/venv/lib/python3.11/site-packages/sglang/srt/server_args.py", RAISES_AT, "resolve_once")


@pytest.mark.parametrize(
    ("resolution", "raises"),
    [
        pytest.param(examples.Resolution("ValueError", "Unsupported KV cache dtype fp4.", (FRAME,)), True, id="same"),
        pytest.param(examples.Resolution("RuntimeError", "Unsupported KV cache dtype fp4.", (FRAME,)), False, id="other-class"),
        pytest.param(examples.Resolution("ValueError", "Unsupported dtype fp4.", (FRAME,)), False, id="other-message"),
        pytest.param(examples.Resolution("ValueError", "Unsupported KV cache dtype fp4.", ((FRAME[0], 3, "f"),)), False, id="other-line"),
        pytest.param(examples.Resolution(None), False, id="no-error"),
    ],
)
def test_raises_entry_needs_class_message_and_location(resolution, raises):
    assert examples.raises_entry(toy_entry(), resolution) is raises


# -- End to end, through the child and `check` -----------------------------------------------------


def toy_content(tmp_path: Path, before: str, after: str) -> tuple[list[str], Path]:
    """A repo whose upstream is the toy, and a content folder with one scaffolded entry for the
    toy's error, whose example fix is `before` / `after`; the arguments `check` needs."""
    (sha,) = make_repo(tmp_path / "repo", [{"python/sglang/__init__.py": "", "python/sglang/srt/server_args.py": SERVER_ARGS}])
    content, cache = tmp_path / "content", tmp_path / "cache"
    argv = ["--source", f"git:{tmp_path / 'repo'}@{sha}", "--content", str(content), "--cache-dir", str(cache)]
    entry = toy_entry()
    assert main(["scaffold", entry.id, *argv]) == 0
    path = content / "errors" / f"{entry.id}.yaml"
    text = path.read_text()
    text = text.replace("explanation: |\n", "explanation: |\n  The toy has no fp4 cache.\n")
    text = text.replace("  - \n", "  - Asking for an fp4 cache.\n")
    text = text.replace("  - title: \n    body: |\n", "  - title: Use fp8\n    body: |\n      Use fp8.\n")
    text = text.replace("example_fix:\n  before: |\n\n  after: |\n\n", f"example_fix:\n  before: |\n    {before}\n  after: |\n    {after}\n")
    path.write_text(text)
    reviewed(content, entry.id)
    return argv, path


def run_check(capsys, argv: list[str], *extra: str) -> tuple[int, list[str]]:
    code = main(["check", "--run-examples", "--model-configs", str(CONFIGS), *argv, *extra])
    lines = capsys.readouterr().err.splitlines()
    return code, [line for line in lines if line.startswith("example")]


SERVE = f"python -m sglang.launch_server --model-path {LLAMA} --kv-cache-dtype"


def test_reproduced_example_is_recorded_and_badged_until_it_changes(tmp_path, capsys):
    argv, path = toy_content(tmp_path, f"{SERVE} fp4", f"{SERVE} fp8")
    python = toy_python(tmp_path)
    error = path.stem
    code, lines = run_check(capsys, argv, "--sglang-python", str(python), "--write")
    assert lines[0] == f"example {error}: reproduced; after: no error"
    assert code == 0, lines
    content = path.parent.parent
    record = json.loads((content / "reproduced.json").read_text())
    assert record[error]["sglang"] == "0.0.1" and record[error]["after"] == "no error"
    curated = load_curated(content)[error]
    assert curated.example_fix.reproduced_with == "0.0.1"
    assert "Reproduced with SGLang 0.0.1" in page(article([MESSAGE], curated))

    # A fresh run agrees with the record; an edited example loses the badge and the record fails check.
    assert run_check(capsys, argv, "--sglang-python", str(python))[0] == 0
    path.write_text(path.read_text().replace("fp8\n", "fp16\n"))
    assert load_curated(content)[error].example_fix.reproduced_with is None
    assert "Reproduced with" not in page(article([MESSAGE], load_curated(content)[error]))
    code, lines = run_check(capsys, argv, "--sglang-python", str(python))
    assert code == 4
    assert lines[-1].startswith(f"examples: {content / 'reproduced.json'} differs from this run for 1 entries ({error})")


def test_variables_of_the_command_reach_resolution(tmp_path, capsys):
    argv, path = toy_content(tmp_path, f"{SERVE} fp4", f"TOY_ALLOW_FP4=1 {SERVE} fp4")
    code, lines = run_check(capsys, argv, "--sglang-python", str(toy_python(tmp_path)))
    assert lines[0] == f"example {path.stem}: reproduced; after: no error"
    # Reproduced, but not yet in the record.
    assert code == 4


@pytest.mark.parametrize(
    ("before", "after", "line"),
    [
        pytest.param(
            "int2",
            "fp8",
            f"before raised another error (ValueError at python/sglang/srt/server_args.py:{OTHER_AT}: Something else went wrong.)",
            id="other-error",
        ),
        pytest.param("fp8", "fp8", "before did not raise", id="no-error"),
        pytest.param(
            "fp4",
            "fp4",
            f"after still raises (ValueError at python/sglang/srt/server_args.py:{RAISES_AT}: Unsupported KV cache dtype fp4.)",
            id="after-raises",
        ),
    ],
)
def test_failing_examples_say_how_and_fail_check(tmp_path, capsys, before, after, line):
    argv, path = toy_content(tmp_path, f"{SERVE} {before}", f"{SERVE} {after}")
    python = toy_python(tmp_path)
    code, lines = run_check(capsys, argv, "--sglang-python", str(python))
    assert lines[0] == f"example {path.stem}: {line}"
    assert code == 4
    code, again = run_check(capsys, argv, "--sglang-python", str(python), "--allow-failing-examples")
    assert again == lines
    assert code == 0


def test_without_sglang_examples_are_not_run_never_passed(tmp_path, capsys):
    argv, path = toy_content(tmp_path, f"{SERVE} fp4", f"{SERVE} fp8")
    missing = tmp_path / "no-venv" / "bin" / "python"
    code, lines = run_check(capsys, argv, "--sglang-python", str(missing), "--write")
    assert lines[0] == f"example {path.stem}: not run (venv could not be made: {missing} does not exist)"
    assert "examples: the record was not written: no example could run" in lines
    assert not (path.parent.parent / "reproduced.json").exists()
    assert code == 4
    # Without --write, nothing ran and nothing is recorded: no failure, and nothing passed.
    code, lines = run_check(capsys, argv, "--sglang-python", str(missing))
    assert lines[-1] == "examples: 1 entries with an example fix: 1 not run"
    assert code == 0


def test_a_python_without_sglang_is_reported(tmp_path):
    with pytest.raises(examples.ExampleVenvError, match="SGLang does not import in"):
        examples.resolve_all(Path(sys.executable), [command("--x")])


def test_the_child_resolves_in_one_process_and_restores_the_environment(tmp_path):
    python = toy_python(tmp_path)
    version, resolutions = examples.resolve_all(
        python, [command("--kv", "fp4", "x", "y", TOY_ALLOW_FP4="1"), command("--kv", "fp4", "x", "y")]
    )
    assert version == "0.0.1"
    assert resolutions[0].exception is None
    assert (resolutions[1].exception, resolutions[1].message) == ("ValueError", "Unsupported KV cache dtype fp4.")
    assert resolutions[1].frames[-1][1:] == (RAISES_AT, "resolve_once")
    assert "TOY_ALLOW_FP4" not in os.environ


def test_the_child_runs_the_launchers_check_after_resolution(tmp_path):
    _, (checked, passed) = examples.resolve_all(toy_python(tmp_path), [command("--kv", "int3", "x", "y"), command("--kv", "fp8", "x", "y")])
    assert (checked.exception, checked.message) == ("ValueError", "Checked after resolution.")
    assert checked.frames[-1][2] == "check_server_args"
    assert passed.exception is None


def test_the_pinned_requirements_name_sglang_and_torch():
    text = examples.REQUIREMENTS.read_text()
    assert examples.pinned_version() == "0.5.23"
    pins = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all("==" in line for line in pins), [line for line in pins if "==" not in line]
    assert "torch==2.14.1" in pins
    assert textwrap.dedent(text) == text


def test_json_report_lists_the_examples(tmp_path, capsys):
    argv, path = toy_content(tmp_path, f"{SERVE} fp4", f"{SERVE} fp8")
    code = main(["check", "--json", "--run-examples", "--model-configs", str(CONFIGS), *argv, "--sglang-python", str(toy_python(tmp_path))])
    report = json.loads(capsys.readouterr().out)
    assert report["examples"] == [{"id": path.stem, "outcome": "reproduced", "detail": "", "after": "no error", "sglang": "0.0.1"}]
    assert code == 4


def test_a_made_venv_is_reused_while_its_requirements_are_the_same(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("sglang==9.9.9\n")
    folder = tmp_path / "cache" / "sglang-venv" / "9.9.9"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    (folder / "errorkb-requirements.sha256").write_text(digest + "\n")
    assert examples.sglang_venv(tmp_path / "cache", requirements) == folder / "bin" / "python"


def test_requirements_without_a_pinned_sglang_make_no_venv(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.14.1\n")
    with pytest.raises(examples.ExampleVenvError, match="no `sglang==<version>` line"):
        examples.sglang_venv(tmp_path / "cache", requirements)
    assert not (tmp_path / "cache").exists()


def test_a_warning_entry_is_reproduced_by_its_warning_from_its_line(tmp_path):
    sites = extract_source(SERVER_ARGS.encode(), "python/sglang/srt/server_args.py")
    (entry,) = [e for e in group_sites(sites, "sgl-project/sglang") if e.kind == "warning"]
    _, (warned, quiet) = examples.resolve_all(toy_python(tmp_path), [command("--kv", "int8", "x", "y"), command("--kv", "fp8", "x", "y")])
    assert warned.exception is None
    assert [w[:2] for w in warned.warnings] == [("UserWarning", "Toy int8 cache int8 is slow.")]
    assert warned.warnings[0][3] == WARNS_AT
    assert examples.raises_entry(entry, warned) and not examples.raises_entry(entry, quiet)
    assert examples.judge(entry, warned, quiet) == (examples.REPRODUCED, "", "no error")


def test_example_options_need_run_examples(capsys):
    assert main(["check", "--write"]) != 0
    assert capsys.readouterr().err == "errorkb: --write needs --run-examples\n"


def test_a_bare_assert_is_reproduced_by_an_assertion_error_without_a_message_at_its_line():
    """A bare assert prints no message: the example's error is its class at its line, though
    the lookup knows the assert by its statement."""
    source = "def handle(cfg):\n    assert cfg.tp_size % cfg.attn_dp_size == 0\n"
    path = "python/sglang/srt/arg_groups/parallel_hook.py"
    (entry,) = group_sites(extract_source(source.encode(), path), "sgl-project/sglang")
    frame = ("/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/parallel_hook.py", 2, "handle")
    assert examples.raises_entry(entry, examples.Resolution("AssertionError", "", (frame,)))
    assert not examples.raises_entry(entry, examples.Resolution("AssertionError", "", (frame[:1] + (3, "handle"),)))
