"""Generation with repair through a local OpenAI-compatible server and the real trusted harness
(CPU interpreter): good, malformed, syntax error, wrong, cheating, replay, and the issue's
acceptance runs of `kernelgen new --backend openai`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.devices import resolve_device
from kernelgen.errors import GenerationError
from kernelgen.verify.judge.trusted import write_trusted_files
from kernelgen.llm.generate import generate
from kernelgen.llm.setup import prepare
from kernelgen.opdir import OperatorDir
from kernelgen.verify.judge.trusted import render_baseline
from kernelgen.spec import load_spec
from tests.support.fake_llm_server import FakeLLMServer, cheating_kernel, fenced, honest_kernel, ok, wrong_kernel
from tests.support.paths import SPECS

pytestmark = pytest.mark.slow

KEY = "sk-test-SECRET-0123456789"
SPEC = SPECS / "broadcast.yaml"


def _op(tmp_path: Path, spec_path: Path = SPEC) -> OperatorDir:
    """An operator folder as `kernelgen new` stages it before the LLM writes the kernel."""
    spec = load_spec(spec_path)
    write_trusted_files(tmp_path / spec.name, spec, spec_path.read_text(encoding="utf-8"), render_baseline(spec))
    return OperatorDir(tmp_path / spec.name, spec)


def _generate(server: FakeLLMServer, op: OperatorDir, **options):  # noqa: ANN003, ANN202
    plan = prepare("openai", {"base_url": server.url, "model": "fake-model", "max_retries": 0, **options})
    return generate(plan, op, resolve_device("cpu"))


def test_good_kernel_first_time(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok(fenced(honest_kernel()), prompt_tokens=900, completion_tokens=300)]) as server:
        g = _generate(server, op)
    assert g.attempts == ["attempt 1: correct"]
    assert g.source.strip() == honest_kernel().strip()
    assert (g.tokens.calls, g.tokens.prompt_tokens, g.tokens.completion_tokens) == (1, 900, 300)
    assert (op.round_dir(0) / "attempt_1_broadcast_triton.py").is_file()
    system, user = server.messages(0)
    assert system["role"] == "system" and "broadcast(x, bias)" in system["content"] and "poisoned" in system["content"]
    assert op.spec.description in user["content"] and "return x + bias" in user["content"]
    assert "[3, 7, 33]" in user["content"] and "bfloat16" in user["content"]


def test_no_code_block_then_a_kernel(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok("Sure! A Triton kernel adds the bias per row."), ok(fenced(honest_kernel()))]) as server:
        g = _generate(server, op)
    assert g.attempts == ["attempt 1: malformed reply (no code block)", "attempt 2: correct"]
    followup = server.messages(1)
    assert followup[-2] == {"role": "assistant", "content": "Sure! A Triton kernel adds the bias per row."}
    assert "no fenced code block" in followup[-1]["content"] and "2 more tries" in followup[-1]["content"]


def test_syntax_error_then_a_fix(llm_env, tmp_path):
    op = _op(tmp_path)
    broken = honest_kernel().replace("def broadcast(x, bias):", "def broadcast(x, bias)")
    with FakeLLMServer([ok(fenced(broken)), ok(fenced(honest_kernel()))]) as server:
        g = _generate(server, op)
    assert g.attempts[0].startswith("attempt 1: malformed reply (syntax error")
    assert g.attempts[1] == "attempt 2: correct"
    assert "does not parse" in server.messages(1)[-1]["content"]


def test_wrong_answer_then_a_fix(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok(fenced(wrong_kernel())), ok(fenced(honest_kernel()))]) as server:
        g = _generate(server, op)
    assert g.attempts[0].startswith("attempt 1: wrong answer:") and "elements differ" in g.attempts[0]
    assert g.attempts[1] == "attempt 2: correct"
    repair = server.messages(1)[-1]["content"]
    assert "elements differ" in repair and "- b[None, :]" in repair  # the exact failure and the failing code
    assert g.tokens.calls == 2


def test_cheating_kernel_then_an_honest_one(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok(fenced(cheating_kernel())), ok(fenced(honest_kernel()))]) as server:
        g = _generate(server, op)
    assert g.attempts[0].startswith("attempt 1: violation: torch-compute-in-wrapper")
    assert "torch-compute-in-wrapper" in server.messages(1)[-1]["content"]
    assert g.attempts[1] == "attempt 2: correct" and "return out" in g.source


def test_budget_spent_keeps_the_closest_attempt(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok(fenced(wrong_kernel()))]) as server:
        g = _generate(server, op, repairs=0)
    assert len(server.requests) == 1 and g.source == wrong_kernel().rstrip() + "\n"
    assert "no correct kernel within the budget" in g.note


def test_nothing_usable_is_a_generation_error_and_the_exchanges_are_kept(llm_env, tmp_path):
    op = _op(tmp_path)
    with FakeLLMServer([ok("no code")] * 3) as server:
        with pytest.raises(GenerationError, match="no candidate kernel compiled") as e:
            _generate(server, op)
    assert len(server.requests) == 3  # the malformed-reply budget, then stop
    # written as they happened, where the caller said (here the operator folder's llm/); `kernelgen new`
    # keeps them beside its staging folder and names them in the error (tests/llm/test_kernelbench_e2e.py)
    assert len(list((op.path / "llm").glob("*.json"))) == 3 and "malformed reply" in str(e.value)


def test_description_only_spec_gets_an_llm_baseline(llm_env, tmp_path):
    import yaml

    data = yaml.safe_load(SPEC.read_text())
    del data["reference"]
    spec_path = tmp_path / "broadcast_desc.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    baseline = "def broadcast(x, bias):\n    return x + bias\n"
    reply = (f"```python\n# file: broadcast_baseline.py\n{baseline}```\n\n"
             f"```python\n# file: broadcast_triton.py\n{honest_kernel()}```\n")
    with FakeLLMServer([ok(reply)]) as server:
        env = {"OPENAI_BASE_URL": server.url}
        result = CliRunner().invoke(app, ["new", str(spec_path), "--backend", "openai", "--model", "fake-model",
                                          "--out", str(tmp_path / "out"), "--no-bench"], env=env)
    assert result.exit_code == 0, result.output
    assert "no reference implementation" in server.messages(0)[1]["content"]
    op_dir = tmp_path / "out" / "broadcast"
    assert "an LLM wrote this baseline" in (op_dir / "broadcast_baseline.py").read_text()
    assert "return x + bias" in (op_dir / "broadcast_baseline.py").read_text()
    assert "the baseline was written by the LLM" in (op_dir / "optimization_log.md").read_text()


def _no_key_anywhere(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            assert KEY not in p.read_text(encoding="utf-8", errors="replace"), p


def test_acceptance_new_with_openai_backend(llm_env, tmp_path, monkeypatch):
    """Acceptance (1): the kernel comes from the reply, is verified, the exchange and its tokens are
    recorded and the log shows them; the request carries the description and the reference."""
    with FakeLLMServer([ok(fenced(honest_kernel()), prompt_tokens=1234, completion_tokens=567)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        result = CliRunner().invoke(app, ["new", str(SPEC), "--backend", "openai", "--model", "fake-model",
                                          "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    op_dir = tmp_path / "out" / "broadcast"
    assert (op_dir / "broadcast_triton.py").read_text().strip() == honest_kernel().strip()
    request = server.requests[0]
    assert request["body"]["model"] == "fake-model" and request["headers"]["authorization"] == f"Bearer {KEY}"
    user = request["body"]["messages"][1]["content"]
    assert "Add a 1-D bias along the last dimension" in user and "return x + bias" in user
    rec = json.loads((op_dir / "llm" / "0001_generate.json").read_text())
    assert rec["usage"] == {"calls": 1, "prompt_tokens": 1234, "completion_tokens": 567}
    state = json.loads((op_dir / "state.json").read_text())
    assert state["backend"] == "openai" and state["rounds"][0]["tokens"]["prompt_tokens"] == 1234
    assert state["rounds"][0]["accuracy"]["status"] == "ok"
    log = (op_dir / "optimization_log.md").read_text()
    assert "1234 prompt + 567 completion" in log and "attempt 1: correct" in log and "fake-model" in log
    _no_key_anywhere(op_dir)


def test_acceptance_malformed_wrong_correct_then_replay(llm_env, tmp_path, monkeypatch):
    """Acceptance (2): malformed, then a wrong answer, then correct: a correct kernel after two
    repairs, and the log tells that story. Then the recorded run replays with no endpoint."""
    script = [ok("Let me think about the grid first."), ok(fenced(wrong_kernel())), ok(fenced(honest_kernel()))]
    with FakeLLMServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        result = CliRunner().invoke(app, ["new", str(SPEC), "--backend", "openai", "--model", "fake-model",
                                          "--out", str(tmp_path / "out"), "--no-bench"])
    assert result.exit_code == 0, result.output
    assert [r["body"]["messages"][-1]["role"] for r in server.requests] == ["user"] * 3
    op_dir = tmp_path / "out" / "broadcast"
    log = (op_dir / "optimization_log.md").read_text()
    assert "attempt 1: malformed reply (no code block)" in log
    assert "attempt 2: wrong answer:" in log and "elements differ" in log
    assert "attempt 3: correct" in log and "PASS" in log
    assert sorted(p.name for p in (op_dir / "llm").iterdir()) == ["0001_generate.json", "0002_malformed.json", "0003_repair.json"]
    _no_key_anywhere(op_dir)

    # Replay: no endpoint, no key; the same replies give the same kernel and the same story.
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    result = CliRunner().invoke(app, ["new", str(SPEC), "--backend", "replay", "--replay", str(op_dir / "llm"),
                                      "--out", str(tmp_path / "replayed"), "--no-bench"])
    assert result.exit_code == 0, result.output
    again = tmp_path / "replayed" / "broadcast"
    assert (again / "broadcast_triton.py").read_text() == (op_dir / "broadcast_triton.py").read_text()
    s1, s2 = (json.loads((d / "state.json").read_text()) for d in (op_dir, again))
    def kinds(state: dict) -> list[str]:  # inputs are fresh per run, so the numbers differ; the verdicts do not
        return [":".join(a.split(":")[:2]) for a in state["rounds"][0]["attempts"]]

    assert s2["backend"] == "replay" and kinds(s2) == kinds(s1)
    assert kinds(s1) == ["attempt 1: malformed reply (no code block)", "attempt 2: wrong answer", "attempt 3: correct"]
    assert s2["rounds"][0]["tokens"] == s1["rounds"][0]["tokens"]
