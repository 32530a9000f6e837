"""The LLM path end to end, through `kernelgen new` and the real `openai` client against the local test
server (tests/support/fake_llm_server.py), on the CPU interpreter:

- a KernelBench-format convolution of our own (tests/support/llm_problems.py: stride 2, padding 1, a bias):
  a wrong first kernel (it forgets the padding), then a real Triton implicit-GEMM kernel after one
  repair; the same run again through `--backend replay`, with no endpoint;
- a forced failure (the endpoint fails the repair request): nothing is written but the transcript,
  the error says where it is, and the same command again reuses its reply instead of paying for it;
- KernelBench level 1's 41 (a padded, dilated max pool, at smaller sizes): a kernel padding with 0
  instead of -inf, right on every `torch.rand` draw, is refused on the judge's negated case, and the
  repair prompt says so and where (the start of the length); the prompt states the output rule `x[2] - 13`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.llm.transcript import MARK
from tests.support.fake_llm_server import FakeLLMServer, fenced, honest_kernel, ok, status, wrong_kernel
from tests.support.llm_problems import conv2d_kernel, conv2d_wrong_kernel, max_pool1d_kernel, max_pool1d_zero_padded_kernel, write_problem
from tests.support.paths import SPECS

pytestmark = pytest.mark.slow

SPEC = SPECS / "broadcast.yaml"
NAME = "kb_conv2d_strided"


def flat(text: str) -> str:
    return " ".join(text.split())


def _attempt_kinds(op_dir: Path) -> list[str]:
    state = json.loads((op_dir / "state.json").read_text())
    return [":".join(a.split(":")[:2]) for a in state["rounds"][0]["attempts"]]


def test_a_convolution_through_openai_with_one_repair_then_replayed(llm_env, tmp_path):
    problem = write_problem(tmp_path, "conv2d_strided")
    out = tmp_path / "out"
    script = [ok(fenced(conv2d_wrong_kernel(), "Implicit GEMM: a program per 256 output pixels x 16 channels.")),
              ok(fenced(conv2d_kernel(), "CAUSE: the input row index left out the padding offset."))]
    with FakeLLMServer(script) as server:
        result = CliRunner().invoke(app, ["new", str(problem), "--backend", "openai", "--model", "fake-model", "--out",
                                          str(out), "--no-bench"], env={"OPENAI_BASE_URL": server.url})
    assert result.exit_code == 0, result.output
    op_dir = out / NAME
    assert sorted(p.name for p in out.iterdir()) == [NAME]  # the transcript moved into the operator folder
    assert (op_dir / f"{NAME}_triton.py").read_text().strip() == conv2d_kernel().strip()
    assert _attempt_kinds(op_dir) == ["attempt 1: wrong answer", "attempt 2: correct"]
    generate = server.messages(0)[1]["content"]
    assert "a **convolution** operator" in generate and "Implicit GEMM" in generate
    assert "([4, 32, 32, 24] at the performance case; checked on every test case)" in generate
    assert "`conv` (Conv2d): stride=(2, 2), padding=(1, 1)" in generate
    repair = server.messages(1)[1]["content"]
    assert "elements differ" in repair and "oh[:, None] * STRIDE + kh" in repair  # the failure and the failing code
    log = (op_dir / "optimization_log.md").read_text()
    assert "design note: Implicit GEMM: a program per 256 output pixels x 16 channels." in log
    assert "the padding offset" in log and "attempt 2: correct" in log
    text = flat(result.output)
    assert "wrong answer: " in text and "checks failed; first: case" in text
    assert sorted(p.name for p in (op_dir / "llm").iterdir()) == ["0001_generate.json", "0002_repair.json"]

    replayed = tmp_path / "replayed"
    again = CliRunner().invoke(app, ["new", str(problem), "--backend", "replay", "--replay", str(op_dir / "llm"),
                                     "--out", str(replayed), "--no-bench"])
    assert again.exit_code == 0, again.output
    assert (replayed / NAME / f"{NAME}_triton.py").read_text() == (op_dir / f"{NAME}_triton.py").read_text()
    assert _attempt_kinds(replayed / NAME) == _attempt_kinds(op_dir)
    assert json.loads((replayed / NAME / "state.json").read_text())["backend"] == "replay"


def test_a_failed_run_keeps_the_transcript_and_the_same_command_reuses_it(llm_env, tmp_path):
    out = tmp_path / "out"
    with FakeLLMServer([ok(fenced(wrong_kernel())), status(500, "the GPU server fell over")]) as server:
        args = ["new", str(SPEC), "--backend", "openai", "--model", "fake-model", "--out", str(out), "--no-bench",
                "--max-retries", "0"]
        first = CliRunner().invoke(app, args, env={"OPENAI_BASE_URL": server.url})
    assert first.exit_code == 1, first.output
    (kept,) = [p for p in out.iterdir()]  # no operator folder, no staging folder: only the transcript
    assert kept.name.startswith(f"broadcast{MARK}")
    assert sorted(p.name for p in kept.iterdir()) == ["0001_generate.json", "0002_repair.json"]
    text = flat(first.output)
    assert "server error (500)" in text and f"kept in {kept}" in text and "run the same command again" in text
    assert f"--backend replay --replay {kept}" in text

    with FakeLLMServer([ok(fenced(honest_kernel()))]) as server:
        second = CliRunner().invoke(app, args, env={"OPENAI_BASE_URL": server.url})
    assert second.exit_code == 0, second.output
    assert len(server.requests) == 1, "the generate request was answered from the transcript"
    assert "failed KernelGen's checks" in server.messages(0)[1]["content"]  # only the repair was paid for again
    assert "recorded replies in" in flat(second.output)
    llm = out / "broadcast" / "llm"
    first_rec, second_rec = (json.loads((llm / n).read_text()) for n in ("0001_generate.json", "0002_repair.json"))
    assert first_rec["replayed_from"].endswith("0001_generate.json") and second_rec["replayed_from"] is None
    assert sorted(p.name for p in out.iterdir()) == ["broadcast"]  # every reply of the earlier run is in llm/ now


def test_a_crash_beside_the_model_keeps_the_transcript_and_says_where(llm_env, tmp_path, monkeypatch):
    """Not a domain error (a judge-side ProtocolError, say): the traceback is the bug's, and a note under it
    says where the model's replies are."""
    import kernelgen.llm.repair as repair

    def judge_falls_over(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("the worker's transfer area is too small")

    monkeypatch.setattr(repair, "run_accuracy", judge_falls_over)
    out = tmp_path / "out"
    with FakeLLMServer([ok(fenced(honest_kernel()))]) as server:
        result = CliRunner().invoke(app, ["new", str(SPEC), "--backend", "openai", "--model", "fake-model", "--out",
                                          str(out), "--no-bench"], env={"OPENAI_BASE_URL": server.url})
    assert isinstance(result.exception, RuntimeError)
    (kept,) = out.iterdir()
    note = " ".join(result.exception.__notes__)
    assert kept.name.startswith(f"broadcast{MARK}") and f"kept in {kept}" in note and (kept / "0001_generate.json").is_file()


def test_a_zero_padded_max_pool_is_refused_naming_the_generated_case(llm_env, tmp_path):
    problem = write_problem(tmp_path, "max_pool1d")
    out = tmp_path / "out"
    script = [ok(fenced(max_pool1d_zero_padded_kernel(), "One program per 128 outputs of a row; padding is a masked load.")),
              ok(fenced(max_pool1d_kernel(), "CAUSE: the padding loaded 0 where a max needs -inf."))]
    with FakeLLMServer(script) as server:
        result = CliRunner().invoke(app, ["new", str(problem), "--backend", "openai", "--model", "fake-model", "--out",
                                          str(out), "--no-bench"], env={"OPENAI_BASE_URL": server.url})
        generate, repair = (server.messages(i)[1]["content"] for i in range(2))
    assert result.exit_code == 0, result.output
    op_dir = out / "kb_max_pool1d"
    assert _attempt_kinds(op_dir) == ["attempt 1: wrong answer", "attempt 2: correct"]
    first = json.loads((op_dir / "state.json").read_text())["rounds"][0]["attempts"][0]
    assert "checks failed; first: case 0 negated x[2, 3, 181] float32" in first  # the generated case, named
    assert "shape [`x[0]`, `x[1]`, `x[2] - 13`] ([2, 3, 1011] at the performance case" in generate
    assert "- case 0 negated x[2, 3, 181] float32, output `out`: 3 of 3 checks fail" in repair
    assert "elements differ" in repair and "at the start of dim 2" in repair and 'other=0.0' in repair
