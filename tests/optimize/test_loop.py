"""The optimization loop on real judge runs (CPU interpreter, a one-case one-dtype broadcast):

- through a scripted OpenAI-compatible server: correct candidates are checked and recorded unjudged
  (the interpreter's timings decide nothing), the shipped kernel stays byte-identical, a wrong one
  is rejected after its repair also fails;
- the offline planner through the CLI in a subprocess, killed with SIGKILL during round 2 and resumed
  by the same command: rounds 2-3 finish, round 1 is not redone, no file is lost, the shipped kernel
  is round 0's, the log labels every round unjudged; `kernelgen report`.

Keep and revert on measured timings are tested on synthetic results in tests/optimize/test_units.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.devices import resolve_device
from kernelgen.optimize.loop import optimize_operator
from kernelgen.record.state import load_state
from tests.support.broadcast import SMALL_SPEC, round0_op_dir, tiled
from tests.support.fake_llm_server import FakeLLMServer, fenced, ok

pytestmark = pytest.mark.slow

SECTIONS = ("### Version information", "### Bottleneck analysis", "### Change", "### Test results", "### Lessons")


def _reply(change: str, kind: str, source: str) -> str:
    return fenced(source, f"CHANGE: {change}\nTYPE: {kind}\nREASON: fewer programs, less launch overhead")


def _sections_ok(log: str, rounds: range) -> None:
    for k in rounds:
        section = log.split(f"## Round {k}", 1)[1].split("\n## Round", 1)[0]
        for heading in SECTIONS:
            assert heading in section, (k, heading)


def test_llm_loop_on_the_interpreter_checks_and_keeps_nothing(llm_env, tmp_path):
    seed, fast, slow = tiled(2, 16), tiled(16, 32), tiled(1, 4)  # 16, 1 and 128 programs
    op = round0_op_dir(tmp_path, seed)
    script = [
        ok(_reply("one 16x32 tile", "parameters", fast), prompt_tokens=1000, completion_tokens=400),
        ok(_reply("1x4 tiles", "parameters", slow)),
        ok(_reply("subtract instead", "logic", tiled(16, 32, wrong=True))),
        ok(_reply("still wrong", "logic", tiled(16, 32, wrong=True))),  # the repair, also wrong
    ]
    from kernelgen.llm.proposer import LLMProposer

    with FakeLLMServer(script) as server:
        proposer = LLMProposer.create("openai", op, resolve_device("cpu"),
                                      {"base_url": server.url, "model": "fake-model", "max_retries": 0, "repairs": 1})
        outcome = optimize_operator(op, resolve_device("cpu"), proposer, rounds=3)
        assert len(server.requests) == 4
        repair_prompt = server.messages(3)[-1]["content"]
        prompts = [server.messages(i)[-1]["content"] for i in range(3)]
    st = outcome.state
    r1, r2, r3 = st.rounds[1:]
    assert not any(r.kept for r in (r1, r2, r3)) and not any(r.judged for r in (r1, r2, r3))
    assert r1.change_type == "parameters" and r3.change_type == "logic"
    assert r1.accuracy.passed and r2.accuracy.passed and "unjudged" in r1.outcome and "unjudged" in r2.outcome
    assert r3.outcome.startswith("rejected") and r3.accuracy and not r3.accuracy.passed
    assert "differ" in repair_prompt  # the model was told what failed
    assert st.best_round == 0 and op.file("triton").read_text() == seed  # nothing promoted on interpreter timings
    # the rounds build on each other: each starts from the newest correct one, unjudged, never "reverted"
    assert [r.base_round for r in (r1, r2, r3)] == [0, 1, 2]
    assert not any("reverted" in text for text in prompts)
    assert "### Round 1: unjudged (started from round 0)" in prompts[1] and "Unjudged: correct, but nothing here could time it" in prompts[1]
    assert "The kernel to improve: `broadcast_triton.py` of round 1" in prompts[1] and fast.rstrip() in prompts[1]
    assert "The kernel to improve: `broadcast_triton.py` of round 2" in prompts[2] and slow.rstrip() in prompts[2]
    assert "Do not repeat a change" not in prompts[2]  # nothing was rejected or reverted yet
    assert st.tokens.calls == 4 and r1.tokens.prompt_tokens == 1000
    for k in (1, 2, 3):
        d = op.round_dir(k)
        assert (d / "broadcast_triton.py").is_file() and (d / "accuracy.json").is_file() and any((d / "llm").iterdir())
        assert not (d / "performance.json").exists()  # nothing timed for a decision
    log = (op.path / "optimization_log.md").read_text()
    _sections_ok(log, range(4))
    rows = [ln for ln in log.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [r.split("|")[-2].strip() for r in rows[1:]] == ["unjudged (correct; no device)"] * 2 + ["reverted (rejected)"]
    assert "2 correct but unjudged (no device to time on)" in log and "## Final summary" in log
    timing = log.split("## Timing the unjudged rounds", 1)[1]  # the log ends with how to time them on a GPU
    assert f"`kernelgen bench {op.path}`: the shipped kernel (round 0's)" in timing
    assert f"`kernelgen bench {op.path} --kernel {op.path}/rounds/round_2/broadcast_triton.py`: round 2 (1x4 tiles)" in timing
    assert (op.path / "speedup.png").read_bytes()[:4] == b"\x89PNG"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelgen", *args]


def test_offline_cli_killed_in_round_2_resumes(tmp_path):
    spec_path = tmp_path / "broadcast.yaml"
    spec_path.write_text(SMALL_SPEC)
    env = {**os.environ, "KERNELGEN_DEVICE": "cpu", "COLUMNS": "200"}
    new = subprocess.run(_cli("new", str(spec_path), "--backend", "offline"), cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert new.returncode == 0, new.stdout + new.stderr
    op = tmp_path / "generated" / "broadcast"
    cmd = _cli("optimize", "generated/broadcast", "--rounds", "3", "--backend", "offline")

    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:  # kill once round 2 has started and written its candidate
            if (op / "rounds" / "round_2" / "broadcast_triton.py").is_file():
                break
            assert proc.poll() is None, "the run ended before round 2"
            time.sleep(0.05)
        else:
            pytest.fail("round 2 never started")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = load_state(op)
    r1 = next(r for r in killed.rounds if r.round == 1)
    assert r1.finished_at is not None
    assert any(r.round == 2 and r.finished_at is None for r in killed.rounds)  # died mid-round
    before = _files(op)

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "round 2 was interrupted" in again.stdout
    st = load_state(op)
    assert [r.round for r in st.rounds] == [0, 1, 2, 3] and all(r.finished_at for r in st.rounds)
    assert st.rounds[1].started_at == r1.started_at  # round 1 not redone
    after = _files(op)
    # Nothing lost: every earlier file is still there, unchanged, except the ones rewritten by design
    # (state, log, plot, the promoted kernel); the partial round 2 now lives in round_2.previous-*.
    rewritten = {"state.json", "optimization_log.md", "speedup.png", "broadcast_triton.py"}
    for path, data in before.items():
        if path in rewritten:
            continue
        if path.startswith("rounds/round_2/"):
            moved = [p for p in after if p.startswith("rounds/round_2.previous-") and p.endswith(Path(path).name)]
            assert moved and after[moved[0]] == data, path
        else:
            assert after.get(path) == data, path
    for k in (1, 2, 3):
        assert (op / "rounds" / f"round_{k}" / "broadcast_triton.py").is_file()
        assert list((op / "rounds" / f"round_{k}" / "candidates").iterdir())  # every value of the round's knob
    # the shipped kernel is round 0's, byte for byte: nothing is kept on interpreter timings
    assert (op / "broadcast_triton.py").read_bytes() == (op / "rounds" / "round_0" / "broadcast_triton.py").read_bytes()
    assert all(not r.judged and not r.kept for r in st.rounds[1:])
    log = (op / "optimization_log.md").read_text()
    _sections_ok(log, range(4))
    assert log.count("unjudged (correct; no device)") >= 3 and "### Hypothesis" in log
    assert "## Summary" in log and "## Final summary" in log

    rep = CliRunner().invoke(app, ["report", str(tmp_path / "generated")])
    assert rep.exit_code == 0, rep.output
    assert "broadcast" in rep.output and "| broadcast | yes |" in (tmp_path / "generated" / "report.md").read_text()
