"""A static call graph of upstream's code: who calls each function, under which conditions, and
so when in SGLang's life an error is raised (its phase).

Each file gives its facts on its own (`module_facts`: imports, functions, classes, and every
call or reference to a function inside each function, with the `if` tests around it), kept
per blob like the sites. `CallGraph` joins them: a call's name is resolved through the
module's own definitions, its imports (followed through re-exports), `self`/`cls` methods up
the class's bases, and a method name that only one class defines. What it cannot see
(registration tables, `getattr` dispatch) it does not guess.

Phases (`PHASES`) are found by walking the graph from SGLang's entry points (`ENTRY_POINTS`):
a function reached from several takes the phase of the nearest, in the order listed on a tie.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# When in SGLang's life an error is raised.
PHASES = ("launch", "load", "request", "serving", "tool", "unreachable")

# The entry points of each phase, as globs of `path:function` (fnmatch rules: `*` crosses
# folders and dots). These are where the graph starts; what they call is found by the graph.
# A function that is itself an entry point of several phases takes the first listed.
ENTRY_POINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Argument and environment resolution at start-up: the resolution hooks and ServerArgs.
    ("launch", (
        "*/sglang/srt/arg_groups/*:*",
        "*/sglang/srt/server_args.py:*",
        "*/sglang/srt/server_args_config_parser.py:*",
        "*/sglang/launch_server.py:*",
        "*/sglang/multimodal_gen/runtime/server_args/*:*",
        "*/sglang/multimodal_gen/runtime/launch_server.py:*",
        # A module's own code runs when it is imported, at start-up.
        "*:<module>",
    )),
    # Validating one client request: the HTTP handlers, the OpenAI/Anthropic/Ollama layers and
    # their protocol models, and the tokenizer manager's request path.
    ("request", (
        "*/sglang/srt/entrypoints/http_server.py:*",
        "*/sglang/srt/entrypoints/openai/*:*",
        "*/sglang/srt/entrypoints/anthropic/*:*",
        "*/sglang/srt/entrypoints/ollama/*:*",
        "*/sglang/srt/entrypoints/grpc*:*",
        "*/sglang/multimodal_gen/runtime/entrypoints/*:*",
        "*/sglang/multimodal_gen/configs/sample/*:*",
        "*/sglang/srt/managers/io_struct.py:*",
        "*/sglang/srt/managers/tokenizer_manager.py:TokenizerManager.generate_request",
        "*/sglang/srt/managers/tokenizer_manager.py:TokenizerManager._tokenize_one_request",
        "*/sglang/srt/managers/tokenizer_manager.py:TokenizerManager._validate_*",
        "*/sglang/srt/sampling/sampling_params.py:SamplingParams.verify",
        "*/sglang/srt/sampling/sampling_params.py:SamplingParams.normalize",
    )),
    # Model config, weights, tokenizer, quantization, memory pools, CUDA graphs: what the
    # model runner and the scheduler do before they serve.
    ("load", (
        "*/sglang/srt/model_executor/model_runner.py:ModelRunner.__init__",
        "*/sglang/srt/model_executor/model_runner.py:ModelRunner.initialize",
        "*/sglang/srt/model_executor/model_runner.py:ModelRunner.load_model",
        "*/sglang/srt/model_executor/model_runner.py:ModelRunner.init_*",
        "*/sglang/srt/model_loader/*:*",
        "*/sglang/srt/configs/*:*",
        "*/sglang/srt/models/*:*.__init__",
        "*/sglang/srt/models/*:*.load_weights",
        "*/sglang/srt/layers/quantization/*:*.create_weights",
        "*/sglang/srt/layers/quantization/*:*.process_weights_after_loading",
        "*/sglang/srt/layers/quantization/*:*.get_quant_method",
        "*/sglang/srt/layers/quantization/*:*.from_config",
        "*/sglang/srt/layers/quantization/*:*.__init__",
        "*/sglang/srt/managers/scheduler.py:Scheduler.__init__",
        "*/sglang/srt/managers/scheduler.py:run_scheduler_process",
        "*/sglang/srt/managers/tp_worker.py:*.__init__",
        "*/sglang/srt/managers/tokenizer_manager.py:TokenizerManager.__init__",
        "*/sglang/srt/entrypoints/engine.py:*",
        "*/sglang/srt/utils/hf_transformers*:*",
        "*/sglang/srt/distributed/parallel_state.py:init_*",
        "*/sglang/srt/distributed/parallel_state.py:initialize_*",
        "*/sglang/multimodal_gen/configs/pipeline_configs/*:*",
        "*/sglang/multimodal_gen/runtime/loader/*:*",
        "*/sglang/multimodal_gen/runtime/pipelines*:*.__init__",
        "*/sglang/multimodal_gen/runtime/pipelines*:*.initialize_pipeline",
        "*/sglang/multimodal_gen/runtime/pipelines*:*.load_*",
        "*/sglang/multimodal_gen/runtime/models/*:*.__init__",
    )),
    # Scheduler, workers, kernels, communication while serving.
    ("serving", (
        "*/sglang/srt/managers/scheduler.py:Scheduler.event_loop*",
        "*/sglang/srt/managers/scheduler.py:Scheduler.run_batch",
        "*/sglang/srt/managers/scheduler.py:Scheduler.process_input_requests",
        "*/sglang/srt/managers/scheduler*.py:*",
        "*/sglang/srt/managers/scheduler_components/*:*",
        "*/sglang/srt/managers/detokenizer_manager.py:*",
        "*/sglang/srt/managers/tokenizer_manager.py:*",
        "*/sglang/srt/models/*:*.forward",
        "*/sglang/srt/model_executor/*:*.forward*",
        "*/sglang/srt/disaggregation/*:*",
        # Reached through registries, torch ops and per-model dispatch, which the graph does
        # not follow: attention and MoE backends, speculative workers, kernels, and the
        # diffusion server's pipeline stages and workers.
        "*/sglang/srt/layers/attention/*:*",
        "*/sglang/srt/layers/moe/*:*",
        "*/sglang/srt/layers/*:*.forward*",
        "*/sglang/srt/speculative/*:*",
        "*/sglang/kernels/*:*",
        "*/sglang/multimodal_gen/runtime/pipelines_core/stages/*:*",
        "*/sglang/multimodal_gen/runtime/models/*:*.forward*",
        "*/sglang/multimodal_gen/runtime/managers/*:*",
    )),
    # CLI utilities, benchmarks, the client-side frontend language.
    ("tool", (
        "*/sglang/lang/*:*",
        "*/sglang/bench_*:*",
        "*/sglang/benchmark/*:*",
        "*/sglang/check_env.py:*",
        "*/sglang/cli/*:*",
        "*/sglang/utils.py:*",
        "*/sglang/global_config.py:*",
        "*/sglang/api.py:*",
    )),
)


@dataclass(frozen=True, slots=True)
class Call:
    """A call of (or a reference to) a name inside a function: `callee` as written (`foo`,
    `self.bar`, `mod.f`), its line, and the `if` tests around it inside the caller, outermost
    first, an `else` branch's negated."""

    caller: str
    callee: str
    line: int
    conditions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModuleFacts:
    """What one file says about functions: its module name, imports (local name -> dotted
    target), functions (qualified name -> first line), classes (qualified name -> base names
    as written) and calls."""

    path: str
    module: str
    imports: dict[str, str]
    functions: dict[str, int]
    classes: dict[str, tuple[str, ...]]
    calls: tuple[Call, ...]


def module_name(path: str) -> str:
    """`python/sglang/srt/x.py` -> `sglang.srt.x`; a package's `__init__.py` is the package."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if "sglang" in parts:
        parts = parts[parts.index("sglang") :]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def module_facts(tree: ast.Module, path: str) -> ModuleFacts:
    """The facts of one parsed file. Only calls the graph can resolve are kept: a bare name
    the module neither defines nor imports (a builtin, a local variable passed along) and a
    name imported from outside the tree's packages never resolve, and they are most calls."""
    module = module_name(path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    collector = _Collector(package)
    collector.statements(tree.body)
    imports, functions, classes = collector.imports, collector.functions, collector.classes
    # Packages a name can be imported from and resolve: SGLang's, and the file's own.
    packages = {"sglang", module.partition(".")[0]}

    def resolvable(callee: str) -> bool:
        head, dot, _ = callee.partition(".")
        if head in functions or head in classes or head in ("self", "cls", "super") or callee in functions:
            return True
        target = imports.get(head)
        if target is not None:
            return target.partition(".")[0] in packages
        return bool(dot)

    texts: dict[tuple[ast.expr, bool], str] = {}

    def text(condition: tuple[ast.expr, bool]) -> str:
        found = texts.get(condition)
        if found is None:
            test = texts.get((condition[0], False)) or ast.unparse(condition[0])
            texts[condition[0], False] = test
            found = texts[condition] = f"not ({test})" if condition[1] else test
        return found

    calls = tuple(
        Call(caller, callee, line, tuple(map(text, conditions))) for caller, callee, line, conditions in collector.calls if resolvable(callee)
    )
    return ModuleFacts(path, module, imports, functions, classes, calls)


# Fields of each node type to walk, without `ctx` (Load and Store are nodes too).
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(name for name in kind._fields if name != "ctx")
    return fields


class _Collector:
    """Walks statements in order, tracking the function they are in and the `if` tests around
    them, and expressions with a stack, recording calls and the names passed to them."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.imports: dict[str, str] = {}
        self.functions: dict[str, int] = {}
        self.classes: dict[str, tuple[str, ...]] = {}
        # (caller, callee, line, conditions), before the unresolvable are dropped; a condition
        # is an `if` test and whether the call is in its `else` branch.
        self.calls: list[tuple[str, str, int, tuple[tuple[ast.expr, bool], ...]]] = []
        self._names: list[str] = []
        self._function = ""
        self._conditions: tuple[tuple[ast.expr, bool], ...] = ()

    def statements(self, body: list) -> None:
        for node in body:
            self.statement(node)

    def statement(self, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.If:
            # The test's text is written only for the calls that are kept (`module_facts`).
            self._reference(node.test)
            outer = self._conditions
            self._conditions = (*outer, (node.test, False))
            self.statements(node.body)
            if node.orelse:
                self._conditions = (*outer, (node.test, True))
                self.statements(node.orelse)
            self._conditions = outer
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            name = ".".join((*self._names, node.name))
            self.functions.setdefault(name, node.lineno)
            for decorator in node.decorator_list:
                self._reference(decorator)
            self._names.append(node.name)
            outer, conditions = self._function, self._conditions
            self._function, self._conditions = name, ()
            self.statements(node.body)
            self._names.pop()
            self._function, self._conditions = outer, conditions
        elif kind is ast.ClassDef:
            name = ".".join((*self._names, node.name))
            self.classes[name] = tuple(filter(None, map(_dotted, node.bases)))
            for decorator in node.decorator_list:
                self._reference(decorator)
            self._names.append(node.name)
            outer, self._conditions = self._conditions, ()
            self.statements(node.body)
            self._conditions = outer
            self._names.pop()
        elif kind is ast.Import:
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    head = alias.name.partition(".")[0]
                    self.imports[head] = head
        elif kind is ast.ImportFrom:
            base = node.module or ""
            if node.level:
                parts = self.package.split(".")
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(p for p in (*parts, *([base] if base else [])) if p)
            for alias in node.names:
                if alias.name != "*":
                    self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        else:
            # Any other statement, handler or case: its expressions, then its statements.
            for field in _fields(kind):
                value = getattr(node, field)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.expr):
                            self.expression(item)
                        elif isinstance(item, ast.AST):
                            self.statement(item)
                elif isinstance(value, ast.expr):
                    self.expression(value)
                elif isinstance(value, ast.AST):
                    self.statement(value)

    def expression(self, root: ast.expr) -> None:
        stack = [root]
        calls, function, conditions = self.calls, self._function, self._conditions
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Name or kind is ast.Constant:
                continue
            if kind is ast.Call:
                name = _dotted(node.func)
                if name:
                    calls.append((function, name, node.lineno, conditions))
                else:
                    stack.append(node.func)
                # A function passed along (a thread target, a callback, `partial(f, ...)`) may run.
                for argument in (*node.args, *(k.value for k in node.keywords)):
                    if type(argument) is ast.Name or type(argument) is ast.Attribute:
                        name = _dotted(argument)
                        if name:
                            calls.append((function, name, argument.lineno, conditions))
                        else:
                            stack.append(argument)
                    else:
                        stack.append(argument)
                continue
            for field in _fields(kind):
                value = getattr(node, field)
                if type(value) is list:
                    stack.extend(item for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)

    def _reference(self, node: ast.AST) -> None:
        if type(node) is ast.Name or type(node) is ast.Attribute:
            name = _dotted(node)
            if name:
                self.calls.append((self._function, name, node.lineno, self._conditions))
                return
        self.expression(node)


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of names; `super().m` as `super.m`; "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
        parts.append("super")
    else:
        return ""
    return ".".join(reversed(parts))


# -- The graph -------------------------------------------------------------------------------------

# A function: (path, qualified name).
Function = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Caller:
    """One call of a function: the calling function, where, and the tests around the call."""

    path: str
    function: str
    line: int
    conditions: tuple[str, ...]


# How many classes may define a method for a call of it on an unknown object to count, in the
# phase walk, as a call of each.
_MAY_DISPATCH = 12
# Method names too common to resolve by name alone.
_COMMON_METHODS = frozenset({"__init__", "__call__", "forward", "get", "run", "update", "close", "start", "stop", "reset", "init", "load", "step", "apply"})


class CallGraph:
    """Every function's callers, from the facts of every file."""

    def __init__(self, facts: Iterable[ModuleFacts]) -> None:
        self.modules: dict[str, ModuleFacts] = {}
        for fact in facts:
            self.modules.setdefault(fact.module, fact)
        self.by_path = {fact.path: fact for fact in self.modules.values()}
        # Method name -> the functions that define it, across classes.
        methods: dict[str, list[Function]] = {}
        for fact in self.modules.values():
            for name in fact.functions:
                owner, _, method = name.rpartition(".")
                if owner in fact.classes:
                    methods.setdefault(method, []).append((fact.path, name))
        self._methods = methods
        self.callers: dict[Function, list[Caller]] = {}
        self.callees: dict[Function, set[Function]] = {}
        # Calls of a method several classes define (`self.backend.init_forward_metadata()`):
        # any of them may run, which the phase walk follows; not listed as callers.
        self.maybe: dict[Function, set[Function]] = {}
        for fact in self.modules.values():
            for call in fact.calls:
                found = self.resolve(fact, call.caller, call.callee)
                for target in found:
                    self.callers.setdefault(target, []).append(Caller(fact.path, call.caller, call.line, call.conditions))
                    self.callees.setdefault((fact.path, call.caller), set()).add(target)
                if not found and "." in call.callee:
                    head, method = call.callee.split(".", 1)[0], call.callee.rpartition(".")[2]
                    definers = methods.get(method, ())
                    if 1 < len(definers) <= _MAY_DISPATCH and method not in _COMMON_METHODS and head not in fact.imports:
                        self.maybe.setdefault((fact.path, call.caller), set()).update(definers)

    # -- Resolving names ---------------------------------------------------------------------

    def resolve(self, fact: ModuleFacts, caller: str, callee: str) -> list[Function]:
        head, _, rest = callee.partition(".")
        if head in ("self", "cls") and rest and "." not in rest:
            owner = self._class_of(fact, caller)
            if owner is not None:
                found = self._method(fact, owner, rest, set())
                if found:
                    return [found]
            return self._by_method_name(rest)
        if head == "super" and rest:
            owner = self._class_of(fact, caller)
            if owner is not None:
                for base in fact.classes.get(owner, ()):
                    located = self._class(fact, base)
                    if located is not None:
                        found = self._method(located[0], located[1], rest, set())
                        if found:
                            return [found]
            return []
        found = self._name(fact, callee, 0)
        if found:
            return [found]
        # A method of an object whose class the graph cannot see (`self.pool.free()`), but not
        # an attribute of a module or class the name is known to be (`torch.empty`).
        if rest and head not in fact.imports and head not in fact.classes and head not in fact.functions:
            return self._by_method_name(callee.rpartition(".")[2])
        return []

    def _name(self, fact: ModuleFacts, dotted: str, depth: int) -> Function | None:
        """A dotted name as the module `fact` sees it: its own function or class, an attribute
        of its own class, or what an import names."""
        if depth > 4:
            return None
        if dotted in fact.functions:
            return fact.path, dotted
        if dotted in fact.classes:
            return self._method(fact, dotted, "__init__", set())
        head, _, rest = dotted.partition(".")
        if head in fact.classes and rest and "." not in rest:
            return self._method(fact, head, rest, set())
        target = fact.imports.get(head)
        if target is None:
            return None
        return self._global(f"{target}.{rest}" if rest else target, depth + 1)

    def _global(self, dotted: str, depth: int) -> Function | None:
        """A fully dotted name: the longest module prefix, then the rest inside it."""
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.modules.get(".".join(parts[:cut]))
            if module is not None:
                return self._name(module, ".".join(parts[cut:]), depth)
        return None

    def _class(self, fact: ModuleFacts, dotted: str) -> tuple[ModuleFacts, str] | None:
        """Where a class named as `fact` sees it is defined."""
        if dotted in fact.classes:
            return fact, dotted
        head, _, rest = dotted.partition(".")
        target = fact.imports.get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        parts = full.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.modules.get(".".join(parts[:cut]))
            if module is not None:
                name = ".".join(parts[cut:])
                if name in module.classes:
                    return module, name
                if name.split(".")[0] in module.imports and module is not fact:
                    return self._class(module, name)
                return None
        return None

    def _method(self, fact: ModuleFacts, owner: str, method: str, seen: set) -> Function | None:
        """`owner.method`, or the first base class's that defines it."""
        if (fact.path, owner) in seen:
            return None
        seen.add((fact.path, owner))
        name = f"{owner}.{method}"
        if name in fact.functions:
            return fact.path, name
        for base in fact.classes.get(owner, ()):
            located = self._class(fact, base)
            if located is not None:
                found = self._method(located[0], located[1], method, seen)
                if found:
                    return found
        return None

    def _class_of(self, fact: ModuleFacts, function: str) -> str | None:
        owner = function
        while owner:
            owner = owner.rpartition(".")[0]
            if owner in fact.classes:
                return owner
        return None

    def _by_method_name(self, method: str) -> list[Function]:
        """The one method of that name in the tree, when only one class defines it."""
        found = self._methods.get(method, ())
        return list(found) if len(found) == 1 and method not in _COMMON_METHODS else []

    # -- Walking -----------------------------------------------------------------------------

    def callers_of(self, path: str, function: str, depth: int = 3) -> list[tuple[int, Caller]]:
        """The callers of a function up to `depth` levels, breadth first: (level, caller)."""
        found: list[tuple[int, Caller]] = []
        seen = {(path, function)}
        frontier = [(path, function)]
        for level in range(1, depth + 1):
            following = []
            for target in frontier:
                for caller in sorted(self.callers.get(target, ()), key=lambda c: (c.path, c.line, c.function)):
                    found.append((level, caller))
                    key = (caller.path, caller.function)
                    if key not in seen:
                        seen.add(key)
                        following.append(key)
            frontier = following
        return found

    def phases(self, entry_points: Iterable[tuple[str, Iterable[str]]] = ENTRY_POINTS) -> dict[Function, str]:
        """Each function's phase: that of the nearest entry point it is reached from (a
        breadth-first walk from all at once, in the order given on a tie). Functions that
        nothing reaches are absent."""
        # Each glob is a path part and a function part: the paths are matched once each, and
        # only the functions of matching files against the function parts.
        rules = []
        for phase, globs in entry_points:
            for glob in globs:
                path_glob, _, function_glob = glob.partition(":")
                rules.append((phase, re.compile(fnmatch.translate(path_glob)), re.compile(fnmatch.translate(function_glob or "*"))))
        phase_of: dict[Function, str] = {}
        queue: deque[Function] = deque()
        for phase, path_pattern, function_pattern in rules:
            for fact in self.modules.values():
                if not path_pattern.match(fact.path):
                    continue
                for name in (*fact.functions, ""):
                    if (fact.path, name) not in phase_of and function_pattern.match(name or "<module>"):
                        phase_of[fact.path, name] = phase
                        queue.append((fact.path, name))
        while queue:
            current = queue.popleft()
            for target in sorted(self.callees.get(current, set()) | self.maybe.get(current, set())):
                if target not in phase_of:
                    phase_of[target] = phase_of[current]
                    queue.append(target)
        return phase_of


def phase_of(graph_phases: Mapping[Function, str], path: str, function: str, scope: str) -> str:
    """An error's phase from its site: `tool` for code only SGLang's tests, benchmarks or
    examples run, else the phase of its function (or of its module, at module level), else
    `unreachable`."""
    if scope != "product":
        return "tool"
    return graph_phases.get((path, function)) or "unreachable"


# -- Facts of a source, kept per blob ----------------------------------------------------------------


def facts_to_json(facts: ModuleFacts) -> dict:
    return {
        "module": facts.module,
        "imports": facts.imports,
        "functions": facts.functions,
        "classes": {name: list(bases) for name, bases in facts.classes.items()},
        "calls": [[c.caller, c.callee, c.line, list(c.conditions)] for c in facts.calls],
    }


def facts_from_json(data: dict, path: str) -> ModuleFacts:
    return ModuleFacts(
        path,
        data["module"],
        dict(data["imports"]),
        dict(data["functions"]),
        {name: tuple(bases) for name, bases in data["classes"].items()},
        tuple(Call(caller, callee, line, tuple(conditions)) for caller, callee, line, conditions in data["calls"]),
    )


def source_facts(source, cache_dir, jobs: int | None = None) -> list[ModuleFacts]:
    """The facts of every Python file of `source`, read only for blobs the cache (`facts`, by
    blob sha, under a digest of this module) does not hold; files that do not parse are left
    out (`errorkb build` reports them)."""
    from generator import workers
    from generator.cache import Store, code_digest

    store = Store(cache_dir, "facts", code_digest([__file__]))
    found: list[ModuleFacts] = []
    missing = []
    for file in source.files():
        if not file.path.endswith(".py"):
            continue
        data = store.get(file.blob_sha)
        if isinstance(data, dict) and "module" in data:
            found.append(facts_from_json(data, file.path))
        elif not (isinstance(data, dict) and data.get("unparsable")):
            missing.append(file)
    chunks = [missing[start : start + 16] for start in range(0, len(missing), 16)]
    batches = [[(file.path, source.read(file)) for file in chunk] for chunk in chunks]
    for chunk, facts in zip(chunks, workers.mapped(_facts_batch, batches, 2, jobs)):
        for file, fact in zip(chunk, facts):
            store.put(file.blob_sha, fact if fact is not None else {"unparsable": True})
            if fact is not None:
                found.append(facts_from_json(fact, file.path))
    return sorted(found, key=lambda f: f.path)


def _facts_batch(batch: list[tuple[str, bytes]]) -> list[dict | None]:
    results = []
    for path, data in batch:
        try:
            results.append(facts_to_json(module_facts(ast.parse(data, filename=path), path)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            results.append(None)
    return results
