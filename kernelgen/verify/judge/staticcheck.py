"""Static checks on a candidate `<name>_triton.py`, in the judge, before any of it runs.

They are cheap and catch the lazy cheats; everything else is decided by what the candidate does in its
sandboxed worker (kernelgen.verify.judge.accuracy, performance). A denylist cannot be complete — a module
reached through another name (`torch.serialization.pickle`) slips past it — so nothing depends on it
alone: it only saves a worker start for the obvious cases. Every code, static or not, is listed in
kernelgen/verify/judge/codes.py.

  syntax-error              the file does not parse
  forbidden-import          imports a module outside ALLOWED_IMPORTS (os, sys, ctypes, numpy, ...)
  imports-baseline          imports the reference implementation
  forbidden-call            eval/exec/open/getattr-with-a-computed-name/... (FORBIDDEN_CALLS)
  forbidden-api             reaches private or dangerous APIs: torch._C, torch.sys, torch.os,
                            frames, side streams, CUDA graphs, torch.compile, torch.save/load, ...
  reads-environment         touches os.environ / getenv (through any path): API keys live there
  monkeypatch               assigns or deletes an attribute of an imported module or class, also
                            through library functions that set attributes (SETTERS)
  introspection             touches dunder attributes/names or defines dunder hooks
  tensor-subclass           defines a class deriving from a torch class
  host-compute              .item() / .tolist() / .numpy(): computing on the host
  fallback-try-except       try/except reachable from the entry function (a silent non-Triton path)
  no-triton-kernel          no @triton.jit kernel at module level
  no-entry-function         no plain function named after the op
  entry-rebound             the entry function is decorated or rebound at module level
  kernel-not-launched       the entry never launches a @triton.jit kernel
"""

from __future__ import annotations

import ast
from typing import Callable

from kernelgen.verify.results import Violation

# What a kernel file may import. Anything else (os, sys, numpy, subprocess, importlib, the baseline,
# kernelgen itself) is a way to read secrets, compute on the host, or tamper with the harness.
ALLOWED_IMPORTS = {"torch", "triton", "triton.language", "math", "functools", "typing", "__future__", "dataclasses", "itertools"}

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "open", "globals", "vars", "locals", "breakpoint", "input",
                   "setattr", "delattr", "exit", "quit", "memoryview"}

# Attribute chains (after resolving import aliases) that reach past the public API into places that
# could switch off the dispatch guard, move work to another stream, hide work in a graph or a
# compiler, touch files, or compute on the host.
FORBIDDEN_ATTRS = {
    "torch._C": "reaches into PyTorch's C internals (could disable the harness's dispatch guard)",
    "torch.utils._python_dispatch": "manipulates PyTorch's dispatch modes",
    "torch.utils.cpp_extension": "compiles native code",
    "torch.library": "registers custom operators",
    "torch.ops": "calls operators around the dispatcher's public API",
    "torch.cuda.Stream": "creates a side stream: work must run on the caller's stream",
    "torch.cuda.ExternalStream": "uses a side stream: work must run on the caller's stream",
    "torch.cuda.stream": "switches streams: work must run on the caller's stream",
    "torch.cuda.streams": "switches streams: work must run on the caller's stream",
    "torch.cuda.set_stream": "switches streams: work must run on the caller's stream",
    "torch.Stream": "creates a side stream: work must run on the caller's stream",
    "torch.npu.Stream": "creates a side stream: work must run on the caller's stream",
    "torch.npu.stream": "switches streams: work must run on the caller's stream",
    "torch.npu.set_stream": "switches streams: work must run on the caller's stream",
    "torch.cuda.graph": "CUDA graph replay hides launches from the harness",
    "torch.cuda.graphs": "CUDA graph replay hides launches from the harness",
    "torch.cuda.CUDAGraph": "CUDA graph replay hides launches from the harness",
    "torch.compile": "torch.compile computes in PyTorch's compiler, not in the candidate's kernel",
    "torch.jit": "TorchScript computes outside the candidate's kernel",
    "torch.fx": "graph tracing: not a kernel's business",
    "torch.export": "graph export: not a kernel's business",
    "torch.save": "writes files",
    "torch.load": "reads files (and unpickles)",
    "torch.from_file": "reads files",
    "torch.hub": "downloads code",
    "torch.multiprocessing": "starts processes",
    "torch.distributed": "talks to other processes",
    "torch.testing": "comparison helpers the harness relies on",
}
# Attribute names refused wherever they appear in a chain: ways to the interpreter, the process,
# the files, or other frames (`torch.sys.modules`, `torch.os.system`, `gen.gi_frame.f_back`).
FORBIDDEN_ATTR_NAMES = {
    "sys", "os", "modules", "builtins", "importlib", "subprocess", "ctypes", "system", "popen", "spawnv",
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame", "ag_frame",
    "tb_frame", "tb_next", "co_code", "func_globals", "mro", "load_library", "pathlib", "shutil", "inspect",
    # known ways past this list (it cannot be complete: the worker's sandbox and the judge's own
    # checks are what hold; these only stop copies of attacks already seen)
    "pickle", "serialization", "marshal", "get_type_hints", "add_pre_run_hook", "pre_run_hooks",
    "launch_enter_hook", "launch_exit_hook", "threading", "multiprocessing", "np", "numpy",
}
ENV_ATTR_NAMES = {"environ", "environb", "getenv", "putenv", "unsetenv", "getenvb"}
# Dunder function names a kernel file may define (methods of a small config class, say).
ALLOWED_DUNDER_DEFS = {"__init__", "__post_init__", "__repr__", "__call__"}
ALLOWED_DUNDER_NAMES = {"__name__"}
HOST_COMPUTE_METHODS = {"numpy", "tolist", "item"}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_jit_decorator(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target) or ""
    return name.split(".")[-1] in {"jit", "autotune", "heuristics"} and (name.startswith("triton") or name in {"jit", "autotune", "heuristics"})


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound by imports: {'tl': 'triton.language', 'torch': 'torch'}."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _attr_problem(full: str, modules: set[str]) -> tuple[str, str] | None:
    """Why a resolved dotted name is refused: (code, reason), or None."""
    parts = full.split(".")
    for bad, why in FORBIDDEN_ATTRS.items():
        if full == bad or full.startswith(bad + "."):
            return "forbidden-api", f"uses {full}: {why}"
    if any(part in ENV_ATTR_NAMES for part in parts[1:]):
        return "reads-environment", f"uses {full}: reads the process environment (where API keys live)"
    for part in parts[1:]:
        if part in FORBIDDEN_ATTR_NAMES:
            return "forbidden-api", f"uses {full}: reaches the interpreter, the process, files or other frames"
    if parts[0] in modules:
        for part in parts[1:]:
            if part.startswith("_") and not _is_dunder(part):
                return "forbidden-api", f"uses {full}: private internals of {parts[0]}"
        if parts[0] == "torch" and len(parts) == 2 and parts[1].startswith("set_"):
            return "forbidden-api", f"uses {full}: changes PyTorch global state the baseline also runs under"
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, written exactly so."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _binds_module_name(node: ast.AST) -> bool:
    """Whether `node` rebinds `__name__` (which would let a file enter its own __main__ block)."""
    if isinstance(node, ast.Name) and node.id == "__name__":
        return not isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.alias):
        return node.asname == "__name__"
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "__name__"


# Library functions that set attributes on an object they are given: `update_wrapper(torch.cuda.Event,
# Faster, assigned=("elapsed_time",), updated=())` is a `setattr` on torch.cuda.Event in one call.
# Each may only be applied to a function or class the file defines itself (as a decorator, or called
# on one), and never passed around as a value. `dataclasses.replace`, `functools.partial`, `lru_cache`
# and `cache` are not routes: they build new objects and set nothing on what they are given.
SETTERS = {  # called on the target directly
    "functools.update_wrapper": "copies attributes onto its first argument",
    "functools.total_ordering": "adds comparison methods to the class",
    "dataclasses.dataclass": "rewrites the class's methods",
    "typing.final": "sets __final__ on its argument",
    "typing.no_type_check": "sets __no_type_check__ on its argument and its methods",
    "typing.runtime_checkable": "sets attributes on the class",
}
SETTER_FACTORIES = {  # return a decorator that does it: `wraps(f)(target)`
    "functools.wraps": "copies attributes onto what it is applied to",
    "dataclasses.dataclass": "rewrites the class it is applied to",
    "typing.dataclass_transform": "sets __dataclass_transform__ on what it is applied to",
}
SETATTR_NAMES = {"setattr", "delattr"}  # as values (`map(setattr, ...)`, `partial(setattr, ...)`), not only called


def _setattr_routes(tree: ast.Module, resolve: Callable[[str], str]) -> list[tuple[int, str]]:
    """(line, what) for every attribute store through a library function onto something the file
    does not define, and every such function (or setattr itself) passed around as a value."""
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    placed: set[int] = set()  # nodes in a call's or a decorator's function position
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            placed.add(id(n.func))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            placed.update(id(d) for d in n.decorator_list)

    def name_of(node: ast.AST) -> str:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            return f"{name_of(node.args[0])}.{node.args[1].value}"  # getattr(functools, "update_wrapper")
        dotted = _dotted(node)
        return resolve(dotted) if dotted else ""

    def foreign(target: ast.AST | None) -> str | None:
        if target is None or (isinstance(target, ast.Name) and target.id in own):
            return None
        return resolve(_dotted(target) or "") or "an object it did not define"

    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in SETATTR_NAMES and isinstance(n.ctx, ast.Load) and id(n) not in placed:
            found.append((n.lineno, f"passes {n.id} as a value"))
        elif isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in placed and isinstance(n.ctx, ast.Load):
            fn = name_of(n)
            if fn in SETTERS or fn in SETTER_FACTORIES:
                found.append((n.lineno, f"passes {fn} as a value"))
        if not isinstance(n, ast.Call):
            continue
        fn = name_of(n.func)
        target = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "wrapper"), None)
        if fn in SETTERS and target is not None and foreign(target):
            found.append((n.lineno, f"{fn} {SETTERS[fn]}: {foreign(target)}"))
        factory = name_of(n.func.func) if isinstance(n.func, ast.Call) else ""
        if factory in SETTER_FACTORIES and foreign(target):
            found.append((n.lineno, f"{factory}(...) {SETTER_FACTORIES[factory]}: {foreign(target)}"))
    return found


def check_source(source: str, entry: str, *, baseline_module: str | None = None) -> list[Violation]:
    """Return the violations found in a kernel file's source (empty: passes)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [Violation(code="syntax-error", message=f"line {e.lineno}: {e.msg}")]
    found: list[Violation] = []
    # The body of a top-level `if __name__ == "__main__":` runs only when the file is run as a
    # script (a self-check may use os and sys there): the harness imports kernel files under
    # other names, so it never runs when a kernel is judged. Only that body is skipped; a file
    # that rebinds __name__ is refused below, so the block cannot be entered on import.
    for node in tree.body:
        if _is_main_guard(node):
            node.body = [ast.Pass()]
    aliases = _aliases(tree)

    def add(code: str, message: str) -> None:
        found.append(Violation(code=code, message=message))

    # Names bound to modules (and objects imported from them): `torch`, `tl`, `F`, `partial`, ...
    modules = {"torch", "triton", "math", "functools", "typing", "dataclasses", "itertools"}
    module_aliases = {local for local, target in aliases.items() if target.split(".")[0] in modules}

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        return aliases.get(head, head) + ("." + rest if rest else "")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                names = ["." * node.level + (node.module or "")]
            for name in names:
                if "baseline" in name or (baseline_module and name.endswith(baseline_module)):
                    add("imports-baseline", f"imports {name!r}: the kernel may not use the reference implementation")
                elif name not in ALLOWED_IMPORTS:
                    add("forbidden-import", f"imports {name!r}; a kernel file may import only {', '.join(sorted(ALLOWED_IMPORTS))}")
                elif isinstance(node, ast.ImportFrom):
                    for a in node.names:
                        if a.name == "*":
                            continue
                        problem = _attr_problem(f"{name}.{a.name}", modules)
                        if problem is None and _is_dunder(a.name):
                            problem = ("introspection", f"imports {name}.{a.name}")
                        if problem:
                            add(problem[0], f"line {node.lineno}: {problem[1]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            add("forbidden-call", f"line {node.lineno}: calls {node.func.id}()")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
            attr = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                add("forbidden-call", f"line {node.lineno}: {node.func.id}() with a computed attribute name")
            else:
                target = _dotted(node.args[0]) if node.args else None
                full = resolve(target) + "." + attr.value if target else "?." + attr.value
                problem = _attr_problem(full, modules)
                if problem is None and (_is_dunder(attr.value) or (target and target.split(".")[0] in module_aliases and attr.value.startswith("_"))):
                    problem = ("introspection", f"{node.func.id}(..., {attr.value!r})")
                if problem:
                    add(problem[0], f"line {node.lineno}: {problem[1]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 3:
            add("forbidden-call", f"line {node.lineno}: type() with three arguments creates a class at run time")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HOST_COMPUTE_METHODS:
            add("host-compute", f"line {node.lineno}: .{node.func.attr}() moves data to the host; compute belongs in a Triton kernel")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            flat: list[ast.AST] = []
            for t in targets:
                flat += list(ast.walk(t)) if isinstance(t, (ast.Tuple, ast.List, ast.Starred)) else [t]
            for t in flat:
                base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                # Any attribute store but `self.x = ...` (an alias such as `t = torch` would
                # otherwise hide the module), and item stores into anything reached from a module.
                attr_store = isinstance(t, ast.Attribute) and not (isinstance(base, ast.Name) and base.id == "self")
                item_store = isinstance(t, ast.Subscript) and isinstance(base, ast.Name) and base.id in module_aliases
                if attr_store or item_store:
                    what = _dotted(t) or f"an attribute of {getattr(base, 'id', 'an expression')}"
                    add("monkeypatch", f"line {node.lineno}: changes {resolve(what) if '.' in what else what}: "
                        "a kernel file may not set attributes (of torch, triton, or anything else but self)")
                elif isinstance(t, ast.Name) and t.id == entry and node.col_offset == 0:
                    add("entry-rebound", f"line {node.lineno}: rebinds {entry!r} at module level")
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted:
                problem = _attr_problem(resolve(dotted), modules)
                if problem:
                    add(problem[0], f"line {node.lineno}: {problem[1]}")
            elif node.attr in ENV_ATTR_NAMES:
                add("reads-environment", f"line {node.lineno}: touches .{node.attr}")
            elif node.attr in FORBIDDEN_ATTR_NAMES:
                add("forbidden-api", f"line {node.lineno}: touches .{node.attr}")
            if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDER_NAMES | {"__init__"}:
                add("introspection", f"line {node.lineno}: touches {node.attr}")
        elif isinstance(node, ast.Name) and _is_dunder(node.id) and node.id not in ALLOWED_DUNDER_NAMES:
            add("introspection", f"line {node.lineno}: touches {node.id}")
        if _binds_module_name(node):
            add("introspection", f"line {getattr(node, 'lineno', '?')}: rebinds __name__")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_DEFS:
            add("introspection", f"line {node.lineno}: defines {node.name}, a hook into Python's or PyTorch's machinery")
        elif isinstance(node, ast.ClassDef):
            for b in node.bases + [k.value for k in node.keywords]:
                dotted = _dotted(b)
                if dotted and resolve(dotted).split(".")[0] == "torch":
                    add("tensor-subclass", f"line {node.lineno}: class {node.name} derives from {resolve(dotted)}")
                elif dotted is None or dotted in {"type"}:
                    add("introspection", f"line {node.lineno}: class {node.name} has an unusual base or metaclass")

    for line, what in _setattr_routes(tree, resolve):
        add("monkeypatch", f"line {line}: {what}: a kernel file may not set attributes (of torch, triton, or anything else it did not define)")

    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == entry]
    if len(defs) > 1:
        add("entry-rebound", f"{entry!r} is defined {len(defs)} times at module level")
    kernels = {name for name, fn in funcs.items() if any(_is_jit_decorator(d) for d in fn.decorator_list)}
    if not kernels:
        add("no-triton-kernel", "defines no @triton.jit kernel at module level")
    if entry not in funcs:
        add("no-entry-function", f"defines no function called {entry!r} at module level")
        return found
    if entry in kernels:
        add("no-entry-function", f"{entry!r} must be a plain Python wrapper, not the @triton.jit kernel itself")
        return found
    if funcs[entry].decorator_list:
        add("entry-rebound", f"{entry!r} is decorated: the harness must call the function as written (a cache or wrapper could answer instead)")

    # Which plain functions does the entry reach (helpers it calls, transitively)?
    reached, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name in reached or name not in funcs or name in kernels:
            continue
        reached.add(name)
        for n in ast.walk(funcs[name]):
            if isinstance(n, ast.Name) and n.id in funcs:
                todo.append(n.id)

    launches = False
    for name in reached:
        for n in ast.walk(funcs[name]):
            # `kernel[grid](...)` is a launch; so is `kernel.run(...)` style with a known kernel name.
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name):
                if n.func.value.id in kernels:
                    launches = True
            if isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                add("fallback-try-except", f"line {n.lineno}: try/except in {name}() could fall back to a non-Triton path")
    if kernels and not launches:
        add("kernel-not-launched", f"{entry}() never launches a @triton.jit kernel (expected `{sorted(kernels)[0]}[grid](...)`)")
    return found
