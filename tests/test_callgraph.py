"""The static call graph: who calls a function and under which conditions, how names resolve,
each function's phase, and `errorkb callers` on a real repository."""

from __future__ import annotations

import ast
import json
import pickle
import textwrap
from pathlib import Path

import pytest

from generator.callgraph import CallGraph, module_facts, phase_of
from generator.cli import main
from tests.conftest import make_repo

ROOT = "python/sglang/srt/"

FILES = {
    ROOT + "utils/common.py": '''
        def fail(message):
            raise ValueError(message)

        def check_size(size):
            if size <= 0:
                fail("size must be positive")
    ''',
    # A package that re-exports a helper, as `sglang.srt.utils` does.
    ROOT + "utils/__init__.py": '''
        from .common import check_size
    ''',
    ROOT + "arg_groups/memory_hook.py": '''
        from sglang.srt.utils import check_size

        def resolve_memory(args):
            if args.mem_fraction is not None:
                check_size(args.mem_fraction)
            else:
                pass
    ''',
    ROOT + "managers/base.py": '''
        class Base:
            def validate(self):
                raise RuntimeError("base")
    ''',
    ROOT + "managers/scheduler.py": '''
        import threading
        from sglang.srt.managers.base import Base
        from . import helpers

        class Scheduler(Base):
            def event_loop(self):
                if self.enable_x:
                    self.step()
                else:
                    self.validate()
                threading.Thread(target=helpers.watch).start()

            def step(self):
                super().validate()
                self.pool.very_unique_method_name()

        class Pool:
            def very_unique_method_name(self):
                raise RuntimeError("pool")
    ''',
    ROOT + "managers/helpers.py": '''
        def watch():
            raise RuntimeError("watch")
    ''',
    ROOT + "mem_cache/unused.py": '''
        def never_called():
            raise ValueError("nobody calls me")
    ''',
}

ENTRIES = (
    ("launch", ("*/sglang/srt/arg_groups/*:*",)),
    ("serving", ("*/sglang/srt/managers/scheduler.py:Scheduler.event_loop",)),
)


def graph() -> CallGraph:
    return CallGraph(module_facts(ast.parse(textwrap.dedent(text)), path) for path, text in FILES.items())


def callers(g: CallGraph, path: str, function: str, depth: int = 3) -> list[tuple[int, str, int, tuple[str, ...]]]:
    return [(level, c.function, c.line, c.conditions) for level, c in g.callers_of(ROOT + path, function, depth)]


def test_callers_follow_imports_through_re_exports_with_the_conditions_around_each_call():
    g = graph()
    assert callers(g, "utils/common.py", "fail") == [
        (1, "check_size", 7, ("size <= 0",)),
        (2, "resolve_memory", 6, ("args.mem_fraction is not None",)),
    ]
    assert callers(g, "utils/common.py", "fail", depth=1) == [(1, "check_size", 7, ("size <= 0",))]


def test_methods_resolve_through_self_super_base_classes_unique_names_and_callbacks():
    g = graph()
    # `self.validate()` finds the base class's method; `super().validate()` too.
    assert [(c[1], c[3]) for c in callers(g, "managers/base.py", "Base.validate", 1)] == [
        ("Scheduler.event_loop", ("not (self.enable_x)",)),
        ("Scheduler.step", ()),
    ]
    # A method only one class defines is found from any receiver.
    assert [c[1] for c in callers(g, "managers/scheduler.py", "Pool.very_unique_method_name", 1)] == ["Scheduler.step"]
    # A function handed to a thread may run: it is called.
    assert [c[1] for c in callers(g, "managers/helpers.py", "watch", 1)] == ["Scheduler.event_loop"]
    assert callers(g, "mem_cache/unused.py", "never_called") == []


def test_a_call_is_found_wherever_an_expression_can_hold_it():
    # Each `c<n>()` sits in a different kind of node the walk must look inside; `skip` is a
    # builtin-like name nothing defines, so only the calls of `c<n>` are kept.
    names = [f"c{n}" for n in range(1, 21)]
    text = "\n".join(f"def {name}(): pass" for name in names) + textwrap.dedent(
        """
        async def caller(xs, d):
            a = {**c1(), "k": c2()}
            b = [c3() for x in xs if c4()]
            f = lambda y=c5(): c6()
            g = f"{c7()!r:>{c8()}}"
            h = xs[c9():c10()]
            i = -c11() + (c12() if c13() else 0) < c14()
            j = await c15()
            k = (*c16(), c17().attr.chain)
            with c18() as m:
                pass
            match c19():
                case {"k": v} if c20():
                    pass
        """
    )
    facts = module_facts(ast.parse(text), ROOT + "managers/walk.py")
    assert sorted({call.callee for call in facts.calls if call.caller == "caller"}, key=lambda n: int(n[1:])) == names


def test_making_a_dataclass_without_an_init_calls_its_post_init():
    """`pool_configurator.py`'s `MemoryPoolConfig.__post_init__` raises "Not enough memory"
    when the config is made: the generated `__init__` calls it, so making the class is a call
    of it. A class with an `__init__` of its own is a call of that."""
    files = {
        ROOT + "model_executor/pool_configurator.py": '''
            from dataclasses import dataclass

            @dataclass
            class MemoryPoolConfig:
                max_total_num_tokens: int

                def __post_init__(self):
                    if self.max_total_num_tokens <= 0:
                        raise RuntimeError("Not enough memory.")

            class Written:
                def __init__(self):
                    pass

                def __post_init__(self):
                    raise RuntimeError("never called on its own")
        ''',
        ROOT + "arg_groups/memory_hook.py": '''
            from sglang.srt.model_executor.pool_configurator import MemoryPoolConfig, Written

            def resolve_memory(args):
                Written()
                return MemoryPoolConfig(args.tokens)
        ''',
    }
    g = CallGraph(module_facts(ast.parse(textwrap.dedent(text)), path) for path, text in files.items())
    assert callers(g, "model_executor/pool_configurator.py", "MemoryPoolConfig.__post_init__", 1) == [(1, "resolve_memory", 6, ())]
    assert callers(g, "model_executor/pool_configurator.py", "Written.__init__", 1) == [(1, "resolve_memory", 5, ())]
    assert callers(g, "model_executor/pool_configurator.py", "Written.__post_init__", 1) == []
    assert phase_of(g.phases(ENTRIES), ROOT + "model_executor/pool_configurator.py", "MemoryPoolConfig.__post_init__", "product") == "launch"


def test_a_function_defined_in_another_is_called_by_it_under_its_own_name():
    """`schedule_batch.py`'s `_force_track_h` is defined inside the method that calls it, and
    its assert's site is `ScheduleBatch.<method>.<locals>._force_track_h`: it takes the phase of
    the method and lists the method's calls, each with its conditions. A closure handed back
    (a decorator's wrapper) runs where its maker is called."""
    files = {
        ROOT + "managers/schedule_batch.py": '''
            def _force_track_h(i):
                raise ValueError("the module's own, never called")

            class ScheduleBatch:
                def prepare(self, req):
                    def _force_track_h(i):
                        assert i % 64 == 0
                        return i

                    if req.tracked:
                        _force_track_h(req.length)
                    return [_force_track_h(n) for n in req.seqlens]

            def register(name):
                def decorator(cls):
                    raise ValueError(f"{name} is registered twice")
                return decorator
        ''',
        ROOT + "managers/scheduler.py": '''
            from sglang.srt.managers.schedule_batch import ScheduleBatch, register

            class Scheduler:
                def event_loop(self):
                    batch = ScheduleBatch()
                    batch.prepare(self.req)
                    register("x")
        ''',
    }
    g = CallGraph(module_facts(ast.parse(textwrap.dedent(text)), path) for path, text in files.items())
    local = "ScheduleBatch.prepare.<locals>._force_track_h"
    assert callers(g, "managers/schedule_batch.py", local, 1) == [(1, "ScheduleBatch.prepare", 12, ("req.tracked",)), (1, "ScheduleBatch.prepare", 13, ())]
    assert callers(g, "managers/schedule_batch.py", "_force_track_h", 1) == []
    phases = g.phases(ENTRIES)
    assert phase_of(phases, ROOT + "managers/schedule_batch.py", local, "product") == "serving"
    assert phase_of(phases, ROOT + "managers/schedule_batch.py", "register.<locals>.decorator", "product") == "serving"
    assert phase_of(phases, ROOT + "managers/schedule_batch.py", "_force_track_h", "product") == "unreachable"


def test_each_function_takes_the_phase_of_the_nearest_entry_point_and_the_rest_are_unreachable():
    phases = graph().phases(ENTRIES)
    assert phase_of(phases, ROOT + "utils/common.py", "fail", "product") == "launch"
    assert phase_of(phases, ROOT + "managers/base.py", "Base.validate", "product") == "serving"
    assert phase_of(phases, ROOT + "managers/helpers.py", "watch", "product") == "serving"
    assert phase_of(phases, ROOT + "mem_cache/unused.py", "never_called", "product") == "unreachable"
    # Code only SGLang's own tests run is a tool's, whatever the graph says.
    assert phase_of(phases, ROOT + "utils/common.py", "fail", "test") == "tool"


def test_errorkb_callers_prints_each_location_its_phase_and_callers(tmp_path, capsys):
    (sha,) = make_repo(tmp_path / "up", [FILES])
    source = ["--source", f"git:{tmp_path / 'up'}@{sha}", "--cache-dir", str(tmp_path / "cache")]
    assert main(["extract", *source]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    fail = next(row["id"] for row in rows if row.get("function") == "fail")
    unused = next(row["id"] for row in rows if row.get("message") == "nobody calls me")
    assert main(["callers", fail, unused, *source]) == 0
    out = capsys.readouterr().out
    assert "python/sglang/srt/utils/common.py:3 in fail  [launch]" in out
    assert "<- check_size (python/sglang/srt/utils/common.py:7)  when `size` is at most `0`" in out
    assert "<- resolve_memory (python/sglang/srt/arg_groups/memory_hook.py:6)  when `mem_fraction` is set" in out
    assert "in never_called  [unreachable]\n    nothing in the tree calls it" in out
    # The second run reads the facts kept by blob, and says the same.
    assert main(["callers", fail, unused, "--json", *source]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [location["phase"] for item in report for location in item["locations"]] == ["launch", "unreachable"]
    assert main(["callers", "0123456789abcdef", *source]) == 1
    assert "callers: no error 0123456789abcdef" in capsys.readouterr().err


@pytest.mark.real
def test_phases_on_the_labelled_set_and_the_callers_issue_18_names(sglang):
    from generator.callgraph import source_facts
    from generator.config import Config
    from generator.model import scope_of
    from generator.upstream import open_source
    from tests.conftest import test_cache_dir

    source = open_source("pypi:sglang==0.5.23", Config(), test_cache_dir())
    graph = CallGraph(source_facts(source, test_cache_dir()))
    phases = graph.phases()
    labels = json.loads((Path(__file__).parent / "data" / "phase_labels.json").read_text())
    located = {(site.path, site.function) for site in sglang.sites}
    assert len(labels) >= 100 and all((label["path"], label["function"]) in located for label in labels)
    right = [phase_of(phases, label["path"], label["function"], scope_of([label["path"]])) == label["phase"] for label in labels]
    # 75 of 110 when the set was made, 77 since the request entry points for registries (README:
    # `errorkb callers`), 78 since a function defined in another is called by it; a change that
    # loses more than a few is a regression.
    assert sum(right) >= 75
    # Issue #18's examples: nothing reaches `_validate_grid`; the multimodal broadcast runs only
    # under --enable-broadcast-mm-inputs-process.
    grid = ("python/sglang/srt/mem_cache/hicache_key_scheme.py", "_validate_grid")
    assert phase_of(phases, *grid, "product") == "unreachable"
    broadcast = graph.callers_of("python/sglang/srt/managers/scheduler.py", "Scheduler._process_and_broadcast_mm_inputs", 1)
    assert [(c.line, c.conditions) for _, c in broadcast] == [(2843, ("get_mm().enable_broadcast_mm_inputs_process",))]


def _snapshot(g: CallGraph, phases: dict) -> tuple:
    callers = {target: sorted(found) for target, found in g.callers.items()}
    return callers, {k: sorted(v) for k, v in g.callees.items() if v}, phases


def test_a_graph_kept_between_builds_is_the_graph_of_the_files_whatever_changed():
    from generator.callgraph import GraphState, routes_of

    def facts_of(files):
        return lambda paths: {path: module_facts(ast.parse(files[path]), path) for path in paths}

    base = {path: textwrap.dedent(text) for path, text in FILES.items()}
    edits = [
        dict(base),
        # A helper's body changes, lines move: resolution of its callers is unchanged.
        {**base, ROOT + "utils/common.py": "\n\n" + base[ROOT + "utils/common.py"]},
        # A module the others import goes: the re-export no longer resolves.
        {path: text for path, text in base.items() if path != ROOT + "utils/__init__.py"},
        # It comes back, and a second class now defines the once unique method name.
        {**base, ROOT + "managers/other.py": "class Other:\n    def very_unique_method_name(self):\n        pass\n"},
        # The call that reached `never_called` appears in an unchanged module's import target.
        {**base, ROOT + "mem_cache/unused.py": base[ROOT + "mem_cache/unused.py"] + "\ndef start():\n    never_called()\n"},
        dict(base),
    ]
    state = GraphState()
    for files in edits:
        blobs = {path: str(hash(text)) for path, text in files.items()}
        kept, kept_phases = state.update(blobs, facts_of(files))
        full = CallGraph(facts_of(files)(sorted(files)).values())
        assert _snapshot(kept, kept_phases) == _snapshot(full, full.phases())
        # The routes' keys kept from the last update are those of the graph's trees.
        functions = sorted({*full.callers, *state.routes, (ROOT + "mem_cache/unused.py", "never_called")})
        routes, fresh = routes_of(kept, kept_phases, state, functions), routes_of(full, full.phases(), GraphState(), functions)
        assert routes.keys == fresh.keys and [routes.get(f) for f in functions] == [fresh.get(f) for f in functions]
        # And through a pickle, as the cache keeps it.
        state = pickle.loads(pickle.dumps(state))


def test_the_tree_of_callers_lists_each_level_up_to_its_width_and_counts_the_rest():
    g = graph()
    tree = g.tree(ROOT + "utils/common.py", "fail", widths=(1, 1, 1))
    (first,) = tree.nodes
    assert (first.function, first.line, first.conditions, tree.more) == ("check_size", 7, ("size <= 0",), 0)
    (second,) = first.callers.nodes
    assert (second.path, second.function) == (ROOT + "arg_groups/memory_hook.py", "resolve_memory")
    # Two callers of `Base.validate`, one listed at width 1.
    tree = g.tree(ROOT + "managers/base.py", "Base.validate", widths=(1,))
    assert [n.function for n in tree.nodes] == ["Scheduler.event_loop"] and tree.more == 1


def test_a_file_whose_facts_could_not_be_read_is_read_by_the_next_update():
    from generator.callgraph import GraphState

    files = {path: textwrap.dedent(text) for path, text in FILES.items()}
    blobs = {path: str(hash(text)) for path, text in files.items()}
    state = GraphState()
    state.update(blobs, lambda paths: {})
    kept, _ = state.update(blobs, lambda paths: {path: module_facts(ast.parse(files[path]), path) for path in paths})
    full = CallGraph(module_facts(ast.parse(text), path) for path, text in files.items())
    assert _snapshot(kept, kept.phases()) == _snapshot(full, full.phases())
