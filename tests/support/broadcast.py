"""The small broadcast operator (out = x + bias) that the judge and loop tests run kernel files on: an
operator folder with KernelGen's trusted files around a given kernel, or as `kernelgen new` leaves it
after round 0; and the honest kernel re-tiled, for candidates that differ only in their program count."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from kernelgen.fsutil import now
from kernelgen.opdir import OperatorDir
from kernelgen.record.state import OpState, RoundRecord, save_state
from kernelgen.spec import load_spec, validate_spec_data
from kernelgen.verify.judge.trusted import render_baseline, write_trusted_files
from tests.support.paths import DATA

# two dtypes, two cases: what a judge check covers
SMALL_BROADCAST = {
    "name": "broadcast",
    "description": "Add a 1-D bias along the last dimension of x: out = x + bias.",
    "category": "broadcast",
    "inputs": [{"name": "x"}, {"name": "bias"}],
    "outputs": [{"name": "out"}],
    "reference": "def broadcast(x, bias):\n    return x + bias\n",
    "dtypes": ["float32", "float16"],
    "test_cases": [{"x": [4, 33], "bias": [33]}, {"x": [2, 3, 17], "bias": [17]}],
    "tolerance": {"float16": {"atol": 1.0e-3, "rtol": 1.0e-3}},
}

# one dtype, one case: the cheapest operator a loop can run rounds on
SMALL_SPEC = """\
name: broadcast
description: out = x + bias
category: broadcast
inputs:
  - {name: x}
  - {name: bias}
outputs:
  - {name: out}
reference: |
  def broadcast(x, bias):
      return x + bias
dtypes: [float32]
test_cases:
  - {x: [16, 32], bias: [32]}
max_rounds: 5
"""


def make_op_dir(root: Path, kernel: Path) -> Path:
    op = root / "broadcast"
    op.mkdir(parents=True, exist_ok=True)
    spec = validate_spec_data(SMALL_BROADCAST)
    write_trusted_files(op, spec, yaml.safe_dump(SMALL_BROADCAST, sort_keys=False), render_baseline(spec))
    shutil.copy(kernel, op / "broadcast_triton.py")
    return op


def tiled(bm: int, bn: int, *, wrong: bool = False) -> str:
    """The honest broadcast kernel with BLOCK_M x BLOCK_N tiles: x[16, 32] takes 16/bm * 32/bn programs."""
    src = (DATA / "broadcast_honest.py").read_text(encoding="utf-8")
    src = (src.replace("cdiv(n_rows, 16)", f"cdiv(n_rows, {bm})").replace("cdiv(n_cols, 64)", f"cdiv(n_cols, {bn})")
              .replace("BLOCK_M=16, BLOCK_N=64", f"BLOCK_M={bm}, BLOCK_N={bn}"))
    return src.replace("+ b[None, :]", "- b[None, :]") if wrong else src


def round0_op_dir(root: Path, seed: str) -> OperatorDir:
    """An operator folder after `kernelgen new` (round 0 correct, not timed: saves a harness run)."""
    spec_path = root / "broadcast.yaml"
    spec_path.write_text(SMALL_SPEC)
    spec = load_spec(spec_path)
    op = OperatorDir(root / "generated" / "broadcast", spec)
    write_trusted_files(op.path, spec, SMALL_SPEC, render_baseline(spec))
    op.file("triton").write_text(seed)
    op.round_dir(0).mkdir(parents=True)
    (op.round_dir(0) / op.file("triton").name).write_text(seed)
    state = OpState(name="broadcast", created_at=now(), backend="openai", device="cpu", best_round=0)
    state.rounds.append(RoundRecord(round=0, started_at=now(), finished_at=now(), backend="openai", change="initial kernel",
                                    kernel_file="rounds/round_0/broadcast_triton.py", kept=True))
    save_state(op.path, state)
    return op
