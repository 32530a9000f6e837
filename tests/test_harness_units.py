"""Unit tests of the harness's pieces: comparison messages and NaN/Inf rules, the device-ceiling
judgment, the guard's poison and freshness tracking, the static rules, and the code table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kernelgen import harness
from kernelgen.verify import guard, staticcheck
from kernelgen.harness import _judge_against_peaks, compare
from kernelgen.verify.results import DevicePeaks, KernelTiming, PerformanceResult, PerfCase
from kernelgen.spec import ToleranceSpec
from kernelgen.verify.staticcheck import VIOLATION_CODES, check_source

TOL = ToleranceSpec(atol=1e-4, rtol=1e-4)
KERNELGEN = Path(harness.__file__).parent


# --- compare --------------------------------------------------------------------------------------
def test_compare_reports_count_worst_index_and_values():
    e = torch.zeros(3, 4)
    g = e.clone()
    g[1, 2] = 0.5
    g[2, 3] = 0.01
    f = compare(g, e, TOL)
    assert not f["passed"] and f["mismatches"] == 2 and f["total"] == 12
    assert f["worst_index"] == [1, 2] and f["got"] == 0.5 and f["expected"] == 0.0
    assert f["max_abs_err"] == pytest.approx(0.5)
    assert "2 of 12 elements differ" in f["message"] and "[1, 2]" in f["message"] and "0.5" in f["message"]


def test_all_nan_mismatch_says_nan_not_max_err_zero():
    e = torch.ones(5)
    g = e.clone()
    g[3] = float("nan")
    f = compare(g, e, TOL)
    assert not f["passed"] and f["mismatches"] == 1 and f["nonfinite"] == 1
    assert "NaN/Inf where the baseline is finite" in f["message"]
    assert "max abs err 0" not in f["message"]
    assert f["worst_index"] == [3] and f["got"] is None and f["expected"] == 1.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_where_baseline_is_finite_never_passes_even_with_huge_tolerance(bad):
    e = torch.randn(16)
    g = e.clone()
    g[0] = bad
    assert not compare(g, e, ToleranceSpec(atol=1e30, rtol=1e30))["passed"]


def test_infinite_baseline_needs_the_same_infinity():
    e = torch.tensor([float("inf"), -float("inf"), 1.0])
    assert compare(e.clone(), e, TOL)["passed"]
    for g in ([1e30, -float("inf"), 1.0], [-float("inf"), -float("inf"), 1.0], [float("nan"), -float("inf"), 1.0]):
        assert not compare(torch.tensor(g), e, TOL)["passed"], g


def test_nan_where_baseline_is_nan_passes():
    e = torch.tensor([float("nan"), 2.0])
    assert compare(e.clone(), e, TOL)["passed"]


def test_integers_compare_exactly_beyond_float64_precision():
    e = torch.tensor([2**62 + 1], dtype=torch.int64)
    g = torch.tensor([2**62], dtype=torch.int64)
    f = compare(g, e, TOL)
    assert not f["passed"] and "exact match required" in f["message"]


def test_poisoned_elements_are_counted_as_unwritten():
    e = torch.randn(2, 8)
    g = torch.empty_like(e)
    guard.poison(g)
    g[0] = e[0]
    f = compare(g, e, TOL)
    assert f["unwritten"] == 8 and "8 never written" in f["message"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_poison_is_nan_with_a_distinct_payload(dtype):
    t = torch.empty(4, dtype=dtype)
    guard.poison(t)
    assert torch.isnan(t).all() and guard.poisoned_mask(t).all()
    computed = torch.zeros(4, dtype=dtype) / torch.zeros(4, dtype=dtype)  # an arithmetic NaN
    assert not guard.poisoned_mask(computed).any()


def test_compare_rejects_wrong_type_shape_dtype_and_subclass():
    e = torch.zeros(4)

    class Sub(torch.Tensor):
        pass

    assert "plain torch.Tensor" in compare(e.clone().as_subclass(Sub), e, TOL)["message"]
    assert "plain torch.Tensor" in compare([0.0] * 4, e, TOL)["message"]
    assert "shape" in compare(torch.zeros(5), e, TOL)["message"]
    assert "dtype" in compare(torch.zeros(4, dtype=torch.float64), e, TOL)["message"]


# --- the device ceiling ---------------------------------------------------------------------------
def _perf(gbps: float, tflops: float | None = None) -> tuple[PerfCase, PerformanceResult]:
    t = KernelTiming(ms=1.0, ms_min=1.0, ms_max=1.0, spread=0.0)
    pc = PerfCase(case=0, shapes={"x": [1]}, dtype="float16", bytes=int(gbps * 1e6), flops=int(tflops * 1e9) if tflops else None,
                  kernel=t, gbps=gbps, tflops=tflops)
    res = PerformanceResult(op="x", kernel="k", device="cuda", device_name="H100", interpreter=False, measured=True,
                            torch_version="t", triton_version="t",
                            peaks=DevicePeaks(device_name="H100", copy_gbps=3000.0, matmul_tflops=700.0,
                                              measured_at="2025-01-01", torch_version="t"))
    return pc, res


def test_speed_above_the_measured_bandwidth_is_invalid():
    pc, res = _perf(gbps=3400.0)
    _judge_against_peaks(pc, res)
    assert not pc.valid and "exceeds the measured copy bandwidth" in pc.invalid_reason
    assert pc.bound == "memory" and pc.frac_peak == pytest.approx(3400 / 3000)
    res.cases.append(pc)
    assert not res.ok


def test_speed_within_the_ceiling_is_valid():
    pc, res = _perf(gbps=2900.0)
    _judge_against_peaks(pc, res)
    assert pc.valid and pc.frac_peak == pytest.approx(2900 / 3000)


def test_flops_above_the_measured_matmul_peak_is_invalid():
    pc, res = _perf(gbps=100.0, tflops=900.0)
    _judge_against_peaks(pc, res)
    assert pc.bound == "compute" and not pc.valid and "matmul peak" in pc.invalid_reason


def test_no_peaks_no_judgment():
    pc, res = _perf(gbps=1e9)
    res.peaks = None
    _judge_against_peaks(pc, res)
    assert pc.valid  # interpreter runs have no ceiling: their numbers are marked as not measurements


# --- the guard ------------------------------------------------------------------------------------
def test_guard_flags_compute_and_records_fresh_allocations():
    x = torch.randn(8)
    with guard.guarded() as report:
        out = torch.empty_like(x)
        y = x + 1
    assert any(v.code == "torch-compute-in-wrapper" for v in report.violations)
    assert any(v.code == "no-triton-launch" for v in report.violations)
    assert report.is_fresh(out) and report.is_fresh(out[2:]) and not report.is_fresh(x)
    assert guard.poisoned_mask(out).all()
    del y


def test_guard_flags_a_dtype_cast():
    x = torch.randn(8, dtype=torch.float16)
    with guard.guarded() as report:
        x.float()
    assert any(v.code == "torch-compute-in-wrapper" and "converts" in v.message for v in report.violations)


def test_integrity_snapshot_sees_patches_and_restores(monkeypatch):
    snap = harness.IntegritySnapshot()
    assert snap.changed() == []
    monkeypatch.setattr(torch, "equal", lambda a, b: True)
    assert "torch.equal replaced" in snap.changed()
    monkeypatch.undo()
    monkeypatch.setattr(torch.Tensor, "__ne__", lambda a, b: a, raising=False)
    assert any("torch.Tensor.__ne__" in c for c in snap.changed())
    monkeypatch.undo()
    assert snap.changed() == []


# --- static rules ---------------------------------------------------------------------------------
HONEST = (Path(__file__).parent / "adversarial" / "honest.py").read_text()


def _codes(src: str) -> set[str]:
    return {v.code for v in check_source(src, "broadcast", baseline_module="broadcast_baseline")}


def test_honest_source_passes_static_checks():
    assert _codes(HONEST) == set()


@pytest.mark.parametrize("snippet, code", [
    ("x = torch.sys.modules", "forbidden-api"),
    ("from torch import sys as s", "forbidden-api"),
    ("e = torch.os.getenv('OPENAI_API_KEY')", "reads-environment"),
    ("t = torch\nt.allclose = None", "monkeypatch"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "monkeypatch"),
    ("del torch.equal", "monkeypatch"),
    ("g = getattr(torch, 'sy' + 's')", "forbidden-call"),
    ("g = getattr(torch, '_C')", "forbidden-api"),
    ("f = __file__", "introspection"),
    ("def __getattr__(name):\n    return None", "introspection"),
    ("c = torch._dynamo", "forbidden-api"),
    ("torch.set_default_dtype(torch.float64)", "forbidden-api"),
    ("g = torch.cuda.CUDAGraph()", "forbidden-api"),
    ("torch.save({}, 'x.pt')", "forbidden-api"),
    ("K = type('K', (), {})", "forbidden-call"),
    ("exit(0)", "forbidden-call"),
])
def test_static_rules(snippet, code):
    assert code in _codes(HONEST + "\n\n" + snippet + "\n")


def test_entry_rebound_at_module_level():
    assert "entry-rebound" in _codes(HONEST + "\n\nbroadcast = lambda x, bias: x + bias\n")


def test_try_star_counts_as_fallback():
    src = HONEST.replace("    x = x.contiguous()", "    try:\n        pass\n    except* ValueError:\n        pass\n    x = x.contiguous()")
    assert "fallback-try-except" in _codes(src)


def test_every_emitted_code_is_documented_in_one_table():
    emitted: set[str] = set()
    for mod in (staticcheck, guard, harness):
        text = Path(mod.__file__).read_text()
        emitted |= set(re.findall(r'(?:add|violate)\(\s*"([a-z-]+)"', text))
        emitted |= set(re.findall(r'code="([a-z-]+)"', text))
    assert emitted, "no codes found"
    missing = emitted - set(VIOLATION_CODES)
    assert not missing, f"undocumented violation codes: {missing}"
    doc = staticcheck.__doc__ or ""
    assert all(code in doc for code in VIOLATION_CODES), [c for c in VIOLATION_CODES if c not in doc]
