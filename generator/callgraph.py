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
import hashlib
import pickle
import sys
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from generator.model import PHASES, CallerNode, Callers, Route, site_scope

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
        # A module's own code runs when it is imported, at start-up (the walk does not follow
        # its calls).
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
        # Chosen per model or per request through registries the graph does not follow: the
        # multimodal processors that load a request's images, video and audio; the chat
        # template, reasoning and tool-call parsers; the grammar backends that compile a
        # request's constraint. A failure there fails that request.
        "*/sglang/srt/multimodal/processors/*:*",
        "*/sglang/srt/parser/*:*",
        "*/sglang/srt/constrained/*:*",
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
        # Built at start-up through registries the graph does not follow: the attention backend
        # the model runner makes by name (`ATTENTION_BACKENDS[name](runner)`, and the registry's
        # own constructors), the CUDA-graph buffers each graph runner asks it for, and the MoE
        # layers and speculative workers made with the model. Their other methods run while
        # serving (below).
        "*/sglang/srt/layers/attention/attention_registry.py:*",
        "*/sglang/srt/layers/attention/*:*.__init__",
        "*/sglang/srt/layers/attention/*:*.init_cuda_graph_state",
        "*/sglang/srt/layers/moe/*:*.__init__",
        "*/sglang/srt/speculative/*:*.__init__",
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

    def local(caller: str, name: str) -> str:
        """A bare name as the function `caller` sees it: a function defined in it or in a
        function around it (`outer.<locals>.name`), else the name as written."""
        scope = caller
        while scope:
            found = f"{scope}.<locals>.{name}"
            if found in functions:
                return found
            scope = scope.rpartition(".")[0].removesuffix(".<locals>")
        return name

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
        Call(caller, name, line, tuple(map(text, conditions)))
        for caller, callee, line, conditions in collector.calls
        if resolvable(name := local(caller, callee) if caller and "." not in callee else callee)
    )
    return ModuleFacts(path, module, imports, functions, classes, calls)


# Fields of each node type to walk: not those that hold a name, a number or a flag, nor an
# operator or a `ctx` (nodes with nothing inside), so that whatever else a field holds is a
# node, a list of nodes, or None. A walk over every expression of every file is most of the
# time the call graph's facts take (bench/README.md).
_LEAF_FIELDS = frozenset(("ctx", "op", "ops", "attr", "id", "arg", "conversion", "is_async", "kind", "type_comment", "name", "asname", "module", "level", "names"))
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(name for name in getattr(kind, "_fields", ()) if name not in _LEAF_FIELDS)
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
            # What a function defines is named as Python's `__qualname__` (and the sites) name it:
            # `outer.<locals>.inner`.
            self._names.append(f"{node.name}.<locals>")
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
        elif kind is ast.Return and type(node.value) is ast.Name:
            # A function handed back (a decorator's wrapper, a closure) runs where it is called.
            self._reference(node.value)
        else:
            # Any other statement, handler or case: its expressions, then its statements.
            for field in _fields(kind):
                value = getattr(node, field)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.expr):
                            self.expression(item)
                        elif item is not None:
                            self.statement(item)
                elif isinstance(value, ast.expr):
                    self.expression(value)
                elif value is not None:
                    self.statement(value)

    def expression(self, root: ast.expr) -> None:
        stack = [root]
        push, extend, pop = stack.append, stack.extend, stack.pop
        calls, function, conditions = self.calls, self._function, self._conditions
        while stack:
            node = pop()
            kind = type(node)
            if kind is ast.Name or kind is ast.Constant or node is None:
                continue
            if kind is ast.Attribute:
                push(node.value)
                continue
            if kind is ast.Call:
                name = _dotted(node.func)
                if name:
                    calls.append((function, name, node.lineno, conditions))
                else:
                    push(node.func)
                # A function passed along (a thread target, a callback, `partial(f, ...)`) may run.
                for argument in (*node.args, *(k.value for k in node.keywords)):
                    if type(argument) is ast.Name or type(argument) is ast.Attribute:
                        name = _dotted(argument)
                        if name:
                            calls.append((function, name, argument.lineno, conditions))
                        else:
                            push(argument)
                    else:
                        push(argument)
                continue
            # Lists hold nodes (a dict's `**` key is None), other fields a node or None.
            for field in _fields(kind):
                value = getattr(node, field)
                if type(value) is list:
                    extend(value)
                else:
                    push(value)

    def _reference(self, node: ast.AST) -> None:
        if type(node) is ast.Name or type(node) is ast.Attribute:
            name = _dotted(node)
            if name:
                self.calls.append((self._function, name, node.lineno, self._conditions))
                return
        self.expression(node)


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of names; `super().m` as `super.m`; "" for anything else."""
    if type(node) is ast.Name:
        return node.id
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


class Caller(NamedTuple):
    """One call of a function: the calling function, where, and the tests around the call."""

    path: str
    function: str
    line: int
    conditions: tuple[str, ...]


# How many callers a page lists at each level up from the raising function.
CALLER_WIDTHS = (6, 2, 1)


# How many classes may define a method for a call of it on an unknown object to count, in the
# phase walk, as a call of each.
_MAY_DISPATCH = 12
# Method names too common to resolve by name alone.
_COMMON_METHODS = frozenset({"__init__", "__call__", "forward", "get", "run", "update", "close", "start", "stop", "reset", "init", "load", "step", "apply"})


# What resolving one module's calls gave: its edges (caller, target path, target function, line,
# conditions), its calls of a method several classes define (caller, the definers), and the
# names it looked up: modules by name, and method names as `#name`. Resolving it again gives
# the same while its own facts and everything it looked up are the same (`GraphState`).
Resolved = tuple[tuple[tuple[str, str, str, int, tuple[str, ...]], ...], tuple[tuple[str, tuple[Function, ...]], ...], frozenset[str]]


class CallGraph:
    """Every function's callers, from the facts of every file. `resolved` holds modules'
    calls already resolved (by path); the others' are resolved here, from their facts."""

    def __init__(
        self, facts: Iterable[ModuleFacts], resolved: Mapping[str, Resolved] | None = None, methods: dict | None = None, callers: dict | None = None
    ) -> None:
        self.modules = modules_of(facts)
        self.by_path = {fact.path: fact for fact in self.modules.values()}
        # `methods` is `method_index(self.modules)`, when the caller has it.
        self.methods = methods if methods is not None else method_index(self.modules)
        self._probed: set[str] = set()
        resolved = resolved or {}
        self.resolved: dict[str, Resolved] = {
            path: resolved[path] if path in resolved else self.resolve_module(fact) for path, fact in self.by_path.items()
        }
        # Each function's callers, as tuples of `Caller`'s fields. With `callers` (as
        # `GraphState` keeps them) they are the caller's to bring up to date.
        self.callers: dict[Function, list[tuple]] = callers if callers is not None else callers_of_edges(self.resolved)
        self._callees: dict[Function, set[Function]] | None = None

    @property
    def callees(self) -> dict[Function, set[Function]]:
        """What each function calls, and (in the phase walk) may call: a call of a method several
        classes define (`self.backend.init_forward_metadata()`) may run any of them."""
        if self._callees is None:
            # From the callers: a graph kept between builds keeps its modules' calls only there.
            callees: dict[Function, set[Function]] = {}
            for target, callers in self.callers.items():
                for path, caller, _, _ in callers:
                    callees.setdefault((path, caller), set()).add(target)
            for path, (_, maybe, _) in self.resolved.items():
                for caller, definers in maybe:
                    callees.setdefault((path, caller), set()).update(definers)
            self._callees = callees
        return self._callees

    def resolve_module(self, fact: ModuleFacts) -> Resolved:
        """The calls of one module, resolved, with the names looked up to resolve them."""
        self._probed = probed = set()
        edges, maybe = [], {}
        for call in fact.calls:
            found = self.resolve(fact, call.caller, call.callee)
            for target_path, target_function in found:
                edges.append((call.caller, target_path, target_function, call.line, call.conditions))
            if not found and "." in call.callee:
                head, method = call.callee.split(".", 1)[0], call.callee.rpartition(".")[2]
                definers = self._definers(method)
                if 1 < len(definers) <= _MAY_DISPATCH and method not in _COMMON_METHODS and head not in fact.imports:
                    maybe.setdefault(call.caller, set()).update(definers)
        return tuple(edges), tuple((caller, tuple(sorted(targets))) for caller, targets in maybe.items()), frozenset(probed)

    def _module(self, name: str) -> ModuleFacts | None:
        self._probed.add(name)
        return self.modules.get(name)

    def _definers(self, method: str) -> tuple[Function, ...]:
        self._probed.add("#" + method)
        return self.methods.get(method, ())

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
            # A dataclass written without an `__init__` runs its `__post_init__` when made.
            return self._method(fact, dotted, "__init__", set()) or self._method(fact, dotted, "__post_init__", set())
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
            module = self._module(".".join(parts[:cut]))
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
            module = self._module(".".join(parts[:cut]))
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
        found = self._definers(method)
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
                for caller in map(Caller._make, sorted(self.callers.get(target, ()), key=lambda c: (c[0], c[2], c[1]))):
                    found.append((level, caller))
                    key = (caller.path, caller.function)
                    if key not in seen:
                        seen.add(key)
                        following.append(key)
            frontier = following
        return found

    def tree(self, path: str, function: str, widths: tuple[int, ...] = CALLER_WIDTHS) -> Callers:
        """The callers of a function as a tree, a level per width: at most that many callers of
        each function at that level, the product's before SGLang's tests, benchmarks and
        examples, then by place; a caller already on the way up is not followed again."""
        return named(self.plain_tree(path, function, widths))

    def plain_tree(self, path: str, function: str, widths: tuple[int, ...] = CALLER_WIDTHS) -> tuple:
        """`tree` as plain tuples: `(nodes, more)`, each node `(path, function, line,
        conditions, its callers)`, which pickle several times faster than named ones."""

        def level(target: Function, depth: int, chain: frozenset) -> tuple:
            found = sorted(self.callers.get(target, ()), key=lambda c: (site_scope(c[0]) != "product", c[0], c[2], c[1]))
            nodes = []
            for path, caller, line, conditions in found[: widths[depth]]:
                key = (path, caller)
                above = level(key, depth + 1, chain | {key}) if depth + 1 < len(widths) and key not in chain else ((), 0)
                nodes.append((path, caller, line, conditions, above))
            return tuple(nodes), len(found) - len(nodes)

        return level((path, function), 0, frozenset({(path, function)}))

    def phases(self, entry_points: Iterable[tuple[str, Iterable[str]]] = ENTRY_POINTS, seeds: Mapping[str, tuple] | None = None) -> dict[Function, str]:
        """Each function's phase: that of the nearest entry point it is reached from (a
        breadth-first walk from all at once, in the order given on a tie). Functions that
        nothing reaches are absent. `seeds` are `entry_seeds` by path, where already known."""
        rules = entry_rules(entry_points)
        seeds = seeds or {}
        start = sorted(
            (rule, path, position, name)
            for path, fact in self.by_path.items()
            for rule, position, name in (seeds[path] if path in seeds else entry_seeds(fact, rules))
        )
        phase_of: dict[Function, str] = {}
        queue: deque[Function] = deque()
        for rule, path, _, name in start:
            phase_of[path, name] = rules[rule][0]
            queue.append((path, name))
        callees = self.callees
        while queue:
            current = queue.popleft()
            # A module's own code runs at import, at start-up; what it calls (registries,
            # decorators, a script's main) is not argument resolution, and is phased by what
            # else reaches it.
            if not current[1]:
                continue
            for target in sorted(callees.get(current, ())):
                if target not in phase_of:
                    phase_of[target] = phase_of[current]
                    queue.append(target)
        return phase_of


def named(plain: tuple) -> Callers:
    """A tree of callers from `CallGraph.plain_tree`'s tuples."""
    nodes, more = plain
    return Callers(tuple(CallerNode(path, function, line, conditions, named(above)) for path, function, line, conditions, above in nodes), more)


def entry_rules(entry_points: Iterable[tuple[str, Iterable[str]]] = ENTRY_POINTS) -> list[tuple[str, re.Pattern, re.Pattern]]:
    """Each glob as its phase, a path pattern and a function pattern."""
    rules = []
    for phase, globs in entry_points:
        for glob in globs:
            path_glob, _, function_glob = glob.partition(":")
            rules.append((phase, re.compile(fnmatch.translate(path_glob)), re.compile(fnmatch.translate(function_glob or "*"))))
    return rules


def entry_seeds(fact: ModuleFacts, rules: list[tuple[str, re.Pattern, re.Pattern]]) -> tuple[tuple[int, int, str], ...]:
    """The entry points among a module's functions (and its module code, ""): for each, the
    first rule it matches, its position in the module and its name."""
    seeds = []
    names = (*fact.functions, "")
    for rule, (_, path_pattern, function_pattern) in enumerate(rules):
        if path_pattern.match(fact.path):
            seeds.extend((rule, position, name) for position, name in enumerate(names) if function_pattern.match(name or "<module>"))
    first: dict[str, tuple[int, int, str]] = {}
    for seed in seeds:
        first.setdefault(seed[2], seed)
    return tuple(sorted(first.values()))


def modules_of(facts: Iterable[ModuleFacts]) -> dict[str, ModuleFacts]:
    """The facts by module name; of two files that are one module, the first."""
    modules: dict[str, ModuleFacts] = {}
    for fact in facts:
        modules.setdefault(fact.module, fact)
    return modules


def method_index(modules: Mapping[str, ModuleFacts]) -> dict[str, tuple[Function, ...]]:
    """Method name -> the functions that define it, across classes."""
    methods: dict[str, list[Function]] = {}
    for fact in modules.values():
        for name in fact.functions:
            owner, _, method = name.rpartition(".")
            if owner in fact.classes:
                methods.setdefault(method, []).append((fact.path, name))
    return {method: tuple(definers) for method, definers in methods.items()}


def callers_of_edges(resolved: Mapping[str, Resolved], paths: Iterable[str] | None = None) -> dict[Function, list[tuple]]:
    """Each function's callers, from the resolved calls of `paths` (every module's by default),
    as plain tuples of `Caller`'s fields: a build keeps 120,000 of them between builds."""
    callers: dict[Function, list[tuple]] = {}
    for path in resolved if paths is None else paths:
        for caller, target_path, target_function, line, conditions in resolved[path][0]:
            callers.setdefault((target_path, target_function), []).append((path, caller, line, conditions))
    return callers


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


def facts_store(cache_dir):
    """Where the facts of each blob are kept, by blob sha, under a digest of this module."""
    from generator.cache import Store, code_digest

    return Store(cache_dir, "facts", code_digest([__file__]))


def source_facts(source, cache_dir, jobs: int | None = None) -> list[ModuleFacts]:
    """The facts of every Python file of `source` (`blob_facts`), by path."""
    files = [file for file in source.files() if file.path.endswith(".py")]
    return sorted(filter(None, blob_facts(files, cache_dir, source.read, jobs).values()), key=lambda f: f.path)


def lacking(files, cache_dir) -> list:
    """The Python files among `files` whose blobs' facts the cache does not hold."""
    store = facts_store(cache_dir)
    return [file for file in files if file.path.endswith(".py") and not store.has(file.blob_sha)]


def blob_facts(files, cache_dir, read, jobs: int | None = None) -> dict[str, ModuleFacts]:
    """The facts of `files` by path, read (`read(file)` gives a file's bytes, or None when it
    cannot) only for blobs the cache (`facts_store`) does not hold; None for a file that does
    not parse (`errorkb build` reports it), and nothing for one that could not be read."""
    from generator import workers

    store = facts_store(cache_dir)
    found: dict[str, ModuleFacts | None] = {}
    missing = []
    for file in files:
        data = store.get(file.blob_sha)
        if isinstance(data, dict) and "module" in data:
            found[file.path] = facts_from_json(data, file.path)
        elif isinstance(data, dict) and data.get("unparsable"):
            found[file.path] = None
        else:
            missing.append(file)
    texts = [(file, read(file)) for file in missing]
    texts = [(file, data) for file, data in texts if data is not None]
    chunks = [texts[start : start + 16] for start in range(0, len(texts), 16)]
    batches = [[(file.path, data) for file, data in chunk] for chunk in chunks]
    with store.batch():
        for chunk, facts in zip(chunks, workers.mapped(_facts_batch, batches, 2, jobs)):
            for (file, _), fact in zip(chunk, facts):
                store.put(file.blob_sha, fact if fact is not None else {"unparsable": True})
                found[file.path] = facts_from_json(fact, file.path) if fact is not None else None
    return found


class GraphState:
    """The call graph of the last build, kept in the cache so that a rebuild resolves again
    only the modules whose facts changed and those whose resolution looked up a name that
    changed (a module that came, went or changed, or a method name whose definers changed);
    walks the phases again only when some function or call between functions did; and makes
    again only the trees of callers that a changed list of callers reaches (`Routes`). What
    it gives is what `CallGraph(source_facts(...))` gives."""

    def __init__(self) -> None:
        self.blobs: dict[str, str] = {}
        # By path: the module's facts without its calls (what other modules' resolution reads),
        # its calls resolved, its entry points (`entry_seeds`), and a digest of its functions
        # and of the calls between functions it makes.
        self.summaries: dict[str, ModuleFacts] = {}
        self.resolved: dict[str, Resolved] = {}
        self.seeds: dict[str, tuple] = {}
        self.shapes: dict[str, str] = {}
        self.methods: dict[str, tuple[Function, ...]] = {}
        self.callers: dict[Function, list[tuple]] = {}
        self.phases: dict[Function, str] = {}
        # The functions whose callers changed in the last update.
        self.touched: set[Function] = set()
        # By site function: a digest of its tree of callers, the tree (`CallGraph.plain_tree`)
        # and the flags its tests may name (`condition_flags`).
        self.routes: dict[Function, tuple[str, tuple, tuple[str, ...]]] = {}

    def update(self, blobs: Mapping[str, str], facts_of) -> tuple[CallGraph, dict[Function, str]]:
        """The graph of the Python files `blobs` (path -> blob sha) and its phases;
        `facts_of(paths)` gives the full facts of those paths (`blob_facts`)."""
        changed = {path for path in self.blobs.keys() | blobs.keys() if self.blobs.get(path) != blobs.get(path)}
        for path in changed:
            self.summaries.pop(path, None)
            self.seeds.pop(path, None)
        found = facts_of(sorted(path for path in changed if path in blobs))
        full = {path: fact for path, fact in found.items() if fact is not None}
        self.summaries.update(full)
        # Whose resolution looked up a module that changed, or a method whose definers did.
        index = method_index(modules_of(self.summaries[path] for path in sorted(self.summaries)))
        names = {module_name(path) for path in changed}
        names.update("#" + method for method in index.keys() | self.methods.keys() if index.get(method) != self.methods.get(method))
        again = [path for path, (_, _, probed) in self.resolved.items() if path not in changed and not names.isdisjoint(probed)]
        full.update((path, fact) for path, fact in facts_of(sorted(again)).items() if fact is not None)
        redo = changed | set(again)
        for path in redo:
            self.resolved.pop(path, None)
        cold = not self.resolved
        graph = CallGraph([full.get(path) or self.summaries[path] for path in sorted(self.summaries)], self.resolved, index, None if cold else self.callers)
        # The callers of the functions the modules resolved again call, or called. The state
        # keeps each module's calls in the callers only (`_slim`).
        if cold:
            self.callers, self.touched = graph.callers, set(graph.callers)
        else:
            before = {target for target, callers in self.callers.items() if any(caller[0] in redo for caller in callers)}
            fresh = callers_of_edges(graph.resolved, sorted(redo & graph.resolved.keys()))
            self.touched = before | fresh.keys()
            for target in self.touched:
                kept = [caller for caller in self.callers.get(target, ()) if caller[0] not in redo] + fresh.get(target, [])
                if kept:
                    self.callers[target] = kept
                else:
                    self.callers.pop(target, None)
        graph.callers = self.callers
        self.summaries = {path: _summary(full.get(path) or fact) for path, fact in self.summaries.items()}
        self.methods = index
        # A file whose facts could not be had is read again by the next build.
        self.blobs = {path: blob for path, blob in blobs.items() if path in found or path not in changed}
        # The phases follow functions and the calls between them, not lines or conditions.
        shapes = {}
        for path in graph.resolved.keys() - self.shapes.keys() | (redo & graph.resolved.keys()):
            edges, maybe, _ = graph.resolved[path]
            calls = sorted({(caller, target_path, target_function) for caller, target_path, target_function, _, _ in edges})
            shape = repr((sorted(graph.by_path[path].functions), calls, maybe))
            shapes[path] = hashlib.blake2b(shape.encode(), digest_size=12).hexdigest()
        moved = any(self.shapes.get(path) != shape for path, shape in shapes.items()) or self.shapes.keys() - graph.resolved.keys()
        self.shapes = {path: shapes.get(path) or self.shapes[path] for path in graph.resolved}
        self.resolved = {path: _slim(found) for path, found in graph.resolved.items()}
        if moved or not self.phases:
            rules = entry_rules()
            self.seeds = {path: self.seeds.get(path) or entry_seeds(fact, rules) for path, fact in graph.by_path.items()}
            self.phases = graph.phases(seeds=self.seeds)
        return graph, self.phases


@dataclass
class Routes:
    """How SGLang gets to the sites of a build, by (path, function): each one's phase, a key of
    its route (its phase and a digest of its tree of callers), and its tree as plain tuples,
    made a `Route` when asked for (`get`): the pages of a rebuild ask for a few."""

    phases: dict[Function, str]
    keys: dict[Function, str]
    trees: dict[Function, tuple]
    # The flags the tests around the calls of each tree may name (`condition_flags`).
    flags: dict[Function, tuple[str, ...]]

    def phase(self, where: Function) -> str | None:
        return self.phases.get(where)

    def key(self, where: Function) -> str:
        return self.keys.get(where, "")

    def flags_of(self, sites) -> tuple[str, ...]:
        """The flags the callers' tests of any of `sites` may name, sorted."""
        return tuple(sorted({flag for site in sites for flag in self.flags.get((site.path, site.function), ())}))

    def get(self, where: Function) -> Route | None:
        phase = self.phases.get(where)
        return None if phase is None else Route(phase, named(self.trees[where]))


def routes_of(graph: CallGraph, phases: Mapping[Function, str], state: GraphState, functions: Iterable[Function]) -> Routes:
    """The `Routes` of `functions`. A tree of callers is kept from the last build (`state`)
    unless a list of callers it follows (its function's, or a listed caller's) changed."""
    kept, touched = state.routes, state.touched
    made: dict[Function, tuple[str, tuple, tuple[str, ...]]] = {}
    for where in functions:
        found = kept.get(where)
        if found is None or where in touched or not touched.isdisjoint(_expanded(found[1])):
            tree = graph.plain_tree(*where)
            found = (hashlib.blake2b(pickle.dumps(tree, protocol=5), digest_size=8).hexdigest(), tree, condition_flags(tree))
        made[where] = found
    state.routes = made
    found_phases = {where: phase_of(phases, where[0], where[1], site_scope(where[0])) for where in made}
    return Routes(
        found_phases,
        {where: f"{found_phases[where]}:{digest}" for where, (digest, _, _) in made.items()},
        {where: tree for where, (_, tree, _) in made.items()},
        {where: flags for where, (_, _, flags) in made.items() if flags},
    )


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"(['\"]).*?\1")


def condition_flags(tree: tuple) -> tuple[str, ...]:
    """The flags the tests around the calls of a plain tree may name: each name in them with
    an underscore inside (`enable_broadcast_mm_inputs_process`), written as a flag; a page
    shows those that are its server's. Names without one (`device`, `model`) are too often
    something else's."""
    names: set[str] = set()
    for path, function, _, conditions, above in tree[0]:
        for condition in conditions:
            names.update(name for name in _IDENTIFIER.findall(_STRING.sub(" ", condition)) if "_" in name.strip("_"))
        names.update(flag[2:].replace("-", "_") for flag in condition_flags(above))
    return tuple(sorted("--" + name.replace("_", "-") for name in names))


def _expanded(tree: tuple) -> Iterator[Function]:
    """The callers a plain tree lists, at every level."""
    for path, function, _, _, above in tree[0]:
        yield path, function
        yield from _expanded(above)


def kept_graph(files, cache_dir, read, jobs: int | None = None) -> tuple[CallGraph, dict[Function, str], GraphState]:
    """The call graph of `files` and its phases, from the state the last build kept in the
    cache (`GraphState`) brought up to date, the facts of new blobs read with `read(file)`
    (`blob_facts`); and the state, which only a build writes back (`build_routes`): its trees
    of callers are kept by what changed since the update before."""
    from generator.cache import read_cache

    state = read_cache(_state_path(cache_dir), GraphState) or GraphState()
    python = {file.path: file for file in files if file.path.endswith(".py")}
    graph, phases = state.update({name: file.blob_sha for name, file in python.items()}, lambda paths: blob_facts([python[p] for p in paths], cache_dir, read, jobs))
    return graph, phases, state


def _state_path(cache_dir) -> Path:
    from generator.cache import kept

    return kept(cache_dir, "callgraph", [__file__, sys.modules[site_scope.__module__].__file__], suffix="-state")


def build_routes(files, sites, cache_dir, texts: Mapping[str, bytes], jobs: int | None = None) -> Routes:
    """How SGLang gets to each of `sites` (`Routes`), from the call graph of `files`, whose
    facts are in the cache (`facts_store`) or parsed from `texts` (by path); the graph is kept
    in the cache between builds (`GraphState`). Reads no source, so that another process can
    run it while the build reads its own."""
    from generator.cache import write_cache

    graph, phases, state = kept_graph(files, cache_dir, lambda file: texts.get(file.path), jobs)
    routes = routes_of(graph, phases, state, sorted({(site.path, site.function) for site in sites}))
    write_cache(_state_path(cache_dir), pickle.dumps(state, protocol=5))
    return routes


def _slim(resolved: Resolved) -> Resolved:
    """A module's resolved calls without its edges, which the callers hold."""
    return resolved if not resolved[0] else ((), resolved[1], resolved[2])


def _summary(fact: ModuleFacts) -> ModuleFacts:
    return fact if not fact.calls else ModuleFacts(fact.path, fact.module, fact.imports, fact.functions, fact.classes, ())


def _facts_batch(batch: list[tuple[str, bytes]]) -> list[dict | None]:
    results = []
    for path, data in batch:
        try:
            results.append(facts_to_json(module_facts(ast.parse(data, filename=path), path)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            results.append(None)
    return results
