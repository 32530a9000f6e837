"""Failures that resume, through `kernelgen new` / `kernelgen optimize`, the real `openai` client and a local
test server (tests/support/fake_llm_server.py), on the CPU interpreter:

- `new` that ended without a correct kernel, run again, continues from it: its first request is a repair
  of the kept kernel with the judge's verdict and every earlier attempt's line, not the first prompt again;
  the old folder is moved aside; round 0's record tells both runs' attempts;
- `optimize` on such a folder repairs it first, in a round of its own, with the same repair loop;
- the repair loop's verdict is the verdict: after "attempt N: correct", `new` checks nothing again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.record.state import load_state
from tests.support.fake_llm_server import FakeLLMServer, fenced, honest_kernel, ok, wrong_kernel

pytestmark = pytest.mark.slow

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


def _new(server: FakeLLMServer, spec: Path, out: Path, *extra: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["new", str(spec), "--backend", "openai", "--model", "fake-model", "--out", str(out),
                                    "--no-bench", "--device", "cpu", "--max-retries", "0", *extra],
                              env={"OPENAI_BASE_URL": server.url})


def test_a_failed_run_continues_from_its_attempts_in_new_and_in_optimize(llm_env, tmp_path, monkeypatch):
    import kernelgen.llm.repair as repair

    spec = tmp_path / "broadcast.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    with FakeLLMServer([ok(fenced(wrong_kernel(), "One program per 16x64 tile."))]) as server:
        first = _new(server, spec, out, "--repairs", "0")
    assert first.exit_code == 1, first.output
    failed = out / "broadcast"
    assert load_state(failed).best_round is None and load_state(failed).rounds[0].attempts[0].startswith("attempt 1: wrong answer")
    shutil.copytree(out, tmp_path / "copy")  # the same failed folder, for `optimize` below

    checks = []
    real = repair.run_accuracy
    monkeypatch.setattr(repair, "run_accuracy", lambda *a, **k: checks.append(k.get("kernel")) or real(*a, **k))
    with FakeLLMServer([ok(fenced(honest_kernel(), "CAUSE: the tile subtracted the bias instead of adding it."))]) as server:
        again = _new(server, spec, out)  # no --force: a failed round 0 is continued, not overwritten
        asked = server.messages(0)[1]["content"]
    assert again.exit_code == 0, again.output
    assert len(server.requests) == 1 and len(checks) == 1  # one reply, one check: not checked again as round 0
    assert "was checked in the repair loop (correct); not checked again" in " ".join(again.output.split())
    assert "## Earlier attempts: a previous run ended without a correct kernel" in asked
    assert "- attempt 1: wrong answer: " in asked and "checks failed; first: case 0" in asked and "(attempt 1)" in asked
    assert "- b[None, :]" in asked and "elements differ" in asked and "Write the Triton kernel" not in asked
    state = load_state(out / "broadcast")
    assert state.best_round == 0 and [a.split(":")[0] for a in state.rounds[0].attempts] == ["earlier run", "attempt 2"]
    assert state.rounds[0].accuracy.accuracy.kernel_sha256 and (out / "broadcast" / "rounds" / "round_0" / "attempt_2_broadcast_triton.py").is_file()
    assert "continued from 1 earlier attempt(s)" in state.rounds[0].reason
    assert json.loads((out / "broadcast" / "llm" / "0001_repair.json").read_text())["purpose"] == "repair"
    (kept,) = [p for p in out.iterdir() if p.name.startswith("broadcast.previous-")]  # nothing lost
    assert (kept / "rounds" / "round_0" / "attempt_1_broadcast_triton.py").read_text() == wrong_kernel()

    copy = tmp_path / "copy" / "broadcast"
    with FakeLLMServer([ok(fenced(honest_kernel(), "CAUSE: the sign of the bias."))]) as server:
        result = CliRunner().invoke(app, ["optimize", str(copy), "--backend", "openai", "--model", "fake-model", "--rounds", "1",
                                          "--device", "cpu", "--max-retries", "0"], env={"OPENAI_BASE_URL": server.url})
        asked = server.messages(0)[1]["content"]
    assert result.exit_code == 0, result.output
    assert "## Earlier attempts" in asked and "- attempt 1: wrong answer" in asked and "- b[None, :]" in asked
    state = load_state(copy)
    r1 = state.rounds[1]
    assert state.best_round == 1 and r1.kept and r1.base_round == 0 and r1.outcome.startswith("correct: round 0's kernel repaired")
    assert r1.change == "repair of round 0's kernel: the sign of the bias." and r1.attempts[-1] == "attempt 2: correct"
    assert (copy / "broadcast_triton.py").read_text() == honest_kernel()  # promoted; round 0's kept in best_history/
    assert (copy / "best_history").is_dir() and [p.name for p in (copy / "rounds" / "round_1" / "llm").iterdir()] == ["0002_repair.json"]
