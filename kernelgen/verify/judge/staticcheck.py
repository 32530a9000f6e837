"""Static checks on a candidate `<name>_triton.py`, in the judge, before any of it runs.

Since issue 40 every verdict comes from replaying what the candidate's call did on the device
(kernelgen.verify.record, kernelgen.verify.replay): a host read of device values, PyTorch computing, a
fallback path, a wrapper that launches nothing or a cache in front of the entry are all seen there,
when they happen, and named. What stays here is what a replay cannot see — what the file imports,
and what its recording process could reach beyond the sandbox (kernelgen.verify.judge.allowlist, applied
by kernelgen.verify.judge.surface), and what would change the recording itself (setting attributes of
what the file did not define) — and what makes a file a kernel file at all. Every code, static or not,
is listed in kernelgen/verify/judge/codes.py.

  syntax-error              the file does not parse
  forbidden-import          imports a module outside allowlist.IMPORTABLE (os, sys, ctypes, numpy, ...)
  imports-baseline          imports the reference implementation
  forbidden-call            a builtin outside allowlist.BUILTINS; getattr/hasattr with a computed name
  forbidden-api             a name not on its module's allowlist, a module handed around as a value, an
                            attribute that walks to frames, code or tracebacks (allowlist.escape_attrs)
  private-attribute         an attribute starting with `_`, on anything
  reads-environment         touches os.environ / getenv (through any path): API keys live there
  monkeypatch               assigns or deletes an attribute of an imported module or class, also
                            through library functions that set attributes (SETTERS)
  introspection             touches dunder attributes/names, defines dunder hooks, or derives a class
                            from anything but its own, object, an exception or typing's NamedTuple/Generic
  no-triton-kernel          no @triton.jit kernel at module level
  no-entry-function         no plain function named after the op
"""

from __future__ import annotations

import ast
from typing import Callable

from kernelgen.verify.judge import allowlist
from kernelgen.verify.judge.surface import check_surface
from kernelgen.verify.results import Violation

ALLOWED_IMPORTS = allowlist.IMPORTABLE  # what the LLM's system prompt lists (kernelgen.llm.prompts)
# Classes a file's own class may derive from: its own, `object`, the builtin exceptions it may raise,
# and typing's NamedTuple / Generic. A subclass of a torch or Triton class could override what the
# harness relies on (a Tensor's __torch_function__, a kernel's run).
ALLOWED_BASES = frozenset({"object", "typing.NamedTuple", "typing.Generic"}) | \
    {b for b in allowlist.BUILTINS if b.endswith(("Error", "Exception", "Iteration"))}


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


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Local names bound by imports: {'tl': 'triton.language', 'torch': 'torch'}."""
    out: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


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


def _setattr_routes(nodes: list[ast.AST], resolve: Callable[[str], str]) -> list[tuple[int, str]]:
    """(line, what) for every attribute store through a library function onto something the file
    does not define, and every such function (or setattr itself) passed around as a value."""
    own = {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    placed: set[int] = set()  # nodes in a call's or a decorator's function position
    for n in nodes:
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
    for n in nodes:
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


def _parse(source: str) -> tuple[ast.Module, str] | Violation:
    """The file's tree and text with the body of its `if __name__ == "__main__":` block left out: that
    block runs only when the file is run as a script (a self-check may use os and sys there); the
    harness imports kernel files under other names, so it never runs when a kernel is judged, and a file
    that rebinds __name__ is refused (`_dunders`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return Violation(code="syntax-error", message=f"line {e.lineno}: {e.msg}")
    lines = source.splitlines()
    for node in tree.body:
        if _is_main_guard(node):
            first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
            indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
            lines[first - 1: last] = [indent + "pass"] + [""] * (last - first)  # line numbers kept
            node.body = [ast.Pass()]
    return tree, "\n".join(lines)


def check_source(source: str, entry: str, *, baseline_module: str | None = None) -> list[Violation]:
    """Return the violations found in a kernel file's source (empty: passes)."""
    parsed = _parse(source)
    if isinstance(parsed, Violation):
        return [parsed]
    tree, stripped = parsed
    nodes = list(ast.walk(tree))
    aliases = _aliases(nodes)

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        return aliases.get(head, head) + ("." + rest if rest else "")

    found = _baseline_imports(nodes, baseline_module)
    baseline = {m.split("imports ", 1)[1].split(":")[0] for _, m in found}  # said once, as imports-baseline
    found += [(c, m) for c, m in check_surface(stripped, tree, nodes)
              if not (c == "forbidden-import" and any(f"imports {name};" in m for name in baseline))]
    found += _stores(nodes, aliases, resolve)
    found += [("monkeypatch", f"line {line}: {what}: a kernel file may not set attributes (of torch, triton, or "
               "anything else it did not define)") for line, what in _setattr_routes(nodes, resolve)]
    found += _dunders(nodes)
    found += _classes(nodes, resolve)
    found += _entry_rules(tree, entry)
    out: list[Violation] = []
    for code, message in found:
        if not any(v.code == code and v.message == message for v in out):
            out.append(Violation(code=code, message=message))
    return out


def _baseline_imports(nodes: list[ast.AST], baseline_module: str | None) -> list[tuple[str, str]]:
    found = []
    for node in nodes:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            ["." * node.level + (node.module or "")] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            if "baseline" in name or (baseline_module and name.endswith(baseline_module)):
                found.append(("imports-baseline", f"line {node.lineno}: imports {name!r}: the kernel may not use the "
                              "reference implementation"))
    return found


def _stores(nodes: list[ast.AST], aliases: dict[str, str], resolve: Callable[[str], str]) -> list[tuple[str, str]]:
    """Attribute stores on anything but `self` (an alias such as `t = torch` would otherwise hide the
    module), and item stores into anything reached from a module."""
    module_aliases = set(aliases)
    found = []
    for node in nodes:
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            continue
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        flat: list[ast.AST] = []
        for t in targets:
            flat += list(ast.walk(t)) if isinstance(t, (ast.Tuple, ast.List, ast.Starred)) else [t]
        for t in flat:
            base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else None
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            attr_store = isinstance(t, ast.Attribute) and not (isinstance(base, ast.Name) and base.id == "self")
            item_store = isinstance(t, ast.Subscript) and isinstance(base, ast.Name) and base.id in module_aliases
            if attr_store or item_store:
                what = _dotted(t) or f"an attribute of {getattr(base, 'id', 'an expression')}"
                found.append(("monkeypatch", f"line {node.lineno}: changes {resolve(what) if '.' in what else what}: "
                              "a kernel file may not set attributes (of torch, triton, or anything else but self)"))
    return found


def _dunders(nodes: list[ast.AST]) -> list[tuple[str, str]]:
    """Dunder names (`__file__`, `__builtins__`), dunder hooks a file defines, and any rebinding of
    `__name__` (which would let a file enter its own __main__ block)."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Name) and _is_dunder(node.id) and node.id not in allowlist.ALLOWED_DUNDER_NAMES:
            found.append(("introspection", f"line {node.lineno}: touches {node.id}"))
        if _binds_module_name(node):
            found.append(("introspection", f"line {getattr(node, 'lineno', '?')}: rebinds __name__"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_dunder(node.name) \
                and node.name not in allowlist.ALLOWED_DUNDER_DEFS:
            found.append(("introspection", f"line {node.lineno}: defines {node.name}, a hook into Python's or "
                          "PyTorch's machinery"))
        elif isinstance(node, ast.ImportFrom) and any(_is_dunder(a.name) for a in node.names):
            found.append(("introspection", f"line {node.lineno}: imports a dunder name"))
    return found


def _classes(nodes: list[ast.AST], resolve: Callable[[str], str]) -> list[tuple[str, str]]:
    """A class of the file's own derives from its own classes, `object`, a builtin exception or typing's
    NamedTuple / Generic; no metaclass or other keyword."""
    own = {n.name for n in nodes if isinstance(n, ast.ClassDef)}
    found = []
    for node in nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        for b in node.bases + [k.value for k in node.keywords]:
            dotted = _dotted(b)
            name = resolve(dotted) if dotted else None
            if node.keywords or name is None or (name not in own and name not in ALLOWED_BASES):
                found.append(("introspection", f"line {node.lineno}: class {node.name} derives from "
                              f"{name or ast.unparse(b)}: a class of the file's own may derive only from its own "
                              f"classes, {', '.join(sorted(ALLOWED_BASES))}, and takes no metaclass"))
    return found


def _entry_rules(tree: ast.Module, entry: str) -> list[tuple[str, str]]:
    """A kernel file defines a @triton.jit kernel and a plain entry function named after the op. What the
    entry does with its kernels (launch them, cache, fall back) is what its recording sees."""
    found: list[tuple[str, str]] = []
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    kernels = {name for name, fn in funcs.items() if any(_is_jit_decorator(d) for d in fn.decorator_list)}
    if not kernels:
        found.append(("no-triton-kernel", "defines no @triton.jit kernel at module level"))
    if entry not in funcs:
        return found + [("no-entry-function", f"defines no function called {entry!r} at module level")]
    if entry in kernels:
        return found + [("no-entry-function", f"{entry!r} must be a plain Python wrapper, not the @triton.jit kernel itself")]
    return found
