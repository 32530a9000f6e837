"""The allowlist rules: what a kernel file touches, held to kernelgen.verify.judge.allowlist, one rule per
function. Each refusal names the construct, its line and the allowlist entry it missed, in words a person
or an LLM can act on.

  imports            only modules of allowlist.IMPORTABLE; `from M import n` only names on M's table
  aliases            a name bound to a module (an import, or `b = triton.runtime.driver.active`) is bound
                     so everywhere: it is another name for that namespace, checked as one
  namespace values   a namespace (torch, tl, torch.cuda, ...) is only ever followed by a listed name:
                     never passed, stored, returned or called as a value
  attributes         after a namespace, a name on its table; on any other value, any name but those of
                     allowlist.escape_attrs() (frames, generators, tracebacks, code); nothing starting with
                     `_` (dunders but `__init__` are introspection)
  getattr, hasattr   a literal name only, checked as the attribute it reads; never passed as a value
  builtins           only allowlist.BUILTINS, resolved by Python's own scoping (symtable): a local named
                     `input` is a local; module- and class-level names never shadow a refused builtin
"""

from __future__ import annotations

import ast
import builtins
import functools
import symtable
from dataclasses import dataclass, field

from kernelgen.verify.judge import allowlist as al

ENV_ATTR_NAMES = {"environ", "environb", "getenv", "putenv", "unsetenv", "getenvb"}
BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass
class Found:
    """Refusals so far: (code, message), each construct once."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, code: str, line: int | None, message: str) -> None:
        item = (code, f"line {line}: {message}" if line else message)
        if item not in self.items:
            self.items.append(item)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class Surface:
    """One file's names: its import aliases, its own attribute names, and what each chain resolves to."""

    def __init__(self, source: str, tree: ast.Module, nodes: list[ast.AST], found: Found, skip_attrs: frozenset[str]):
        self.source, self.tree, self.found, self.skip_attrs = source, tree, found, skip_attrs
        self.nodes = nodes
        self.parents = {id(c): p for p in self.nodes for c in ast.iter_child_nodes(p)}
        self.aliases: dict[str, str] = {}
        self.refused: set[int] = set()  # attribute nodes already refused: what follows them is not said again

    # --- resolution ------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        """The dotted path a Name/Attribute chain rooted at an alias denotes ('torch.cuda.is_available')."""
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    def namespace_of(self, node: ast.AST) -> str | None:
        """The namespace `node` denotes, if it denotes one that the chain could reach by listed names."""
        path = self.resolve(node)
        return path if path is not None and path in al.NAMESPACES and _reachable(path) else None


    # --- rules -----------------------------------------------------------------------------------
    def run(self) -> None:
        self.imports()
        self.alias_assignments()
        self.rebound_aliases()
        for node in reversed(self.nodes):  # ast.walk is breadth-first: reversed, `a.b` comes before `a.b.c`
            if isinstance(node, ast.Attribute):
                self.attribute(node.value, node.attr, node.lineno, node)
        for node in self.nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
                self.getattr_call(node)
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
                self.namespace_value(node)
                self.names_as_values(node)
        self.builtin_names()

    def imports(self) -> None:
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if not self._importable(a.name, node.lineno):
                        continue
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)

    def _importable(self, module: str, line: int) -> bool:
        if module in al.IMPORTABLE:
            return True
        self.found.add("forbidden-import", line, f"imports {module!r}; a kernel file may import only "
                       f"{', '.join(sorted(al.IMPORTABLE))} (kernelgen/verify/judge/allowlist.py)")
        return False

    def import_from(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        if not self._importable(module, node.lineno):
            return
        rows = al.table(module) or {}
        for a in node.names:
            if a.name == "*":
                self.found.add("forbidden-import", node.lineno, f"from {module} import *: name what the file uses")
            elif a.name.startswith("_"):
                self.private(a.name, node.lineno, f"from {module} import {a.name}")
            elif a.name not in rows:
                self.found.add("forbidden-api", node.lineno, f"from {module} import {a.name}: {a.name!r} is not on "
                               f"{al.where(module)}")
            else:
                self.aliases[a.asname or a.name] = f"{module}.{a.name}"

    def alias_assignments(self) -> None:
        """`name = <a namespace>` makes `name` another name for it (the offline kernels' lean launch binds
        `backend = triton.runtime.driver.active`), in a module or a function (a class attribute would be
        reachable as a value: `C.m`); repeated until `c = b` after `b = torch` is seen too."""
        while True:
            before = len(self.aliases)
            for node in self.nodes:
                if self._alias_assignment(node):
                    path = self.namespace_of(node.value)  # type: ignore[attr-defined]
                    if path is not None:
                        self.aliases.setdefault(node.targets[0].id, path)  # type: ignore[attr-defined]
            if len(self.aliases) == before:
                return

    def _alias_assignment(self, node: ast.AST) -> bool:
        """Whether `node` has the one form that may bind a namespace: `name = ...` outside a class body."""
        return isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and not isinstance(self.parents.get(id(node)), ast.ClassDef)

    def rebound_aliases(self) -> None:
        """A name that stands for a namespace is bound to it and nothing else, anywhere in the file."""
        for node in self.nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name, line in _bindings(node):
                if name not in self.aliases or self._alias_binding(node):
                    continue
                self.found.add("forbidden-api", line, f"binds {name!r}, the file's name for {self.aliases[name]}, to "
                               "something else: a name for a module is bound to it alone")

    def _alias_binding(self, node: ast.AST) -> bool:
        """Whether `node` is the target of `name = <the namespace name stands for>`."""
        parent = self.parents.get(id(node))
        return isinstance(node, ast.Name) and isinstance(parent, ast.Assign) and parent.targets == [node] \
            and self.namespace_of(parent.value) == self.aliases.get(node.id)

    def attribute(self, base: ast.AST, name: str, line: int, where: ast.AST) -> None:
        """One attribute `name` read (or written) on `base`; a chain is refused once, at its first step
        off the allowlist (`torch.os.environ`: at `torch.os`)."""
        if id(base) in self.refused or name in self.skip_attrs:
            self.refused.add(id(where))
            return  # refused at an earlier step, or reported by a rule of its own (host-compute)
        if name.startswith("_"):
            self.private(name, line, ast.unparse(where))
        elif (namespace := self.namespace_of(base)) is not None:
            if name not in (al.table(namespace) or {}):
                self.found.add(self._code(where), line, f"{ast.unparse(where)}: {name!r} is not on {al.where(namespace)}")
            else:
                return
        elif name not in al.escape_attrs():
            return
        else:
            self.found.add(self._code(where), line, f"{ast.unparse(where)}: .{name} walks to Python's frames, code or "
                           "tracebacks (the interpreter itself), which no kernel needs (allowlist.escape_attrs in "
                           "kernelgen/verify/judge/allowlist.py)")
        self.refused.add(id(where))

    def _code(self, node: ast.AST) -> str:
        """reads-environment where the chain goes on to the environment (`torch.os.environ`), else forbidden-api."""
        names = set()
        while isinstance(node, ast.Attribute):
            names.add(node.attr)
            parent = self.parents.get(id(node))
            node = parent if isinstance(parent, ast.Attribute) and parent.value is node else None
        return "reads-environment" if names & ENV_ATTR_NAMES else "forbidden-api"

    def private(self, name: str, line: int, shown: str) -> None:
        if _is_dunder(name):
            if name not in al.ALLOWED_DUNDER_ATTRS:
                self.found.add("introspection", line, f"{shown}: touches {name}")
            return
        self.found.add("private-attribute", line, f"{shown}: {name!r} starts with '_': no private attribute of "
                       "anything, the file's own objects included, may be used (rename it)")

    def getattr_call(self, node: ast.Call) -> None:
        fn = node.func.id  # type: ignore[attr-defined]
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) or node.keywords:
            self.found.add("forbidden-call", node.lineno, f"{fn}() with a computed attribute name: write the name "
                           "as a literal string (or as an attribute)")
            return
        self.attribute(node.args[0], name.value, node.lineno, node)

    def namespace_value(self, node: ast.AST) -> None:
        """A namespace may be followed by a listed name, aliased, or read by getattr; nothing else."""
        path = self.namespace_of(node)
        if path is None:
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if self._alias_assignment(parent) and parent.value is node:  # type: ignore[union-attr]
            return
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("getattr", "hasattr") \
                and parent.args and parent.args[0] is node:
            return
        self.found.add("forbidden-api", getattr(node, "lineno", None), f"uses {path} ({ast.unparse(node)}) as a value: "
                       "a module may only be followed by a name on its allowlist")

    def names_as_values(self, node: ast.AST) -> None:
        """getattr and hasattr called only, with a literal name: passed around they read any name."""
        if not (isinstance(node, ast.Name) and node.id in ("getattr", "hasattr") and node.id not in self.aliases):
            return
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Call) and parent.func is node):
            self.found.add("forbidden-call", node.lineno, f"passes {node.id} as a value: call it with a literal name")

    def builtin_names(self) -> None:
        """Every builtin the file reaches is on allowlist.BUILTINS (Python's own scoping decides what
        is a builtin: symtable), and no module- or class-level name hides one that is not."""
        top = symtable.symtable(self.source, "kernel", "exec")
        declared = {n for node in self.nodes if isinstance(node, ast.Global) for n in node.names}
        bound = {s.get_name() for s in top.get_symbols() if s.is_local()} | declared
        lines = _first_lines(self.nodes)
        for name in sorted(_builtin_refs(top, bound)):
            if name not in al.BUILTINS and not _is_dunder(name):
                self.found.add("forbidden-call", lines.get(name), f"uses the builtin {name!r}, which is not on the "
                               f"builtins a kernel may use ({', '.join(sorted(al.BUILTINS))})")
        for name in sorted(_shadowing(top, declared)):
            if name in BUILTIN_NAMES and name not in al.BUILTINS:
                self.found.add("forbidden-call", lines.get(name), f"binds {name!r} at module or class level, hiding a "
                               "builtin that is not on the allowlist (rename it)")


@functools.lru_cache(maxsize=4096)
def _reachable(path: str) -> bool:
    """Whether every step of `path` is a listed name of the namespace before it."""
    parts = path.split(".")
    for i in range(1, len(parts)):
        rows = al.table(".".join(parts[:i]))
        if rows is None or parts[i] not in rows:
            return False
    return True


def _bindings(node: ast.AST) -> list[tuple[str, int]]:
    """(name, line) for every name `node` binds."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [(node.id, node.lineno)]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(node.name, node.lineno)]
    if isinstance(node, ast.arg):
        return [(node.arg, node.lineno)]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [(node.name, node.lineno)]
    return []


def _builtin_refs(table: symtable.SymbolTable, bound: set[str]) -> set[str]:
    """Names some scope reads that Python resolves in builtins: global there, bound nowhere at module level."""
    out = set()
    for s in table.get_symbols():
        name = s.get_name()
        is_global = s.is_global() if table.get_type() != "module" else not s.is_local()
        if s.is_referenced() and is_global and name not in bound and name in BUILTIN_NAMES:
            out.add(name)
    for child in table.get_children():
        out |= _builtin_refs(child, bound)
    return out


def _shadowing(table: symtable.SymbolTable, declared: set[str]) -> set[str]:
    """Names bound at module or class level (or declared global): a lookup that misses them at run time
    (a conditional binding) falls through to builtins."""
    out = set(declared)
    if table.get_type() in ("module", "class"):
        out |= {s.get_name() for s in table.get_symbols() if s.is_local()}
    for child in table.get_children():
        out |= _shadowing(child, set())
    return out


def _first_lines(nodes: list[ast.AST]) -> dict[str, int]:
    lines: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Name):
            lines.setdefault(node.id, node.lineno)
    return lines


def check_surface(source: str, tree: ast.Module, nodes: list[ast.AST],
                  skip_attrs: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(code, message) for everything the file touches outside the allowlist: `source` is its text,
    `tree` its parse and `nodes` every node of it (ast.walk); `skip_attrs`: attribute names another
    rule reports."""
    found = Found()
    Surface(source, tree, nodes, found, skip_attrs).run()
    return sorted(found.items, key=lambda item: int(item[1][5:].split(":")[0]) if item[1].startswith("line ") else 0)
