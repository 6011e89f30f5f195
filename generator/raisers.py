"""Which raisers each file sees: the functions of upstream that raise what their caller passes
(`model.Raiser`), by the name a call in that file reaches them under.

A file sees the raisers it defines (its own classes' methods through `self.`), and those its
imports bind, followed through re-exports: `from sglang.srt.utils import fail` reaches `fail`
in `sglang/srt/utils/common.py` when `sglang/srt/utils/__init__.py` does `from .common import *`
or `from .common import fail`. An imported module gives its raisers under its name
(`errors.fail` after `import errors`). Module names follow packages: a folder is a package when
it holds an `__init__.py`, so `python/sglang/srt/x.py` is `sglang.srt.x`.

What a file sees is all its call sites depend on beyond its own bytes: `digest` names it, and
the pipeline keys those sites by the blob and that digest.

The same names across modules give upstream's exception classes and their ancestors
(`exception_classes`), which lookup weighs a pasted exception's class by.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Mapping

from dataclasses import replace

from generator.model import Binding, ExtractedFile, Raiser


def resolve(files: Mapping[str, ExtractedFile], paths: list[str] | tuple[str, ...]) -> tuple[dict[str, dict[str, Raiser]], tuple[tuple[str, tuple[str, ...]], ...]]:
    """By path, the raisers each file of `files` sees by call name, for the files that see
    any, and `exception_classes`; `paths` are every path of the tree (files that did not parse
    still make packages)."""
    modules = _Modules(files, paths)
    return modules.visible(), modules.exception_classes()


def exception_classes(files: Mapping[str, ExtractedFile], paths: list[str] | tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each exception class upstream defines, by its name, with the names of all its ancestors
    (bases found through imports, then Python's own exceptions above them), sorted; classes
    of one name in several modules share their ancestors."""
    return _Modules(files, paths).exception_classes()


def builtin_exceptions() -> dict[str, tuple[str, ...]]:
    """Python's own exception classes, each with its ancestors (`object` left out)."""
    found = {}
    for name in dir(builtins):
        value = getattr(builtins, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            found[name] = tuple(base.__name__ for base in value.__mro__[1:] if base is not object)
    return found


def digest(raisers: Mapping[str, Raiser]) -> str:
    """A digest of what a file sees: its call sites are the same whenever this is."""
    rows = [[name, r.function, r.parameter, r.position, r.exception, r.method, r.line, r.end_line, r.path] for name, r in sorted(raisers.items())]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()[:16]


def module_names(paths: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Path -> dotted module name, from the topmost folder on its path that holds an
    `__init__.py` (folders below it without one are namespace packages, as `sglang/srt` is);
    a file with no package above it is a module of its own name (a script)."""
    packages = {path.rsplit("/", 1)[0] for path in paths if path.endswith("/__init__.py")}
    names = {}
    for path in paths:
        if not path.endswith(".py"):
            continue
        parts = path[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        top = next((index for index in range(1, len(parts)) if "/".join(parts[:index]) in packages), len(parts))
        names[path] = ".".join(parts[top - 1 :])
    return names


class _Modules:
    """The modules of one tree by name, with what each defines and imports."""

    def __init__(self, files: Mapping[str, ExtractedFile], paths: list[str] | tuple[str, ...]) -> None:
        # Each raiser with its path filled in.
        self.files = {path: replace(f, raisers=tuple(replace(r, path=path) for r in f.raisers)) if f.raisers else f for path, f in files.items()}
        self.names = module_names(paths)
        by_name: dict[str, str | None] = {}
        for path, name in self.names.items():
            # Two files under one name (scripts in folders that are not packages): neither.
            by_name[name] = None if name in by_name else path
        self.paths = {name: path for name, path in by_name.items() if path is not None}
        self._exports: dict[str, dict[str, Raiser]] = {}
        # The names a raiser or a class can be reached by (theirs, and the aliases of those):
        # any other name resolves to nothing without following its imports.
        bindings = [b for f in self.files.values() for b in f.bindings if b.member not in (None, "*")]
        self._raiser_names = _aliased({r.function for f in self.files.values() for r in f.raisers if not r.method}, bindings)
        self._class_names = _aliased({c.name.rsplit(".", 1)[-1] for f in self.files.values() for c in f.classes}, bindings)

    def visible(self) -> dict[str, dict[str, Raiser]]:
        seen_by = {}
        for path in sorted(self.files):
            extracted = self.files[path]
            module = self.names.get(path)
            if module is None:
                continue
            seen: dict[str, Raiser] = {}
            for binding in extracted.bindings:
                seen.update(self._bound(binding, module, path.endswith("/__init__.py")))
            for raiser in extracted.raisers:
                seen[raiser.function] = raiser
            if seen:
                seen_by[path] = seen
        return seen_by

    def exception_classes(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        bases: dict[tuple[str, str], list[tuple[str, str] | str]] = {}
        for path in sorted(self.files):
            module = self.names.get(path)
            if module is None:
                continue
            for declared in self.files[path].classes:
                bases[(module, declared.name)] = [self._class_of(module, base, frozenset()) or base.rsplit(".", 1)[-1] for base in declared.bases]
        python = builtin_exceptions()
        ancestors: dict[tuple[str, str], set[str]] = {}

        def of(key: tuple[str, str], walking: frozenset) -> set[str]:
            if key in ancestors:
                return ancestors[key]
            found: set[str] = set()
            for base in bases.get(key, ()):
                if isinstance(base, str):
                    found.add(base)
                    found.update(python.get(base, ()))
                elif base not in walking:
                    found.add(base[1].rsplit(".", 1)[-1])
                    found.update(of(base, walking | {key}))
            ancestors[key] = found
            return found

        by_name: dict[str, set[str]] = {}
        for key in bases:
            found = of(key, frozenset())
            if "BaseException" in found:
                by_name.setdefault(key[1].rsplit(".", 1)[-1], set()).update(found)
        return tuple((name, tuple(sorted(found - {name}))) for name, found in sorted(by_name.items()))

    def _class_of(self, module: str, dotted: str, seen: frozenset) -> tuple[str, str] | None:
        """The module and qualified name of the class `dotted` names in `module`: defined
        there, or reached through its imports; None when it is not upstream's."""
        if (module, dotted) in seen or module not in self.paths or dotted.rsplit(".", 1)[-1] not in self._class_names:
            return None
        seen = seen | {(module, dotted)}
        extracted = self.files.get(self.paths[module])
        if extracted is None:
            return None
        if any(declared.name == dotted for declared in extracted.classes):
            return module, dotted
        package = self.paths[module].endswith("/__init__.py")
        for binding in extracted.bindings:
            if binding.name == "*":
                continue
            source = _absolute(binding.module, module, package)
            if source is None:
                continue
            if binding.member is not None and binding.name == dotted:
                return self._class_of(source, binding.member, seen)
            if dotted.startswith(binding.name + "."):
                target = source if binding.member is None else f"{source}.{binding.member}"
                return self._class_of(target, dotted[len(binding.name) + 1 :], seen)
        for binding in extracted.bindings:
            if binding.name == "*" and (source := _absolute(binding.module, module, package)) is not None:
                found = self._class_of(source, dotted, seen)
                if found is not None:
                    return found
        return None

    def _bound(self, binding: Binding, module: str, package: bool) -> dict[str, Raiser]:
        """The raisers one import binding makes visible, by call name."""
        source = _absolute(binding.module, module, package)
        if source is None:
            return {}
        if binding.member is None:
            return {f"{binding.name}.{name}": raiser for name, raiser in self.exports(source).items()}
        if binding.name == "*":
            return dict(self.exports(source))
        found = {}
        raiser = self.lookup(source, binding.member, frozenset())
        if raiser is not None:
            found[binding.name] = raiser
        # `from package import module`: its raisers under the module's name.
        submodule = f"{source}.{binding.member}" if source else binding.member
        if submodule in self.paths:
            found.update({f"{binding.name}.{name}": r for name, r in self.exports(submodule).items()})
        return found

    def lookup(self, module: str, name: str, seen: frozenset[tuple[str, str]]) -> Raiser | None:
        """The raiser `name` in `module` is, defined there or imported into it."""
        if (module, name) in seen or module not in self.paths or name not in self._raiser_names:
            return None
        seen = seen | {(module, name)}
        extracted = self.files.get(self.paths[module])
        if extracted is None:
            return None
        for raiser in extracted.raisers:
            if raiser.function == name and not raiser.method:
                return raiser
        package = self.paths[module].endswith("/__init__.py")
        for binding in extracted.bindings:
            if binding.name == name and binding.member is not None:
                source = _absolute(binding.module, module, package)
                return None if source is None else self.lookup(source, binding.member, seen)
        if not name.startswith("_"):
            for binding in extracted.bindings:
                if binding.name == "*" and (source := _absolute(binding.module, module, package)) is not None:
                    raiser = self.lookup(source, name, seen)
                    if raiser is not None:
                        return raiser
        return None

    def exports(self, module: str) -> dict[str, Raiser]:
        """Every raiser `module` holds under a public name: defined or imported."""
        if module in self._exports:
            return self._exports[module]
        self._exports[module] = {}  # a cycle of star imports ends here
        extracted = self.files.get(self.paths.get(module, ""))
        found: dict[str, Raiser] = {}
        if extracted is not None:
            package = self.paths[module].endswith("/__init__.py")
            for binding in extracted.bindings:
                if binding.name == "*":
                    source = _absolute(binding.module, module, package)
                    if source is not None:
                        found.update(self.exports(source))
            for binding in extracted.bindings:
                if binding.member not in (None, "*") and not binding.name.startswith("_"):
                    raiser = self.lookup(module, binding.name, frozenset())
                    if raiser is not None:
                        found[binding.name] = raiser
            for raiser in extracted.raisers:
                if not raiser.method and not raiser.function.startswith("_"):
                    found[raiser.function] = raiser
        self._exports[module] = found
        return found


def _aliased(names: set[str], bindings: list[Binding]) -> set[str]:
    """`names` and every name an import binds one of them under, however many times renamed."""
    names = set(names)
    while True:
        more = {b.name for b in bindings if b.member in names and b.name not in names}
        if not more:
            return names
        names |= more


def _absolute(target: str, module: str, package: bool) -> str | None:
    """The absolute name of a module imported as `target` from `module` (a package's
    `__init__` when `package`); None for a relative import that climbs out of the tree."""
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    rest = target[level:]
    parts = module.split(".") if package else module.split(".")[:-1]
    if level - 1 > len(parts) or (level - 1 == len(parts) and not rest):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([rest] if rest else []))
