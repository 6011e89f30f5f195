"""Curated example fixes run against the real SGLang release: does the "before" command raise
the entry's error, and does the "after" one not?

Only what SGLang does before it loads anything is run: a `python -m sglang.launch_server` (or
`sglang serve`) command's arguments are resolved with `prepare_server_args(argv).resolve_once()`
and checked with `check_server_args()`, as the launcher does, on the CPU, in a child process
(`example_child.py`) of a venv that holds the pinned release and what its argument resolution
imports (`sglang-requirements.txt`), made once in the user cache. Hub model ids are replaced by
a folder holding only that model's `config.json`, so nothing is downloaded. An example is
reported as one of the `OUTCOMES`; one that cannot run says why and never counts as passed.

What passed is recorded in `content/reproduced.json`, keyed by id, with a digest of the example
and the entry's fingerprint: a page shows "Reproduced with SGLang <version>" only while both
still match the entry (`reproduced_with`), so editing an example or re-reviewing the entry
against changed code takes the badge away until the examples are run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from generator.errors import ErrorkbError
from generator.files import write_atomic
from generator.flags import sglang_commands, server_argv
from generator.model import Curated, ErrorEntry, ExampleFix
from generator.search import Paste, matcher_of, messages_of, path_matches, squash, template_matches

REQUIREMENTS = Path(__file__).with_name("sglang-requirements.txt")
CHILD = Path(__file__).with_name("example_child.py")
RECORD_NAME = "reproduced.json"
RECORD_VERSION = "errorkb-reproduced-v1"
# Importing SGLang takes seconds and each command milliseconds; this bounds a hung child.
CHILD_TIMEOUT = 600
# Flags whose value is a model: a hub id there is replaced by its config folder.
MODEL_FLAGS = ("--model-path", "--model", "--speculative-draft-model-path", "--speculative-draft-model")
# Flags whose value may be a model, replaced when a config is known and left as written otherwise.
OPTIONAL_MODEL_FLAGS = ("--tokenizer-path",)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SHELL = ("", "shell", "sh", "bash", "console", "zsh")

REPRODUCED = "reproduced"
OTHER_ERROR = "before raised another error"
NO_ERROR = "before did not raise"
AFTER_RAISES = "after still raises"
NOT_RUN = "not run"
OUTCOMES = (REPRODUCED, OTHER_ERROR, NO_ERROR, AFTER_RAISES, NOT_RUN)


class ExampleVenvError(ErrorkbError):
    """The venv holding SGLang could not be made or does not run."""


# -- Records ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resolution:
    """How resolving one argument list ended: the exception (None when it went through), its
    message, its traceback frames `(file, line, function)` innermost last, the warnings it
    issued `(category, message, file, line)`, and the end of what it printed on stderr."""

    exception: str | None
    message: str | None = None
    frames: tuple[tuple[str, int, str], ...] = ()
    warnings: tuple[tuple[str, str, str, int], ...] = ()
    stderr: str = ""

    @classmethod
    def of_json(cls, data: Mapping) -> Resolution:
        return cls(
            data.get("exception"),
            data.get("message"),
            tuple((str(f), int(n), str(name)) for f, n, name in data.get("frames", ())),
            tuple((str(c), str(m), str(f), int(n)) for c, m, f, n in data.get("warnings", ())),
            str(data.get("stderr", "")),
        )


@dataclass(frozen=True, slots=True)
class Command:
    """One server command to resolve: the variables its shell line sets, and its arguments
    with models already replaced."""

    environment: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]

    def as_json(self) -> dict:
        return {"environment": dict(self.environment), "argv": list(self.argv)}


@dataclass(frozen=True, slots=True)
class ExampleCommands:
    """The commands an example's two sides resolve."""

    before: Command
    after: Command


@dataclass(frozen=True, slots=True)
class ExampleResult:
    """One entry's example, run or not: its outcome (one of `OUTCOMES`), what the line says
    about it, and for a reproduced one what its "after" did and the SGLang it ran on."""

    id: str
    outcome: str
    detail: str = ""
    after: str = ""
    sglang: str = ""

    @property
    def ran(self) -> bool:
        return self.outcome != NOT_RUN

    @property
    def failed(self) -> bool:
        return self.ran and self.outcome != REPRODUCED

    def __str__(self) -> str:
        text = self.outcome + (f" ({self.detail})" if self.detail else "")
        if self.outcome == REPRODUCED and self.after:
            text += f"; after: {self.after}"
        return f"{self.id}: {text}"


# -- Commands --------------------------------------------------------------------------------------


def example_commands(example: ExampleFix, model_configs: Path) -> ExampleCommands | str:
    """The argument lists of an example's sides, or why it cannot run: it needs hardware or
    weights, a side starts no server, or a model has no config under `model_configs`."""
    if example.needs:
        return f"needs: {', '.join(example.needs)}"
    if example.language not in _SHELL:
        return f"a {example.language} example, not a server command"
    sides = []
    for name, text in (("before", example.before), ("after", example.after)):
        found = _first_server_argv(text)
        if found is None:
            return f"{name} is not a `python -m sglang.launch_server` command"
        variables, argv = found
        replaced = with_model_configs(argv, model_configs)
        if isinstance(replaced, str):
            return replaced
        sides.append(Command(tuple(sorted(variables.items())), tuple(on_cpu(replaced))))
    return ExampleCommands(*sides)


def _first_server_argv(text: str) -> tuple[dict[str, str], list[str]] | None:
    for _first, _end, tokens in sglang_commands(text):
        if not isinstance(tokens, ValueError):
            found = server_argv(tokens)
            if found is not None:
                return found
    return None


def with_model_configs(argv: list[str], model_configs: Path) -> list[str] | str:
    """`argv` with each model flag's hub id (`org/name`) replaced by `model_configs/org--name`,
    or what is missing: "no config for model org/name"."""
    out, position = [], 0
    while position < len(argv):
        word = argv[position]
        name, has_value, value = word.partition("=")
        position += 1
        if name in MODEL_FLAGS + OPTIONAL_MODEL_FLAGS and (has_value or position < len(argv)):
            if not has_value:
                value = argv[position]
                position += 1
            folder = model_configs / value.replace("/", "--")
            if _HUB_ID.match(value) and (folder / "config.json").is_file():
                value = str(folder)
            elif name in MODEL_FLAGS:
                return f"no config for model {value}"
            out.extend([name, value])
        else:
            out.append(word)
    return out


def on_cpu(argv: list[str]) -> list[str]:
    """`argv` with `--device cpu`, unless it names a device itself (that device is part of
    what the example shows)."""
    if any(word == "--device" or word.startswith("--device=") for word in argv):
        return argv
    return [*argv, "--device", "cpu"]


# -- Judging ---------------------------------------------------------------------------------------


def raises_entry(entry: ErrorEntry, resolution: Resolution) -> bool:
    """Whether a resolution ended in this entry's error: the same exception class, a message
    the entry's template matches (as `lookup` matches a paste), and a traceback frame at one of
    its locations. For a warning entry, a warning issued there."""
    if entry.kind == "warning":
        return any(
            (entry.exception is None or category == entry.exception)
            and _message_matches(entry, message, category)
            and _at_site(entry, path, line)
            for category, message, path, line in resolution.warnings
        )
    if resolution.exception is None:
        return False
    if entry.exception is not None and resolution.exception != entry.exception.rsplit(".", 1)[-1]:
        return False
    if not _message_matches(entry, resolution.message or "", resolution.exception):
        return False
    return any(_at_site(entry, path, line) for path, line, _function in resolution.frames)


def _message_matches(entry: ErrorEntry, message: str, exception: str) -> bool:
    matcher = matcher_of(entry)
    if matcher is None:
        return True
    forms = messages_of(Paste(message, exception, None)) or [squash(message)]
    return any(template_matches(form, list(matcher.segments), matcher.starts, matcher.ends) for form in forms)


def _at_site(entry: ErrorEntry, path: str, line: int) -> bool:
    return any(path_matches(path, site.path) and site.line <= line <= site.end_line for site in entry.sites)


def judge(entry: ErrorEntry, before: Resolution, after: Resolution, path_prefix: str = "python/") -> tuple[str, str, str]:
    """The outcome of an example (one of `OUTCOMES` but `NOT_RUN`), its detail, and what
    "after" did."""
    after_did = describe(after, path_prefix)
    if raises_entry(entry, before):
        if raises_entry(entry, after):
            return AFTER_RAISES, describe(after, path_prefix), after_did
        return REPRODUCED, "", after_did
    if before.exception is None:
        return NO_ERROR, "", after_did
    return OTHER_ERROR, describe(before, path_prefix), after_did


def describe(resolution: Resolution, path_prefix: str = "python/") -> str:
    """One line: `no error`, or `ValueError at python/sglang/srt/x.py:12: message`, at the
    innermost frame inside SGLang (in upstream's layout)."""
    if resolution.exception is None:
        return "no error"
    message = " ".join((resolution.message or "").split())
    if resolution.exception == "SystemExit":
        lines = [line for line in resolution.stderr.splitlines() if line.strip()]
        message = f"argparse: {lines[-1].strip()}" if lines else f"exit {message}"
    inside = [(path, line) for path, line, _ in resolution.frames if "/sglang/" in path.replace("\\", "/")]
    where = ""
    if inside:
        path, line = inside[-1]
        where = f" at {path_prefix}sglang/{path.replace(chr(92), '/').rsplit('/sglang/', 1)[1]}:{line}"
    if len(message) > 160:
        message = message[:157] + "..."
    return f"{resolution.exception}{where}" + (f": {message}" if message else "")


# -- Running ---------------------------------------------------------------------------------------


def pinned_version(requirements: Path = REQUIREMENTS) -> str:
    """The SGLang version a requirements file pins (`sglang==<version>`)."""
    found = re.search(r"^sglang==(\S+)\s*$", requirements.read_text(encoding="utf-8"), re.MULTILINE)
    if not found:
        raise ExampleVenvError(f"{requirements}: no `sglang==<version>` line")
    return found[1]


def sglang_venv(cache_dir: Path, requirements: Path = REQUIREMENTS, log=None) -> Path:
    """The Python of a venv holding exactly `requirements` (installed with `--no-deps`, every
    version pinned), made once under `cache_dir/sglang-venv/<version>/` and reused while the
    requirements' digest matches its stamp; `ExampleVenvError` when it cannot be made."""
    text = requirements.read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    folder = cache_dir / "sglang-venv" / pinned_version(requirements)
    stamp, python = folder / "errorkb-requirements.sha256", folder / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    building = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    if log:
        log(f"examples: making the SGLang venv in {folder} (once; a few GB, a few minutes)")
    try:
        _checked([sys.executable, "-m", "venv", str(building)])
        _checked([str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "-r", str(requirements)])
        (building / stamp.name).write_text(digest + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(building, folder)
        except OSError:
            # Another run made it meanwhile: theirs serves as well as ours.
            if not (python.exists() and stamp.exists() and stamp.read_text().strip() == digest):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python


def _checked(command: list[str]) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise ExampleVenvError(f"{command[0]}: {error}") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip() and not line.startswith("WARNING")]
        raise ExampleVenvError(f"`{' '.join(command[2:4])}` failed: {lines[-1] if lines else f'exit {done.returncode}'}")


def resolve_all(python: Path, commands: list[Command], timeout: float = CHILD_TIMEOUT) -> tuple[str, list[Resolution]]:
    """SGLang's version and how each command resolved, all in one child process of `python`,
    offline; `ExampleVenvError` when SGLang does not import there."""
    # Offline, and on the CPU even where there is an accelerator, so a run finds the same
    # everywhere and CI can hold the record to it.
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    try:
        done = subprocess.run(
            [str(python), str(CHILD)],
            input=json.dumps([command.as_json() for command in commands]),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ExampleVenvError(f"{python}: {error}") from None
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if not lines or "import_error" in lines[0]:
        reason = lines[0]["import_error"] if lines else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ExampleVenvError(f"SGLang does not import in {python}: {reason}")
    resolutions = [Resolution.of_json(line) for line in lines[1:]]
    if len(resolutions) != len(commands):
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ExampleVenvError(f"the child stopped after {len(resolutions)} of {len(commands)} commands: {tail}")
    return str(lines[0]["sglang"]), resolutions


def run_examples(
    curated: Mapping[str, Curated],
    entries: Mapping[str, ErrorEntry],
    model_configs: Path,
    python: Path | str,
    path_prefix: str = "python/",
) -> list[ExampleResult]:
    """Every curated entry's example that has one, by id: run in one child of `python` (or, when
    `python` is a string, the reason no venv could be made: each runnable one is then not run)."""
    results: dict[str, ExampleResult] = {}
    runnable: dict[str, ExampleCommands] = {}
    for error, entry in sorted(curated.items()):
        if entry.example_fix is None:
            continue
        if error not in entries:
            results[error] = ExampleResult(error, NOT_RUN, "the id is not raised at this revision")
            continue
        commands = example_commands(entry.example_fix, model_configs)
        if isinstance(commands, str):
            results[error] = ExampleResult(error, NOT_RUN, commands)
        else:
            runnable[error] = commands
    if runnable:
        reason = python if isinstance(python, str) else None
        if reason is None:
            try:
                version, resolutions = resolve_all(python, [command for c in runnable.values() for command in (c.before, c.after)])
            except ExampleVenvError as error:
                reason = str(error)
        if reason is not None:
            for error in runnable:
                results[error] = ExampleResult(error, NOT_RUN, f"venv could not be made: {reason}")
        else:
            for number, error in enumerate(runnable):
                outcome, detail, after = judge(entries[error], resolutions[2 * number], resolutions[2 * number + 1], path_prefix)
                results[error] = ExampleResult(error, outcome, detail, after, version)
    return [results[error] for error in sorted(results)]


# -- The record ------------------------------------------------------------------------------------


def example_digest(example: ExampleFix) -> str:
    """16 hex digits over everything an example's outcome depends on in its entry's file."""
    text = json.dumps([RECORD_VERSION, example.before, example.after, example.language, list(example.needs)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_of(results: Iterable[ExampleResult], curated: Mapping[str, Curated]) -> dict[str, dict[str, str]]:
    """The record of the examples that reproduced: by id, the SGLang version, the example's
    digest, the entry's fingerprint and what "after" did."""
    record = {}
    for result in results:
        if result.outcome != REPRODUCED:
            continue
        entry = curated[result.id]
        assert entry.example_fix is not None
        record[result.id] = {
            "after": result.after,
            "example": example_digest(entry.example_fix),
            "fingerprint": entry.fingerprint or "",
            "sglang": result.sglang,
        }
    return record


def record_bytes(record: Mapping[str, Mapping[str, str]]) -> bytes:
    return (json.dumps(dict(sorted(record.items())), indent=2, sort_keys=True) + "\n").encode()


def read_record(folder: Path) -> dict[str, dict[str, str]]:
    """The stored record of `folder` (`reproduced.json`); none when missing, and `ErrorkbError`
    when it is not a record."""
    path = folder / RECORD_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ErrorkbError(f"{path}: not a record of reproduced examples: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(value, dict) for value in data.values()):
        raise ErrorkbError(f"{path}: not a record of reproduced examples: expected an object of objects by id")
    return data


def write_record(folder: Path, record: Mapping[str, Mapping[str, str]]) -> Path:
    path = folder / RECORD_NAME
    write_atomic(path, record_bytes(record))
    return path


def reproduced_with(curated: Curated, record: Mapping[str, Mapping[str, str]]) -> str | None:
    """The SGLang version an entry's example was reproduced with, when the record holds this
    very example (same digest) of this very entry (same fingerprint); else None."""
    stored = record.get(curated.id)
    if stored is None or curated.example_fix is None:
        return None
    if stored.get("example") != example_digest(curated.example_fix) or stored.get("fingerprint") != (curated.fingerprint or ""):
        return None
    return stored.get("sglang") or None
