"""What a spec derived from a KernelBench-format problem says about the problem, read back from its
`reference` (the spec is plain YAML, so the reference is the one record): the problem's own source, the
forward's inputs, and which inputs are the module's parameters and buffers, under which state-dict key.
Used by the LLM prompt and by `kernelgen export --kernelbench`."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelgen.spec.model import OperatorSpec

MARKER = "# --- KernelGen: the Model above"  # the reference template's line between the problem and the builder


@dataclass(frozen=True)
class Lifted:
    kind: str  # parameter | buffer
    key: str  # state-dict key, "gemm.weight"


@dataclass(frozen=True)
class ProblemView:
    problem: str  # the problem file's source
    builder: str  # the reference after it: the module built once, the entry function calling it
    forward: list[str]  # the forward's inputs, in order
    lifted: dict[str, Lifted] = field(default_factory=dict)  # input name -> the module's tensor it is

    @property
    def training(self) -> bool:
        return "training mode" in self.builder


def read_back(spec: OperatorSpec) -> ProblemView | None:
    """The problem behind a derived spec; None for any other spec (or one whose builder was edited away)."""
    text = spec.reference or ""
    if MARKER not in text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    entry = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == spec.name), None)
    if entry is None:
        return None
    lifted: dict[str, Lifted] = {}
    forward: list[str] = []
    for node in ast.walk(entry):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and isinstance(node.targets[0], ast.Name):
            kind = "parameter" if node.targets[0].id == "parameters" else "buffer"
            for k, v in zip(node.value.keys, node.value.values):
                name = v.func.value if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) else v
                if isinstance(k, ast.Constant) and isinstance(name, ast.Name):
                    lifted[name.id] = Lifted(kind, str(k.value))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "functional_call"
                and len(node.args) == 3 and isinstance(node.args[2], ast.Tuple)):
            forward = [e.id for e in node.args[2].elts if isinstance(e, ast.Name)]  # (module, state, args)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_MODEL":
            forward = [a.id for a in node.args if isinstance(a, ast.Name)]
    problem, builder = text.split(MARKER, 1)
    return ProblemView(problem.rstrip() + "\n", builder.split("\n", 1)[-1].strip() + "\n", forward, lifted)
