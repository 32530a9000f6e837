"""Static checks on a candidate `<name>_triton.py`, before any of it runs.

Each rule has a stable violation code. They are cheap and catch the lazy cheats; the runtime
guard (kernelgen.guard) catches the rest by watching what the wrapper actually dispatches.
"""

from __future__ import annotations

import ast

from kernelgen.results import Violation

# What a kernel file may import. Anything else (os, sys, numpy, subprocess, importlib, the baseline,
# kernelgen itself) is a way to read secrets, compute on the host, or tamper with the harness.
ALLOWED_IMPORTS = {"torch", "triton", "triton.language", "math", "functools", "typing", "__future__", "dataclasses", "itertools"}

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "open", "globals", "vars", "breakpoint", "input", "setattr", "delattr"}

# Attribute chains that reach past the public API into places that could switch off the
# dispatch guard, move work to another stream, or compute on the host.
FORBIDDEN_ATTRS = {
    "torch._C": "reaches into PyTorch's C internals (could disable the harness's dispatch guard)",
    "torch.utils._python_dispatch": "manipulates PyTorch's dispatch modes",
    "torch.library": "registers custom operators",
    "torch.ops": "calls operators around the dispatcher's public API",
    "torch.cuda.Stream": "creates a side stream: work must run on the caller's stream",
    "torch.cuda.stream": "switches streams: work must run on the caller's stream",
    "torch.cuda.set_stream": "switches streams: work must run on the caller's stream",
}
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


def check_source(source: str, entry: str, *, baseline_module: str | None = None) -> list[Violation]:
    """Return the violations found in a kernel file's source (empty: passes)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [Violation(code="syntax-error", message=f"line {e.lineno}: {e.msg}")]
    found: list[Violation] = []
    aliases = _aliases(tree)

    def add(code: str, message: str) -> None:
        found.append(Violation(code=code, message=message))

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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            add("forbidden-call", f"line {node.lineno}: calls {node.func.id}()")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HOST_COMPUTE_METHODS:
            add("host-compute", f"line {node.lineno}: .{node.func.attr}() moves data to the host; compute belongs in a Triton kernel")
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                full = aliases.get(head, head) + ("." + rest if rest else "")
                for bad, why in FORBIDDEN_ATTRS.items():
                    if full == bad or full.startswith(bad + "."):
                        add("forbidden-api", f"line {node.lineno}: uses {full}: {why}")
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in {"__name__", "__init__"}:
                add("introspection", f"line {node.lineno}: touches {node.attr}")
        elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__loader__", "__spec__"}:
            add("introspection", f"line {node.lineno}: touches {node.id}")

    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    kernels = {name for name, fn in funcs.items() if any(_is_jit_decorator(d) for d in fn.decorator_list)}
    if not kernels:
        add("no-triton-kernel", "defines no @triton.jit kernel at module level")
    if entry not in funcs:
        add("no-entry-function", f"defines no function called {entry!r} at module level")
        return found
    if entry in kernels:
        add("no-entry-function", f"{entry!r} must be a plain Python wrapper, not the @triton.jit kernel itself")
        return found

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
            if isinstance(n, ast.Try):
                add("fallback-try-except", f"line {n.lineno}: try/except in {name}() could fall back to a non-Triton path")
    if kernels and not launches:
        add("kernel-not-launched", f"{entry}() never launches a @triton.jit kernel (expected `{sorted(kernels)[0]}[grid](...)`)")
    return found
