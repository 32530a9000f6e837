"""What kind of change one kernel file is against another, decided from the code, not from what the
proposer claims. Only an interface change must be mirrored in the other files (the baseline, the
accuracy and the performance scripts call the entry function with the spec's signature); parameters
and logic live in `_triton.py` alone.

- parameters: only tuning values differ — upper-case (constexpr) constants and tables (a dispatch
  table is one), launch options (num_warps, num_stages, the grid a kernel is launched on), load/store
  cache hints, decorators (triton.jit, autotune configs), power-of-two tile sizes (>= 16) written as
  literals in a launch heuristic;
- interface:  the entry function's signature or what it returns changed;
- logic:      the kernel's arithmetic or indexing (a 2-D grid made 1-D, an online softmax), or a file
  that does not parse;
- none:       the same program (comments and docstrings aside).
"""

from __future__ import annotations

import ast
import difflib

from kernelgen.record.state import ChangeType

# Keyword arguments that tune a launch or a memory access without changing what is computed.
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim"}
MEMORY_HINTS = {"eviction_policy", "cache_modifier"}
_PLACEHOLDER = "<param>"


def _is_param_name(name: str | None) -> bool:
    """`BLOCK_SIZE`, `num_warps`: names whose values are tuning choices. A name counts as a constexpr
    constant when it is upper-case with at least one letter (`N` and `BLOCK_M` do; `n` does not)."""
    if not name:
        return False
    return name in LAUNCH_OPTIONS or name in MEMORY_HINTS or (name.isupper() and any(c.isalpha() for c in name))


class _Normalize(ast.NodeTransformer):
    """Erase every parameter position, so two files that differ only there dump identically."""

    def _strip_docstring(self, node):  # noqa: ANN001, ANN202
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self._strip_docstring(node)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.decorator_list = []  # @triton.jit / @triton.autotune(configs=...) / @triton.heuristics
        self._strip_docstring(node)
        # A wrapper that writes `grid = (cdiv(n, 16),)` beside `BLOCK=16` repeats the tuning value
        # as a literal; those literals are the same parameter, so they are erased with it.
        # Only constexpr (upper-case) keywords: `num_stages=2` must not erase `strides[0][2]`. An unrelated
        # literal equal to a tile size is erased in one file only, which errs toward "logic" (the safe side).
        tuned = {k.value.value for c in ast.walk(node) if isinstance(c, ast.Call) for k in c.keywords
                 if k.arg and k.arg.isupper() and isinstance(k.value, ast.Constant) and type(k.value.value) is int
                 and k.value.value >= 2}
        for c in ast.walk(node):
            if isinstance(c, ast.Constant) and type(c.value) is int and c.value in tuned:
                c.value = _PLACEHOLDER
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        # `grid = lambda meta: (cdiv(n, meta["BLOCK_SIZE"]),)`: autotune makes the grid a function of the
        # chosen config; what the kernel computes per program is still the kernel's own code.
        if all(isinstance(t, ast.Name) and (_is_param_name(t.id) or t.id == "grid") for t in node.targets):
            node.value = ast.Constant(_PLACEHOLDER)
            return node
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if isinstance(node.target, ast.Name) and _is_param_name(node.target.id) and node.value is not None:
            node.value = ast.Constant(_PLACEHOLDER)
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # Dropped rather than blanked: adding `eviction_policy=` or `num_warps=` is a parameter change too.
        node.keywords = [k for k in node.keywords if not _is_param_name(k.arg)]
        if isinstance(node.func, ast.Subscript):  # kernel[grid](...): the grid is a launch option
            node.func.slice = ast.Constant(_PLACEHOLDER)
        return self.generic_visit(node)


def _entry(tree: ast.Module, entry: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)


def _interface(fn: ast.FunctionDef | None) -> tuple[str, list[str]]:
    if fn is None:
        return ("<missing>", [])
    returns = [ast.dump(n.value) if n.value is not None else "None" for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return (ast.dump(fn.args), returns)


def classify_change(old: str, new: str, entry: str) -> ChangeType:
    """`entry`: the operator's function name (the spec's `name`)."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except SyntaxError:
        return "logic"
    if ast.dump(old_tree) == ast.dump(new_tree):
        return "none"
    if _interface(_entry(old_tree, entry)) != _interface(_entry(new_tree, entry)):
        return "interface"
    old_norm, new_norm = _Normalize().visit(old_tree), _Normalize().visit(new_tree)
    if ast.dump(old_norm) == ast.dump(new_norm):
        return "parameters"
    # A launch heuristic in a helper (`block = min(next_power_of_2(n), 4096)`) holds tile sizes as bare
    # literals; a diff that only moves powers of two >= 16 between such literals is a tile-size change.
    if ast.dump(_erase_tiles(old_norm)) == ast.dump(_erase_tiles(new_norm)):
        return "parameters"
    return "logic"


def _erase_tiles(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 16 and node.value & (node.value - 1) == 0:
            node.value = _PLACEHOLDER
    return tree


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name, n=2))
