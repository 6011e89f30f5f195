"""The project's settings, read from `errorkb.toml` with defaults for every value."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from generator.errors import ConfigError

CONFIG_NAME = "errorkb.toml"


@dataclass(frozen=True, slots=True)
class Config:
    """Where upstream comes from, where its files live in its repo, and where output goes.

    `package` is the Python package extracted; `path_prefix` is where it sits in upstream's
    repository (`python/` puts `sglang/` at `python/sglang/`). Relative folders are resolved
    against the folder holding `errorkb.toml`.
    """

    source: str = "pypi:sglang==0.5.23"
    repo: str = "sgl-project/sglang"
    package: str = "sglang"
    path_prefix: str = "python/"
    index_url: str = "https://pypi.org/simple"
    content: Path = Path("content")
    out: Path = Path("site")
    # Folders `<org>--<name>/config.json` standing in for hub models when examples are run.
    model_configs: Path = Path("tests/data/model_configs")
    cache_dir: Path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "errorkb"
    base_url: str = "https://errorkb.example.org/"
    report_url: str = "https://github.com/errorkb/errorkb/issues/new"

    @property
    def package_root(self) -> str:
        """The package's folder in upstream's layout, with a trailing slash."""
        return f"{self.path_prefix}{self.package}/"


def load_config(path: Path | None = None) -> Config:
    """The config at `path`, or `errorkb.toml` in the current folder, or the defaults."""
    path = path or Path(CONFIG_NAME)
    if not path.exists():
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from None
    table = data.get("errorkb", data)
    known = {f.name: f for f in fields(Config)}
    problems, values = [], {}
    for name, value in table.items():
        name = name.replace("-", "_")
        if name not in known:
            problems.append(f"{path}: '{name}': unknown setting")
        elif not isinstance(value, str):
            problems.append(f"{path}: '{name}': expected a string")
        elif known[name].type in ("Path", Path):
            values[name] = (path.parent / value) if not os.path.isabs(value) else Path(value)
        else:
            values[name] = value
    if problems:
        raise ConfigError("\n".join(problems))
    return replace(Config(), **values)
