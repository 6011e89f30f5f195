"""Run in SGLang's own interpreter by `generator.examples`: resolve server argument lists the way
`python -m sglang.launch_server` does before it loads anything (`resolve_once()`, then
`check_server_args()` where the release has it), and say how each one ended.

Standard library only, and nothing from errorkb: this file runs in a venv that has SGLang and
not errorkb. It reads a JSON list of commands (`{"argv": [...], "environment": {...}}`) on stdin and writes JSON lines on the
stdout it was given: first `{"sglang": version}` (or `{"import_error": text}` when SGLang
does not import), then one line per command, in order:
`{"exception": name, "module": module, "message": str(error), "frames": [[file, line, function], ...],
"warnings": [[category, message, file, line], ...], "stderr": tail}`, `exception` null when
resolution went through. All commands run in this one process: SGLang takes seconds to import,
and a command a few milliseconds to resolve after that. Everything SGLang prints goes to stderr.
"""

import io
import json
import os
import sys
import traceback
import warnings

_STDERR_TAIL = 2000


def main() -> int:
    commands = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(record: dict) -> None:
        out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()

    try:
        from sglang.srt.server_args import prepare_server_args
    except BaseException as error:  # noqa: BLE001 - any failure to import is the answer
        emit({"import_error": "".join(traceback.format_exception_only(type(error), error)).strip()})
        return 0
    emit({"sglang": _version()})
    for command in commands:
        emit(_resolve(prepare_server_args, command["argv"], command.get("environment", {})))
    out.close()
    return 0


def _resolve(prepare_server_args, argv: list, variables: dict) -> dict:
    """One argument list resolved with the command's variables set, in a copy of the
    environment (handlers set variables too), with its warnings recorded and its stderr kept for
    when argparse exits."""
    environment = dict(os.environ)
    os.environ.update(variables)
    stderr, sys.stderr = sys.stderr, io.StringIO()
    record = {"exception": None, "module": None, "message": None, "frames": [], "warnings": [], "stderr": ""}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                server_args = prepare_server_args(list(argv))
                server_args.resolve_once()
                # The launcher validates the resolved record next, still before it loads
                # anything (Engine._launch_subprocesses); a release without it skips it.
                check = getattr(server_args, "check_server_args", None)
                if check is not None:
                    check()
            except BaseException as error:  # noqa: BLE001 - SystemExit from argparse included
                record["exception"] = type(error).__name__
                record["module"] = type(error).__module__
                record["message"] = str(error)
                record["frames"] = [[frame.filename, frame.lineno, frame.name] for frame in traceback.extract_tb(error.__traceback__)]
        record["warnings"] = [[w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught]
        record["stderr"] = sys.stderr.getvalue()[-_STDERR_TAIL:]
    finally:
        sys.stderr = stderr
        os.environ.clear()
        os.environ.update(environment)
    return record


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - a package without metadata (a test's) may say it itself
        import sglang

        return str(getattr(sglang, "__version__", "unknown"))


if __name__ == "__main__":
    sys.exit(main())
