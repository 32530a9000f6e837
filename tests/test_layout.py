"""The architecture as rules the code must keep: no import cycles between modules or between the
pipeline's folders, the trust boundary (verify/) importing nothing that writes or proposes kernels,
small modules, and a command line that only parses and calls. Read from the source with `ast`, so a
function-level import counts as much as a top-level one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "kernelgen"
MAX_LINES = 400
# What the judge may never import: the code that writes, proposes or schedules kernels. A hostile
# kernel's verdict must not depend on anything an LLM reply or the optimizer can reach.
UNTRUSTED = ("kernelgen.llm", "kernelgen.optimize", "kernelgen.offline", "kernelgen.backends", "kernelgen.new",
             "kernelgen.batch", "kernelgen.cli", "kernelgen.refresh", "kernelgen.export")


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every kernelgen module this file imports (anywhere in it), resolved to a module that exists."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:  # `from pkg import submodule` depends on the submodule, not on pkg's face
                sub = f"{node.module}.{a.name}"
                names.add(sub if sub in MODULES else node.module)
    return {n for n in names if n.startswith("kernelgen") and n in MODULES}


MODULES = {_module(p): p for p in PKG.rglob("*.py")}
GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _folder(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_the_rules_read_real_imports():
    # guards against a parser that reads nothing and makes every rule below pass
    assert len(MODULES) > 80
    assert "kernelgen.verify.judge.judge" in GRAPH["kernelgen.verify.judge.runner"]
    assert "kernelgen.optimize.round" in GRAPH["kernelgen.optimize.loop"]


def test_no_import_cycle_between_modules():
    assert _cycle(GRAPH) is None


def test_no_import_cycle_between_folders():
    # a package's own __init__ re-exporting its modules is not a cycle of the pipeline
    folders: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        folders.setdefault(_folder(m), set()).update(_folder(d) for d in deps if _folder(d) != _folder(m))
    assert _cycle(folders) is None


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("kernelgen.verify")))
def test_the_judge_imports_nothing_untrusted(module):
    bad = sorted(d for d in GRAPH[module] if d.startswith(UNTRUSTED))
    assert not bad, f"{module} imports {bad}"


WORKER_SIDE = "kernelgen.verify.worker"
JUDGE_SIDE = "kernelgen.verify.judge"
# What runs in a worker process beside the request loop: recording (in the candidate's own process) and
# replaying (in a process that never imports a candidate). Worker-side, like worker/ itself.
WORKER_PACKAGES = (WORKER_SIDE, "kernelgen.verify.record", "kernelgen.verify.replay")


def _reach(module: str) -> set[str]:
    """Every kernelgen module `module` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for d in GRAPH[todo.pop()] - seen:
            seen.add(d)
            todo.append(d)
    return seen


def test_verify_is_split_by_the_process_each_file_runs_in():
    """verify/ reads record | replay | judge: record/ (runs in the candidate's own process), replay/ (in a
    process that never imports a candidate), worker/ (the request loop and sandbox of both), judge/ (the
    trusted process) and, at its top level, only what they import; nothing else lives there."""
    verify = {m for m in MODULES if m.startswith("kernelgen.verify")}
    assert {m for m in verify if m.startswith(WORKER_SIDE + ".")} >= {f"{WORKER_SIDE}.server", f"{WORKER_SIDE}.guard",
                                                                        f"{WORKER_SIDE}.sandbox", f"{WORKER_SIDE}.tamper"}
    assert {"kernelgen.verify.record.calls", "kernelgen.verify.replay.executor", "kernelgen.verify.replay.extract"} <= verify
    assert f"{JUDGE_SIDE}.judge" in verify and f"{JUDGE_SIDE}.accuracy" in verify
    shared = {m for m in verify if m.count(".") == 2 and m not in (*WORKER_PACKAGES, JUDGE_SIDE)}
    used_by_worker = {d for m in verify if m.startswith(WORKER_PACKAGES) for d in _reach(m)}
    not_shared = sorted(m for m in shared if m not in used_by_worker)
    assert not not_shared, f"{not_shared} sit beside judge/ and worker/ but the worker never imports them: move them into judge/"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith(WORKER_PACKAGES)
                                          or (m.startswith("kernelgen.verify.") and m.count(".") == 2
                                              and m not in (JUDGE_SIDE,))))
def test_worker_side_code_reaches_nothing_judge_side(module):
    """What runs beside a candidate (or is imported there) cannot lead, by any chain of imports, to the
    judge's code: a candidate that walks the worker's modules finds no judge object to rebind."""
    bad = sorted(d for d in _reach(module) if d.startswith(JUDGE_SIDE))
    assert not bad, f"{module} reaches {bad}"


def test_modules_are_small():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long


MAX_FUNCTION_LINES = 80  # a function a reader takes in at once; STYLE.md


def test_functions_are_short():
    long = sorted(f"{path.relative_to(PKG.parent)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
                  for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES)
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: split them: {long}"


def test_the_command_line_only_parses_and_calls():
    """cli.py turns arguments into one library call per command and results into messages and exit
    codes: no file writes, no subprocesses, no kernels, no loops over operators of its own."""
    tree = ast.parse((PKG / "cli.py").read_text(encoding="utf-8"))
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not calls & {"write_text", "write_bytes", "atomic_write", "Popen", "run_round", "check_accuracy",
                        "measure_performance", "exec", "compile"}
    assert not {d for d in GRAPH["kernelgen.cli"] if d.startswith(("kernelgen.verify.judge.judge", "kernelgen.verify.worker",
                                                                   "kernelgen.offline.", "kernelgen.llm.client"))}
