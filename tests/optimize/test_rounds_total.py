"""`--rounds` is a total: asking for as many rounds as are already finished says so and how to get more,
instead of stopping silently."""

from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.fsutil import now
from kernelgen.verify.judge.trusted import write_trusted_files
from kernelgen.opdir import OperatorDir
from kernelgen.verify.judge.trusted import render_baseline
from kernelgen.record.state import OpState, RoundRecord, load_state, save_state
from kernelgen.spec import load_spec
from kernelgen.verify.results import PerformanceResult, RunRecord
from tests.support.paths import DATA

SPEC = """\
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
"""


def _finished(tmp_path, rounds: int) -> OperatorDir:
    """A folder with `rounds` optimization rounds finished (none kept), round 0 timed on the CPU."""
    (tmp_path / "broadcast.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "broadcast.yaml")
    op = OperatorDir(tmp_path / "broadcast", spec)
    write_trusted_files(op.path, spec, SPEC, render_baseline(spec))
    seed = (DATA / "broadcast_honest.py").read_text()
    op.file("triton").write_text(seed)
    perf = PerformanceResult(op="broadcast", kernel="k", device="cpu", device_name="cpu", interpreter=True, measured=False,
                             torch_version="x", triton_version="y")
    state = OpState(name="broadcast", created_at=now(), backend="offline", device="cpu", best_round=0)
    for k in range(rounds + 1):
        op.round_dir(k).mkdir(parents=True)
        (op.round_dir(k) / "broadcast_triton.py").write_text(seed)
        state.rounds.append(RoundRecord(round=k, started_at=now(), finished_at=now(), backend="offline",
                                        kernel_file=f"rounds/round_{k}/broadcast_triton.py", kept=k == 0,
                                        performance=RunRecord(kind="performance", status="ok", exit_code=0,
                                                              duration_s=0.1, performance=perf) if k == 0 else None))
    save_state(op.path, state)
    return op


def test_rounds_already_finished_says_rounds_is_a_total(tmp_path):
    op = _finished(tmp_path, 5)
    r = CliRunner().invoke(app, ["optimize", str(op.path), "--rounds", "5", "--backend", "offline", "--device", "cpu"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, text
    assert "5 round(s) already finished; --rounds is a total" in text and "pass --rounds 8 for three more" in text
    assert len(load_state(op.path).rounds) == 6  # nothing ran
