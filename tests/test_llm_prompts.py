"""Prompts render (StrictUndefined) and carry what the model needs: the rules, the contract, the
spec, the failure, the measurements and the strategy catalogue."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.devices import DeviceInfo
from kernelgen.llm.prompts import generation_messages, optimization_messages, repair_messages
from kernelgen.verify.results import DevicePeaks, KernelTiming, PerfCase, PerformanceResult, RunRecord
from kernelgen.spec import load_spec

CPU = DeviceInfo("cpu", "cpu", interpreter=True)


@pytest.fixture(scope="module")
def spec():  # noqa: ANN201
    return load_spec(Path(__file__).resolve().parent.parent / "operator_specs/broadcast.yaml", run_reference=False)


def test_system_prompt_states_the_rules_and_the_contract(spec):
    system = generation_messages(spec, CPU)[0]["content"]
    for needle in ("broadcast_triton.py", "broadcast(x, bias)", "triton.language", "no arithmetic in PyTorch",
                   "@triton.jit", "try/except", "baseline", "poisoned", "must not be modified", "fresh random inputs",
                   "measured ceiling"):
        assert needle in system, needle


def test_generation_prompt_has_spec_device_and_example(spec):
    user = generation_messages(spec, CPU)[1]["content"]
    for needle in (spec.description, "return x + bias", "x[3, 7, 33]", "float16 atol 0.001", "interpreter",
                   "@triton.jit", "def scale_rows"):
        assert needle in user, needle
    peaks = DevicePeaks(device_name="NVIDIA H100", copy_gbps=3000, matmul_tflops=720, measured_at="2025-01-01",
                        torch_version="2.11")
    gpu = generation_messages(spec, DeviceInfo("cuda", "cuda", interpreter=False), peaks=peaks)[1]["content"]
    assert "3000 GB/s" in gpu and "720 TFLOP/s" in gpu


def test_repair_prompt_has_code_and_failure(spec):
    user = repair_messages(spec, "def broadcast(x, bias):\n    pass\n", "512 of 8192 elements differ",
                           verdict="wrong answer", attempt=2, intent="wider tiles")[1]["content"]
    assert "512 of 8192 elements differ" in user and "def broadcast(x, bias):" in user
    assert "wrong answer" in user and "attempt 2" in user and "wider tiles" in user


def test_optimization_prompt_has_measurements_history_and_strategies(spec):
    case = PerfCase(case=0, shapes={"x": [16384, 4096], "bias": [4096]}, dtype="float16", bytes=1,
                    kernel=KernelTiming(ms=0.1, ms_min=0.09, ms_max=0.12, spread=0.02), gbps=1500.0,
                    frac_peak=0.5, bound="memory", speedup_eager=1.1)
    perf = RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=PerformanceResult(
        op="broadcast", kernel="k.py", device="cuda", device_name="H100", interpreter=False, measured=True,
        torch_version="2.11", triton_version="3.6", cases=[case]))
    msgs = optimization_messages(spec, "def broadcast(x, bias):\n    pass\n", "memory-bound at 50% of the ceiling",
                                 ["round 1 (parameters): BLOCK 1024 -> rejected: slower"], measurements=perf, round_k=2)
    user = msgs[1]["content"]
    for needle in ("50% of the memory-bound ceiling", "1500 GB/s", "memory-bound at 50%", "BLOCK 1024 -> rejected",
                   "num_warps", "autotune", "eviction_policy", "Per-shape parameter selection", "CHANGE:", "TYPE:",
                   "round 2"):
        assert needle in user, needle
    assert "none yet" in optimization_messages(spec, "x", "d", [])[1]["content"]
