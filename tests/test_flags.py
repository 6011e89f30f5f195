"""Server arguments read from upstream's source, and curated text checked against them."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from generator.cli import main
from generator.flags import Arguments, arguments_of_module, markdown_flag_problems
from tests import conftest

FIELDS = '''\
from typing import List, Literal, Optional
import argparse
from sglang.srt.arg_groups.arg_utils import A, Arg
from sglang.srt.arg_groups.choices import ATTENTION_BACKENDS

DTYPES = ["auto", "fp8_e4m3"]


class Backend:
    FULL = "full"
    DISABLED = "disabled"
    ALL = (FULL, DISABLED)


class Model(msgspec.Struct):
    _NS_PATH = "model"
    model_path: A[str, Arg(help="Path.", aliases=["--model"])]
    kv_cache_dtype: A[str, Arg(help="dtype", choices=DTYPES + ["bf16"])] = "auto"
    attention_backend: A[Optional[str], Arg(help="b", choices=ATTENTION_BACKENDS)] = None
    graph: A[Optional[Literal["full", "disabled"]], Arg(help="g", choices=Backend.ALL)] = None
    mode: A[Literal["a", "b", None], "mode"] = "a"
    tp_size: A[int, Arg(help="tp", aliases=["--tensor-parallel-size"])] = 1
    enable_lora: A[bool, "switch"] = False
    overlap: A[bool, Arg(help="o", action=argparse.BooleanOptionalAction)] = True
    targets: A[Optional[List[str]], Arg(help="t", choices=["q_proj", "v_proj"])] = None
    gemm: A[str, Arg(help="g", cli_name="--fp8-gemm-backend", choices=sorted(set(DTYPES)))] = "auto"
    hidden: A[bool, Arg(no_cli=True)] = False
    computed: A[str, Arg(help="c", choices=[m.name for m in MODES])] = "x"
    plain: int = 3


class NotArguments:
    ignored: A[int, "not a namespace"] = 0


def add_cli_args(parser):
    parser.add_argument("--config", type=str)
    parser.add_argument("--disable-cuda-graph", action=DeprecatedStoreTrueAction)
    parser.add_argument("--monokernel-backend", action=DeprecatedStoreConstAction, nargs=None, choices=["amd"])
    parser.add_argument(*names, **kwargs)
'''


def resolve(module: str, name: str):
    return ("triton", "fa3") if (module, name) == ("sglang.srt.arg_groups.choices", "ATTENTION_BACKENDS") else None


@pytest.fixture(scope="module")
def arguments() -> Arguments:
    return Arguments.of(arguments_of_module(FIELDS, "python/sglang/srt/arg_groups/fields/model.py", resolve))


@pytest.mark.parametrize(
    ("flag", "field", "choices", "takes_value"),
    [
        pytest.param("--model", "model_path", None, True, id="alias"),
        pytest.param("--kv-cache-dtype", "kv_cache_dtype", ("auto", "fp8_e4m3", "bf16"), True, id="constant-plus-list"),
        pytest.param("--attention-backend", "attention_backend", ("triton", "fa3"), True, id="imported-constant"),
        pytest.param("--graph", "graph", ("full", "disabled"), True, id="class-attribute"),
        pytest.param("--mode", "mode", ("a", "b"), True, id="literal-type"),
        pytest.param("--tensor-parallel-size", "tp_size", None, True, id="int"),
        pytest.param("--enable-lora", "enable_lora", None, False, id="bool-switch"),
        pytest.param("--no-overlap", "overlap", None, False, id="boolean-optional"),
        pytest.param("--fp8-gemm-backend", "gemm", ("auto", "fp8_e4m3"), True, id="cli-name-and-sorted-set"),
        pytest.param("--computed", "computed", None, True, id="runtime-choices-left-open"),
        pytest.param("--disable-cuda-graph", "disable_cuda_graph", None, False, id="add-argument-switch"),
        pytest.param("--monokernel-backend", "monokernel_backend", ("amd",), True, id="add-argument-const-with-value"),
        pytest.param("--config", "config", None, True, id="add-argument"),
    ],
)
def test_arguments_read_from_source(arguments, flag, field, choices, takes_value):
    argument = arguments.by_name[flag]
    assert (argument.field, argument.choices, argument.takes_value) == (field, choices, takes_value)


@pytest.mark.parametrize("flag", ["--hidden", "--plain", "--ignored", "--targets-x", "--model-path-x"])
def test_what_is_not_an_argument(arguments, flag):
    assert flag not in arguments.by_name


def problems(text: str, arguments: Arguments) -> list[tuple[int, str]]:
    return list(markdown_flag_problems(textwrap.dedent(text), arguments))


VALID = [
    pytest.param("Pass `--kv-cache-dtype fp8_e4m3` or --kv-cache-dtype=bf16.", id="prose-and-inline"),
    pytest.param("```shell\npython -m sglang.launch_server --model m \\\n  --targets q_proj v_proj --enable-lora\n```", id="multi-value"),
    pytest.param("```shell\npip install --upgrade sglang\nnvidia-smi --query-gpu=name\n```", id="other-programs"),
    pytest.param("```python\nimport sglang as sgl\nsgl.Engine(model_path='m', kv_cache_dtype='bf16')\n```", id="python"),
    pytest.param("Run `pip install --upgrade sglang` first.", id="other-inline-command"),
    pytest.param("Values -- like this -- are prose.", id="dashes"),
    pytest.param("Set `--tp-size` to the number of GPUs.", id="flag-named-in-passing"),
]


@pytest.mark.parametrize("text", VALID)
def test_real_flags_pass(arguments, text):
    assert problems(text, arguments) == []


INVALID = [
    pytest.param(
        "Use --kv-cache-dtyp=bf16.",
        [(0, "--kv-cache-dtyp is not an SGLang server argument; did you mean --kv-cache-dtype?")],
        id="prose-unknown-flag",
    ),
    pytest.param(
        "Use `--kv-cache-dtype fp4`.",
        [(0, "'fp4' is not a choice of --kv-cache-dtype (auto, fp8_e4m3, bf16)")],
        id="inline-wrong-value",
    ),
    pytest.param(
        "Text.\n\n```shell\nsglang serve --model m \\\n  --graph partial\n```\n",
        [(4, "'partial' is not a choice of --graph (full, disabled)")],
        id="shell-wrong-value-on-continuation-line",
    ),
    pytest.param(
        "```bash\nsglang serve --model m --enable-lora=true --tp-size\n```",
        [(1, "--enable-lora is a switch and takes no value (got 'true')"), (1, "--tp-size needs a value")],
        id="switch-with-value-and-missing-value",
    ),
    pytest.param(
        "```shell\nsglang serve --targets q_proj k_proj\n```",
        [(1, "'k_proj' is not a choice of --targets (q_proj, v_proj); did you mean v_proj?")],
        id="one-of-many-values",
    ),
    pytest.param(
        "```python\nsgl.Engine(model_path='m',\n    kv_cache_dtype='fp4')\n```",
        [(2, "'fp4' is not a choice of kv_cache_dtype (auto, fp8_e4m3, bf16)")],
        id="python-keyword-value",
    ),
    pytest.param(
        "```python\nsgl.Engine(model='m')\n```",
        [(1, "model= is not an SGLang server argument; did you mean mode?")],
        id="python-keyword-name",
    ),
    pytest.param("```python\nif x\n```", [(1, "python code does not parse: expected ':'")], id="python-syntax"),
    pytest.param(
        "```shell\nsglang serve --model 'unclosed\n```", [(1, "shell command does not parse: No closing quotation")], id="shell-syntax"
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_wrong_flags_and_values_are_named(arguments, text, expected):
    assert problems(text, arguments) == expected


@pytest.mark.real
def test_real_release_arguments(sglang):
    from generator.config import Config
    from generator.flags import server_arguments
    from generator.upstream import open_source

    arguments = server_arguments(open_source("pypi:sglang==0.5.23", Config(), conftest.test_cache_dir()))
    assert len(arguments) > 400
    assert arguments.by_name["--kv-cache-dtype"].choices == (
        "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
    )
    assert arguments.by_name["--tensor-parallel-size"].field == "tp_size"
    assert arguments.by_name["--cuda-graph-backend-decode"].choices == ("full", "breakable", "disabled")
    assert not arguments.by_name["--disable-cuda-graph"].takes_value
    assert "--tp" not in arguments.by_name


@pytest.mark.real
def test_real_release_diffusion_arguments(sglang):
    """The diffusion server's command line, read as the language server's is, with defaults
    written as the dataclass's own fields (`default=ServerArgs.num_gpus`) shown as their value."""
    from generator.config import Config
    from generator.flags import diffusion_arguments
    from generator.upstream import open_source

    arguments = diffusion_arguments(open_source("pypi:sglang==0.5.23", Config(), conftest.test_cache_dir()))
    assert len(arguments) > 100
    gpus = arguments.by_name["--num-gpus"]
    assert (gpus.default, gpus.help, gpus.path) == ("1", "The number of GPUs to use.", "python/sglang/multimodal_gen/runtime/server_args/server_args.py")
    assert arguments.by_name["--use-fsdp-inference"].help.startswith("Use FSDP inference to shard DiT weights")
    # A mixin's classmethod reads its defaults from `cls`.
    assert arguments.by_name["--disagg-timeout"].default == "3600"
    assert not any(re.fullmatch(r"(ServerArgs|cls)\.\w+", argument.default or "") for argument in arguments.by_field.values())


@pytest.mark.real
def test_check_fails_on_wrong_flags_naming_file_and_line(capsys):
    folder = Path(__file__).parent / "data" / "content" / "wrong-flags"
    code = main(["check", "--content", str(folder), "--cache-dir", str(conftest.test_cache_dir())])
    err = capsys.readouterr().err
    path = folder / "errors" / "78ce936e309db402.yaml"
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith(f"{path}:") and not line.startswith(f"{path}: ")]
    choices = "(auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16)"
    assert lines == [
        f"{path}:14: 'solutions[0].body': 'fp8' is not a choice of --kv-cache-dtype {choices}; did you mean mxfp8?",
        f"{path}:20: 'solutions[1].body': kv_cache_dtyp= is not an SGLang server argument; did you mean kv_cache_dtype?",
        f"{path}:24: 'example_fix.before': --tp is not an SGLang server argument; did you mean --ep?",
    ]
    # An entry of the diffusion server's code is held to that server's flags.
    path = folder / "errors" / "4b8cc54533837638.yaml"
    lines = [line for line in err.splitlines() if line.startswith(f"{path}:") and not line.startswith(f"{path}: ") and "'review'" not in line]
    assert lines == [f"{path}:14: 'solutions[1].body': --cfg-paralel-size is not an SGLang server argument; did you mean --cfg-parallel-size?"]


class FakeSource:
    """A source of a few files held in memory, each with its git blob sha."""

    def __init__(self, texts: dict[str, str]) -> None:
        from generator.model import SourceFile
        from generator.upstream import blob_sha

        self.texts = {path: text.encode() for path, text in texts.items()}
        self._files = tuple(SourceFile(path, blob_sha(data)) for path, data in sorted(self.texts.items()))

    def files(self):
        return self._files

    def read(self, file) -> bytes:
        return self.texts[file.path]


def test_server_arguments_kept_in_the_cache_follow_every_file_they_were_read_from(tmp_path):
    from generator.flags import server_arguments

    root = "python/sglang/"
    field = 'from sglang.srt.arg_groups.choices import BACKENDS\nclass Model(msgspec.Struct):\n    _NS_PATH = "model"\n    backend: A[str, Arg(help="b", choices=BACKENDS)] = "a"\n'
    texts = {
        root + "srt/server_args.py": "def add_cli_args(parser):\n    parser.add_argument('--config', type=str)\n",
        root + "srt/arg_groups/fields/model.py": field,
        root + "srt/arg_groups/choices.py": 'BACKENDS = ["a", "b"]\n',
    }
    steps = [
        {},
        {root + "srt/arg_groups/choices.py": 'BACKENDS = ["a", "c"]\n'},  # a module a constant came from
        {root + "srt/arg_groups/fields/more.py": 'class More:\n    _NS_PATH = "more"\n    tp_size: A[int, "tp"] = 1\n'},  # a new fields file
        {root + "srt/arg_groups/choices.py": None},  # the constant's module is gone
        {root + "srt/arg_groups/choices/__init__.py": 'BACKENDS = ["z"]\n'},  # and comes back as a package
    ]
    seen = []
    for step in steps:
        texts = {path: text for path, text in {**texts, **step}.items() if text is not None}
        source = FakeSource(texts)
        cached = server_arguments(source, tmp_path)
        assert cached == server_arguments(source)
        seen.append({name: argument.choices for name, argument in cached.by_name.items()})
    assert [s.get("--backend") for s in seen] == [("a", "b"), ("a", "c"), ("a", "c"), None, ("z",)]
    assert "--tp-size" in seen[2] and "--tp-size" not in seen[1]


def test_reading_server_arguments_leaves_libcst_unloaded():
    """A rebuild reads the server arguments again whenever upstream touches one of their files,
    which most commits to `server_args.py` do: that must not cost libcst's import (0.6 s) in
    the build's own process, which otherwise never needs it."""
    import subprocess
    import sys

    code = textwrap.dedent(
        """
        import sys
        from generator import build
        from generator.flags import server_arguments
        from tests.test_flags import FakeSource

        texts = {"python/sglang/srt/server_args.py": "def add_cli_args(parser):\\n    parser.add_argument('--config', type=str)\\n"}
        assert "--config" in server_arguments(FakeSource(texts)).by_name
        print("libcst" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
