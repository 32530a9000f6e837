"""The runtime's own source, piece by piece, for files that must run without KernelGen installed
(`kernelgen export`): the top-level definitions a kernel file imports from a runtime module, with every
piece they reach by name and the module imports they use, in the module's order.

Read from the module's file, never imported (it needs no torch to read). Standard library only.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "kernelgen.runtime"


@dataclass(frozen=True)
class RuntimeImport:
    """One `from kernelgen.runtime.vN import a, b` statement of a kernel file (top level)."""

    module: str
    names: tuple[str, ...]
    lineno: int
    end_lineno: int


def runtime_imports(source: str) -> list[RuntimeImport]:
    """The file's top-level imports from a runtime module (`from kernelgen.runtime.v1 import ...`)."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGE + "."):
            out.append(RuntimeImport(node.module or "", tuple(a.name for a in node.names), node.lineno,
                                     node.end_lineno or node.lineno))
    return out


def module_path(module: str) -> Path:
    """The file of a runtime module, found without running it."""
    if not module.startswith(PACKAGE + ".") or not module[len(PACKAGE) + 1:].isidentifier():
        raise ValueError(f"{module!r} is not a module of {PACKAGE}")
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise ValueError(f"{module!r}: no such runtime module in this installation")
    return Path(found.origin)


def _top_level(tree: ast.Module, text: str) -> tuple[dict[str, str], dict[str, tuple[int, ast.stmt, str]]]:
    """(module imports: bound name -> the statement, definitions: name -> (position, node, text))."""
    imports: dict[str, str] = {}
    defs: dict[str, tuple[int, ast.stmt, str]] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                imports[a.asname or a.name.split(".")[0]] = ast.unparse(ast.Import(names=[a]))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            lines = text.splitlines()[start - 1: node.end_lineno]
            defs[node.name] = (i, node, "\n".join(lines))
    return imports, defs


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def inline(module: str, names: tuple[str, ...] | list[str]) -> str:
    """Python text defining `names` as `module` defines them: the pieces, those they reach, the imports
    they use. ValueError for a name the module does not define at its top level."""
    text = module_path(module).read_text(encoding="utf-8")
    imports, defs = _top_level(ast.parse(text), text)
    missing = [n for n in names if n not in defs]
    if missing:
        raise ValueError(f"{module} defines no {', '.join(missing)}")
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [n for n in _names(defs[name][1]) if n in defs and n not in wanted]
    used = set().union(*(_names(defs[n][1]) for n in wanted))
    head = [stmt for bound, stmt in imports.items() if bound in used]
    body = [defs[n][2] for n in sorted(wanted, key=lambda n: defs[n][0])]
    return "\n".join(head) + "\n\n\n" + "\n\n\n".join(body) + "\n"


def inline_imports(source: str) -> str:
    """The kernel file with each top-level runtime import replaced by the pieces it names (`inline`): a
    file that runs without KernelGen, its own lines otherwise as they were."""
    lines = source.splitlines()
    for imp in reversed(runtime_imports(source)):
        piece = f"# --- {imp.module} (KernelGen's host runtime), the pieces this file uses, inlined\n" + \
            inline(imp.module, imp.names)
        lines[imp.lineno - 1: imp.end_lineno] = piece.rstrip("\n").splitlines()
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")
