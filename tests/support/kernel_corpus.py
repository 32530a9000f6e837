"""Every honest kernel file the project has, for the static allowlist to be held to: what the offline
generator writes (every example spec of operator_specs/ and every spec of tests/support/nd_specs.py
and conv_specs.py, with the default knobs, each value of each knob one at a time, and round 0's dispatch table), the
checked-in snapshots, the example and test kernels (tests/support/data, tests/verify/adversarial/honest.py,
the KernelBench end-to-end kernel) and the kernels the LLM tests build from them."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Iterator

from tests.support.paths import SPECS, TESTS

os.environ.setdefault("TRITON_INTERPRET", "1")


@dataclass(frozen=True)
class Honest:
    label: str  # where it came from, for the failure message
    source: str
    entry: str  # the op's name: its entry function


def _generated(spec, label: str) -> Iterator[Honest]:
    from kernelgen.offline import first_kernel, generate_kernel, knob_space

    yield Honest(f"{label} default", generate_kernel(spec).source, spec.name)
    yield Honest(f"{label} round 0", first_kernel(spec).source, spec.name)
    for knob, values in knob_space(spec).items():
        for value in values[1:]:
            try:
                source = generate_kernel(spec, {knob: value}).source
            except ValueError:  # a value this spec's family cannot serve: nothing written to check
                continue
            yield Honest(f"{label} {knob}={value!r}", source, spec.name)


def offline_kernels() -> Iterator[Honest]:
    from kernelgen.spec import load_spec
    from tests.support.conv_specs import ALL as CONV
    from tests.support.nd_specs import ALL

    for path in sorted(SPECS.glob("*.yaml")):
        yield from _generated(load_spec(path), path.name)
    for name, spec in sorted(ALL.items()):
        yield from _generated(spec, f"nd_specs {name}")
    for name, spec in sorted(CONV.items()):
        yield from _generated(spec, f"conv_specs {name}")


def _entry_of(source: str) -> str:
    """The plain public function a kernel file ends with (its entry)."""
    tree = ast.parse(source)
    plain = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list
             and not n.name.startswith("_")]
    return plain[-1]


def file_kernels() -> Iterator[Honest]:
    from tests.support.fake_llm_server import cheating_kernel, honest_kernel, wrong_kernel

    snapshots = TESTS / "offline" / "snapshots"
    for path in sorted(snapshots.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        yield Honest(f"snapshot {path.name}", source, _entry_of(source))
    yield Honest("tests/support/data/broadcast_honest.py", honest_kernel(), "broadcast")
    yield Honest("tests/verify/adversarial/honest.py", (TESTS / "verify" / "adversarial" / "honest.py").read_text(), "broadcast")
    # the LLM tests' kernels: a wrong one and a cheating one are wrong at run time, not in what they touch
    yield Honest("fake_llm_server.wrong_kernel", wrong_kernel(), "broadcast")
    yield Honest("fake_llm_server.cheating_kernel", cheating_kernel(), "broadcast")
    e2e = ast.parse((TESTS / "test_kernelbench_e2e.py").read_text(encoding="utf-8"))
    for node in ast.walk(e2e):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "@triton.jit" in node.value:
            yield Honest(f"test_kernelbench_e2e.py line {node.lineno}", node.value, _entry_of(node.value))


def every_kernel() -> Iterator[Honest]:
    yield from file_kernels()
    yield from offline_kernels()
