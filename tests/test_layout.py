"""The architecture as rules the code must keep: no import cycles between modules or between the
pipeline's folders, the trust boundary (verify/) importing nothing that writes or proposes kernels,
small modules and functions (the one home of the size rules), a command line that only parses and
calls, and tests/ that mirror the package. Read from the source with `ast`, so a function-level import
counts as much as a top-level one."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "kernelgen"
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


# --- sizes: the one place they are written (README.md states them: "Tests mirror the package...") ------
MAX_LINES = 400  # a module with one job
MAX_FUNCTION_LINES = 80  # a function a reader takes in at once
# Parameters, `self` and `cls` apart. Past 14 a call cannot be read without the signature open beside it:
# pass a model instead. 14 is llm/repair.py's write_and_repair, the longest when this rule was written.
# A command's options are its parameters by typer's design (`@app.command`): those are exempt.
MAX_PARAMETERS = 14


FUNCTIONS = [(path, node) for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_modules_are_small():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: split them by job: {long}"


def test_functions_are_short():
    long = sorted(f"{path.relative_to(PKG.parent)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
                  for path, node in FUNCTIONS if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES)
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: split them: {long}"


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return len(named) - bool(named and named[0].arg in ("self", "cls"))


def _a_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
               for d in node.decorator_list)


def test_functions_take_few_parameters():
    counts = {f"{path.relative_to(PKG.parent)}:{node.name}": _parameters(node) for path, node in FUNCTIONS}
    assert max(counts.values()) >= 10, "the count reads no parameters"  # a parser that reads nothing passes nothing
    many = sorted(f"{path.relative_to(PKG.parent)}:{node.name} ({_parameters(node)})" for path, node in FUNCTIONS
                  if _parameters(node) > MAX_PARAMETERS and not _a_command(node))
    assert not many, f"functions over {MAX_PARAMETERS} parameters: pass a model: {many}"


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


# The offline generator's families: the folders whose face (<folder>/family.py) the registry lists.
OFFLINE = "kernelgen.offline"
FAMILIES = sorted(m.split(".")[2] for m in GRAPH[f"{OFFLINE}.registry"] if m.startswith(OFFLINE + ".") and m.endswith(".family")
                  and m.count(".") == 3)


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["kernelgen", "offline"] and parts[2] in FAMILIES else None


def test_the_offline_families_are_read_from_the_registry():
    assert {"pointwise", "rows", "matmul", "conv", "nd"} <= set(FAMILIES)


def test_no_offline_family_imports_another():
    """A family stands on the front end and the engines (frame/, stages/), never on another family:
    what two families share belongs to an engine."""
    bad = sorted(f"{m} imports {d}" for m in GRAPH for d in GRAPH[m]
                 if _family(m) and _family(d) and _family(d) != _family(m))
    assert not bad, bad


def test_a_family_s_modules_serve_that_family_only():
    """No module of one family lives in another's folder: a family's modules are imported from its own
    folder only (its face also from the registry), so nothing another family or an engine needs sits
    there. A stage kind a family brings to the stage engine goes through kernelgen.offline.stages.anchors."""
    registry = f"{OFFLINE}.registry"
    bad = sorted(f"{m} imports {d}" for m in GRAPH for d in GRAPH[m]
                 if _family(d) and _family(m) != _family(d) and not (m == registry and d.endswith(".family")))
    assert not bad, bad


# What the offline generator writes, as checked in (tests/offline/snapshots: one file per family and form).
SNAPSHOTS = sorted((PKG.parent / "tests" / "offline" / "snapshots").glob("*.py"))


def test_the_snapshots_are_read():
    assert len(SNAPSHOTS) >= 20


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_a_generated_file_defines_and_imports_only_what_it_uses_kernels_first(path: Path):
    """A generated file carries the helpers it calls and no other, imports from KernelGen's host runtime
    (kernelgen.runtime.v1: templates/offline/_runtime.py.j2) only the names it uses, and reads like
    Triton's tutorials: the kernels first."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unused = [d.name for d in defs if d.name not in used]
    assert not unused, f"{path.name} defines {unused} and never uses them"
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in [*n.posonlyargs, *n.args, *n.kwonlyargs,
                                                                                    *filter(None, [n.vararg, n.kwarg])]}
    bound |= {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names} | {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    undefined = sorted(used - bound - set(dir(builtins)))
    assert not undefined, f"{path.name} uses names it never defines or imports: {undefined}"
    imported = [a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names]
    assert not [n for n in imported if n not in used], f"{path.name} imports names it never uses"
    assert any(isinstance(n, ast.ImportFrom) and n.module == "kernelgen.runtime.v1" for n in tree.body), \
        f"{path.name} does not take its host runtime from kernelgen.runtime.v1"
    first = defs[0]
    assert isinstance(first, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in first.decorator_list), \
        f"{path.name} starts with {first.name}, not a @triton.jit kernel"


BROADCAST_MAX_LINES = 120  # issue 41: the kernel first and readable, the host code it needs and no more


def test_the_generated_broadcast_file_is_short():
    path = PKG.parent / "tests" / "offline" / "snapshots" / "pointwise_broadcast.py"
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= BROADCAST_MAX_LINES, f"{path.name}: {lines} lines (at most {BROADCAST_MAX_LINES})"


# Functions a snapshot may share byte for byte with another: the family's launch heuristics, rendered from the
# generator's tuning constants (kernelgen.offline.launch, kernelgen.offline.stages.launch) and the file's own
# knobs, which an optimization round rewrites in one file (a dispatch table, a new default); two files with the
# same knobs render them alike. Everything else the files share comes from kernelgen.runtime.v1.
PER_FILE = {"_launch_config", "_tile_config", "_split", "_matmul_config", "_conv_config", "_conv_launch"}


def test_no_snapshot_repeats_another_s_host_code():
    seen: dict[str, str] = {}
    repeated = []
    for path in SNAPSHOTS:
        text = path.read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name in PER_FILE:
                continue
            if any("jit" in ast.unparse(d) for d in getattr(node, "decorator_list", [])):
                continue  # device code: each file's own kernels (one family's tiles look alike by design)
            body = ast.get_source_segment(text, node) or ""
            if body in seen and seen[body] != path.name:
                repeated.append(f"{node.name} in {path.name} and {seen[body]}")
            seen.setdefault(body, path.name)
    assert not repeated, f"host code repeated across generated files (move it to kernelgen/runtime): {repeated}"


# --- tests/ mirrors the package ---------------------------------------------------------------------------
TESTS = PKG.parent / "tests"
MAX_ROOT_TEST_FILES = 12  # what cuts across the package: the layout, imports, end-to-end runs
# tests/<folder>/ holds the tests of kernelgen/<folder>/; tests/cli/ those of the commands the top-level
# modules implement (new, refresh, export, validate); tests/support/ what they share, and no test.
PACKAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
TEST_FOLDERS = {*PACKAGES, "cli"}
# data and snapshot folders: kernel files a test reads, never imported as modules
DATA_FOLDERS = ("snapshots", "data", "adversarial", "honest", "replay_attacks")
TEST_CODE = sorted(p for p in TESTS.rglob("*.py") if not set(p.relative_to(TESTS).parts[:-1]) & set(DATA_FOLDERS)
                   and "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return str(path.relative_to(PKG.parent))


def test_the_tests_rules_read_real_files():
    assert len(TEST_CODE) > 80 and TESTS / "conftest.py" in TEST_CODE and TESTS / "support" / "paths.py" in TEST_CODE
    assert {"offline", "verify", "llm", "batch", "spec", "optimize", "record"} <= set(PACKAGES)


def test_few_test_files_at_the_tests_root():
    root = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert len(root) <= MAX_ROOT_TEST_FILES, f"{len(root)} test files at tests/ root: move them to the folder of what they test: {root}"


def test_every_test_folder_is_a_part_of_the_package():
    folders = {p.relative_to(TESTS).parts[0] for p in TESTS.glob("*/**/test_*.py")}
    assert not folders - TEST_FOLDERS, f"{sorted(folders - TEST_FOLDERS)} under tests/ mirror no folder of kernelgen/"
    assert not list((TESTS / "support").rglob("test_*.py")), "tests/support/ holds helpers, no tests"


def _edits_sys_path(node: ast.AST) -> bool:
    """sys.path.insert/append/extend(...), sys.path[...] = ..., sys.path += ..., monkeypatch.syspath_prepend(...)."""
    def is_path(n: ast.AST) -> bool:
        return isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (node.func.attr in ("insert", "append", "extend") and is_path(node.func.value)) or node.func.attr == "syspath_prepend"
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(is_path(t) or (isinstance(t, ast.Subscript) and is_path(t.value)) for t in targets)
    return False


@pytest.mark.parametrize("path", TEST_CODE, ids=_rel)
def test_tests_import_helpers_by_package_never_through_sys_path(path: Path):
    """Shared helpers live in tests/support/ and are imported as `tests.support.<module>`: no test file puts a
    folder on sys.path, and none imports a test module (what two test modules share belongs in support)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    edits = [n.lineno for n in ast.walk(tree) if _edits_sys_path(n)]
    assert not edits, f"{_rel(path)} edits sys.path at lines {edits}"
    imported = [(n.lineno, name) for n in ast.walk(tree) for name in
                ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""] if isinstance(n, ast.ImportFrom) else [])
                if name.rsplit(".", 1)[-1].startswith("test_")]
    assert not imported, f"{_rel(path)} imports test modules {imported}: move what they share to tests/support/"


# Where a path under tests/ may be named for people to follow: docs, docstrings, comments, messages.
NAMING = [PKG.parent / "README.md", PKG.parent / "pyproject.toml", *sorted((PKG.parent / "docs").rglob("*.md")),
          *MODULES.values(), *sorted((PKG.parent / "benchmarks").glob("*.py")), *sorted((PKG.parent / "templates").rglob("*.j2")),
          *TEST_CODE]
TESTS_PATH = re.compile(r"(?<![\w/.])tests/[\w./-]*[\w/]")


def test_every_tests_path_named_exists():
    """A test file moved or renamed leaves no reader (a docstring, a doc, a refresh command in a failure
    message) following its old path to nothing."""
    named = 0
    missing = []
    for path in NAMING:
        text = path.read_text(encoding="utf-8")
        for m in TESTS_PATH.finditer(text):
            if text[m.end():m.end() + 1] in "<*{":  # a pattern (snapshots/conv_<kind>_<name>.py), not a path
                continue
            named += 1
            if not (PKG.parent / m.group().rstrip(".")).exists():
                missing.append(f"{_rel(path)}: {m.group()}")
    assert named > 30, "the scan reads no paths"
    assert not missing, missing
