"""The LLM path end to end through a scripted OpenAI-compatible server, the real `openai` client and
the trusted harness on the CPU interpreter: what the recorded prompts carry (the no-GPU sentence, or
the injected device facts; the history with an earlier round's full REASON; every case of a failed
check), what the log shows (claimed against detected type, the model's stated cause and design
note), several candidates per round, the LLM flags, and replay against a changed prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.devices import resolve_device
from kernelgen.optimize.loop import optimize_operator
from kernelgen.optimize.proposal import RoundContext
from kernelgen.optimize.diagnose import diagnose
from kernelgen.record.state import load_state
from tests.support.broadcast import round0_op_dir, tiled
from tests.support.devices import H100, H100_PEAKS, NO_GPU
from tests.support.fake_llm_server import FakeLLMServer, fenced, honest_kernel, ok

pytestmark = pytest.mark.slow

CPU = resolve_device("cpu")
REASON = ("The 2x16 tiles launch 16 programs for 512 elements, each too small to hide latency;\n"
          "one 16x32 tile per program cuts the launches to one, and the interpreter's cost is per program.\n"
          + "Every launch costs about 3 ms on the interpreter, far more than the arithmetic. " * 8
          + "END-OF-REASON")


def _recorded(op_path: Path, k: int) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((op_path / "rounds" / f"round_{k}" / "llm").glob("*.json"))]


def _proposer(server: FakeLLMServer, op, **options):  # noqa: ANN001, ANN003, ANN202
    from kernelgen.llm.proposer import LLMProposer

    return LLMProposer.create("openai", op, CPU, {"base_url": server.url, "model": "fake-model", "max_retries": 0,
                                                  "repairs": 0, **options})


def test_cpu_prompt_history_with_full_reason_and_claimed_against_detected_type(llm_env, tmp_path):
    op = round0_op_dir(tmp_path, tiled(2, 16))
    # Round 1 claims "parameters" but also reorders the addition: a logic change by the diff.
    relabelled = tiled(16, 32).replace("x.to(tl.float32) + b[None, :].to(tl.float32)", "b[None, :].to(tl.float32) + x.to(tl.float32)")
    assert relabelled != tiled(16, 32)
    script = [ok(fenced(relabelled, f"CHANGE: one 16x32 tile per program\nTYPE: parameters\nREASON: {REASON}")),
              ok(fenced(tiled(16, 16), "CHANGE: 16x16 tiles\nTYPE: parameters\nREASON: two programs"))]
    with FakeLLMServer(script) as server:
        outcome = optimize_operator(op, CPU, _proposer(server, op), rounds=2)
        second = server.messages(1)[1]["content"]
    first = _recorded(op.path, 1)[0]["messages"][1]["content"]
    assert NO_GPU in first and "SMs" not in first
    assert "No optimization round yet" in first and "Interpreter dry run on cpu" in first  # round 0, timed first
    assert "moves at least 4.1 KiB" in first  # x[16, 32] + bias[32] + out, float32
    assert "### Round 1:" in second and REASON.replace("\n", " ") in second  # the full REASON, every line of it
    assert "TYPE: detected **logic**, claimed parameters — detected as logic because" in second
    r1 = outcome.state.rounds[1]
    assert (r1.claimed_type, r1.change_type) == ("parameters", "logic")
    log = (op.path / "optimization_log.md").read_text()
    assert "type: **logic** (claimed **parameters**; detected as logic from the diff because" in log


def test_injected_device_facts_reach_the_recorded_prompt(llm_env, tmp_path, monkeypatch):
    import kernelgen.llm.devicefacts as devicefacts

    monkeypatch.setattr(devicefacts, "device_facts", lambda device: H100)
    monkeypatch.setattr(devicefacts, "known_peaks", lambda device: H100_PEAKS)
    op = round0_op_dir(tmp_path, tiled(2, 16))
    with FakeLLMServer([ok(fenced(tiled(16, 32), "CHANGE: one tile\nTYPE: parameters\nREASON: fewer programs"))]) as server:
        optimize_operator(op, CPU, _proposer(server, op), rounds=1)
    prompt = _recorded(op.path, 1)[0]["messages"][1]["content"]
    for needle in ("NVIDIA H100 80GB HBM3", "132 SMs", "L2 cache 50.0 MiB", "copy bandwidth 3012 GB/s",
                   "read bandwidth 3350 GB/s", "65536 32-bit registers per SM"):
        assert needle in prompt, needle
    assert "No GPU" not in prompt


def test_three_candidates_from_one_round(llm_env, tmp_path):
    op = round0_op_dir(tmp_path, tiled(2, 16))
    script = [ok(fenced(tiled(16, 32), f"CHANGE: {c}\nTYPE: parameters\nREASON: r{i}"))
              for i, c in enumerate(("one 16x32 tile", "16x16 tiles", "8x32 tiles"))]
    script[1] = ok(fenced(tiled(16, 16), "CHANGE: 16x16 tiles\nTYPE: parameters\nREASON: r1"))
    script[2] = ok(fenced(tiled(8, 32), "CHANGE: 8x32 tiles\nTYPE: parameters\nREASON: r2"))
    state = load_state(op.path)
    best = state.best()
    with FakeLLMServer(script) as server:
        proposer = _proposer(server, op, candidates=3)
        op.round_dir(1).mkdir(parents=True)
        ctx = RoundContext(op=op, state=state, round=1, best=best, best_source=op.file("triton").read_text(),
                           diagnosis=diagnose(None, 0, None))
        proposals = proposer.propose(ctx)
        asked = [server.messages(i)[1]["content"] for i in range(3)]
    assert [p.change for p in proposals] == ["one 16x32 tile", "16x16 tiles", "8x32 tiles"]
    assert all(p.checked is not None and p.checked.passed for p in proposals)
    assert len({p.source for p in proposals}) == 3
    assert "this is proposal 2 of 3" in asked[1] and "- Proposal 1: one 16x32 tile" in asked[1]
    assert "- Proposal 2: 16x16 tiles" in asked[2]
    recorded = sorted(p.name for p in (op.round_dir(1) / "llm").iterdir())
    assert recorded == ["0001_candidate-1-optimize.json", "0002_candidate-2-optimize.json", "0003_candidate-3-optimize.json"]
    for c in (1, 2, 3):
        assert (op.round_dir(1) / f"candidate_{c}_attempt_1_broadcast_triton.py").is_file()
    assert proposals[1].attempts == ["candidate 2, attempt 1: correct"]


def test_candidates_and_llm_flags_are_validated_before_work(llm_env, tmp_path):
    op = round0_op_dir(tmp_path, tiled(2, 16))
    result = CliRunner().invoke(app, ["optimize", str(op.path), "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                                      "--candidates", "0", "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert "candidates" in result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert load_state(op.path).rounds[-1].round == 0  # nothing ran


def test_llm_timeout_flag(llm_env, tmp_path, repo):
    with FakeLLMServer([ok("too late", delay_s=2.0)]) as server:
        result = CliRunner().invoke(app, ["new", str(repo / "operator_specs/broadcast.yaml"), "--backend", "openai",
                                          "--base-url", server.url, "--llm-timeout", "0.3", "--max-retries", "0",
                                          "--out", str(tmp_path / "out"), "--device", "cpu"])
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 1, text
    assert "timed out after 0.3 s" in text and "--llm-timeout" in text
    assert len(server.requests) == 1  # --max-retries 0


PARTIAL_SPEC = """\
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
dtypes: [float32, float16]
test_cases:
  - {x: [2, 64], bias: [64]}
  - {x: [3, 128], bias: [128]}
  - {x: [1, 192], bias: [192]}
  - {x: [4, 64], bias: [64]}
  - {x: [2, 256], bias: [256]}
  - {x: [5, 64], bias: [64]}
  - {x: [1, 320], bias: [320]}
  - {x: [3, 100], bias: [100]}
"""


def test_repair_prompt_lists_passing_cases_and_the_log_keeps_the_models_words(llm_env, tmp_path):
    spec_path = tmp_path / "broadcast.yaml"
    spec_path.write_text(PARTIAL_SPEC)
    floor_grid = honest_kernel().replace("triton.cdiv(n_cols, 64)", "n_cols // 64")  # misses the tail of x[3, 100]
    assert floor_grid != honest_kernel()
    script = [ok(fenced(floor_grid, "One program per 16x64 tile of the output; the bias is loaded once per tile.")),
              ok(fenced(honest_kernel(), "CAUSE: the grid used floor division, so the last partial column block was never launched."))]
    out = tmp_path / "out"
    with FakeLLMServer(script) as server:
        result = CliRunner().invoke(app, ["new", str(spec_path), "--backend", "openai", "--base-url", server.url,
                                          "--model", "fake-model", "--out", str(out), "--no-bench", "--device", "cpu"])
        assert result.exit_code == 0, result.output
        repair = server.messages(1)[1]["content"]
    assert "Passing cases:" in repair and "- case 0 x[2, 64] bias[64] float32, output `out`:" in repair
    # 14 passing groups of the spec's cases (and the generated cases the floor grid gets right): 12 shown,
    # the rest named on one "more passing" line
    more = next(line for line in repair.splitlines() if "more passing:" in line)
    assert more.startswith("- ") and "case 6 float32 `out`" in repair.split("Passing cases:")[1]
    assert "- case 7 x[3, 100] bias[100] float32, output `out`:" in repair and "never written" in repair
    assert "unwritten-output:" in repair and "CAUSE:" in repair
    log = (out / "broadcast" / "optimization_log.md").read_text()
    assert "attempt 1, design note: One program per 16x64 tile of the output" in log
    assert ("attempt 2, the cause it stated for attempt 1's failure: the grid used floor division, so the last partial "
            "column block was never launched.") in log

    # Replay against a changed spec: the prompts differ from the recording -> a warning naming the exchange,
    # or, with --replay-mismatch refuse, an error before any reply is used.
    changed = tmp_path / "changed.yaml"
    changed.write_text(PARTIAL_SPEC.replace("description: out = x + bias", "description: out = bias + x"))
    recording = str(out / "broadcast" / "llm")
    result = CliRunner().invoke(app, ["new", str(changed), "--backend", "replay", "--replay", recording,
                                      "--out", str(tmp_path / "warned"), "--no-bench", "--device", "cpu"])
    text = " ".join((result.output + (result.stderr if result.stderr_bytes is not None else "")).split())  # unwrapped
    assert result.exit_code == 0, text
    assert "warning: replay: this run's generate prompt differs from the recorded exchange 0001_generate.json" in text
    assert "message 2 (user): 1 line(s) recorded, 1 now differ; first: recorded 'out = x + bias', now 'out = bias + x'" in text
    rec = json.loads((tmp_path / "warned" / "broadcast" / "llm" / "0001_generate.json").read_text())
    assert "out = bias + x" in rec["replay_mismatch"]
    result = CliRunner().invoke(app, ["new", str(changed), "--backend", "replay", "--replay", recording,
                                      "--replay-mismatch", "refuse", "--out", str(tmp_path / "refused"), "--no-bench",
                                      "--device", "cpu"])
    text = " ".join((result.output + (result.stderr if result.stderr_bytes is not None else "")).split())
    assert result.exit_code == 1 and "differs from the recorded exchange 0001_generate.json" in text
    assert "--replay-mismatch warn" in text and not (tmp_path / "refused" / "broadcast").exists()
