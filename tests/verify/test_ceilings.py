"""Ceilings that mean what they say: a matmul judged against the rate of its own dtype and precision
mode, the read ceiling as the best of several read-only kernels (a plain Triton row sum among them),
a peaks cache measured again when what is measured changes, and the TF32 setting read once and
applied alike to the baselines and the worker."""

from __future__ import annotations

import json

import pytest
import torch

from kernelgen.errors import UsageError
from kernelgen import precision
from kernelgen.verify.judge import peaks, precision as judge_precision
from kernelgen.verify.judge.performance import judge_against_peaks
from kernelgen.verify.judge.readpeak import row_sum
from kernelgen.verify.results import DevicePeaks, KernelTiming, PerfCase

# H100-like: FP32 without TF32 is ~1/12 of the bf16 tensor-core rate
H100 = DevicePeaks(schema_version=peaks.PEAKS_SCHEMA, device_name="H100", copy_gbps=3000.0, read_gbps=3080.0,
                   matmul_tflops=700.0, matmul={"bfloat16": 700.0, "float16": 720.0, "float32": 55.0, "tf32": 380.0},
                   measured_at="2026-11-23", torch_version="t")
MATMUL_BYTES = 3 * 8192 * 8192 * 4  # a, b and the output of an 8192^3 float32 product


def _matmul_case(dtype: str, tflops: float) -> PerfCase:
    flops = 2 * 8192**3
    ms = flops / (tflops * 1e12) * 1e3
    return PerfCase(case=0, shapes={"a": [8192, 8192]}, dtype=dtype, bytes=MATMUL_BYTES, flops=flops,
                    kernel=KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=0.0), tflops=tflops,
                    gbps=MATMUL_BYTES / (ms * 1e-3) / 1e9)


def test_a_float32_matmul_is_judged_against_the_fp32_rate_not_bf16():
    pc = _matmul_case("float32", 48.0)  # KernelBench level 1 problem 16 on an H100: "7% of peak" against bf16
    judge_against_peaks(pc, H100, MATMUL_BYTES, 0)
    # the fp32-accurate ceiling: three TF32 products (380 / 3 = 127 TFLOP/s), above FMA fp32's 55
    assert pc.bound == "compute" and pc.valid and pc.precision.startswith("tf32x3")
    assert pc.frac_peak == pytest.approx(48 / (380 / 3))
    slow_tf32 = H100.model_copy(update={"matmul": {**H100.matmul, "tf32": 120.0}})
    pc = _matmul_case("float32", 48.0)
    judge_against_peaks(pc, slow_tf32, MATMUL_BYTES, 0)  # TF32 / 3 below FP32: the FP32 rate stays the ceiling
    assert pc.precision == "FP32, TF32 off" and pc.frac_peak == pytest.approx(48 / 55)


def test_a_tf32x3_float32_matmul_faster_than_fma_fp32_is_valid():
    pc = _matmul_case("float32", 90.0)  # tf32x3 on tensor cores, past the 55 TFLOP/s of fp32 FMA
    judge_against_peaks(pc, H100, MATMUL_BYTES, 0)
    assert pc.valid, pc.invalid_reason


def test_a_float32_matmul_at_tf32_speed_with_tf32_off_is_invalid_and_says_why():
    pc = _matmul_case("float32", 300.0)
    judge_against_peaks(pc, H100, MATMUL_BYTES, 0)
    assert not pc.valid and "TF32, which is off" in pc.invalid_reason and "KERNELGEN_TF32=1" in pc.invalid_reason
    pc = _matmul_case("float32", 300.0)
    judge_against_peaks(pc, H100, MATMUL_BYTES, 0, tf32=True)
    assert pc.valid and pc.precision == "TF32" and pc.frac_peak == pytest.approx(300 / 380)


@pytest.mark.parametrize("dtype, rate", [("bfloat16", 700.0), ("float16", 720.0)])
def test_16_bit_matmuls_against_their_tensor_core_rate(dtype, rate):
    pc = _matmul_case(dtype, 600.0)
    judge_against_peaks(pc, H100, MATMUL_BYTES // 2, 0, tf32=True)  # TF32 concerns float32 only
    assert pc.valid and pc.precision == dtype and pc.frac_peak == pytest.approx(600 / rate)


def test_a_dtype_without_its_own_rate_gets_the_fastest_and_a_cache_from_before_per_dtype_rates_bf16():
    rate, name = H100.matmul_rate("float64", tf32=False)
    assert rate == 720.0 and "none for float64" in name
    old = DevicePeaks(device_name="H100", copy_gbps=3000.0, matmul_tflops=700.0, measured_at="d", torch_version="t")
    assert old.matmul_rate("bfloat16", tf32=False) == (700.0, "bfloat16")


def test_the_read_ceiling_is_the_best_read_only_kernel_including_triton_row_sums():
    src = torch.randn(4 * 4096)
    ms = {"n": 0}

    def bench(fn):  # a made-up timer: each kernel "faster" than the one before; every kernel really runs
        fn()
        ms["n"] += 1
        return 1.0 / ms["n"]

    rates = peaks.read_rates(bench, src)
    assert any(name.startswith("triton row sum") for name in rates) and any(name.startswith("torch") for name in rates)
    best = max(rates, key=rates.get)
    assert best.startswith("triton row sum")  # the last ones timed; the ceiling is their rate, not PyTorch's
    # An honest Triton row_sum at 105% of PyTorch's best reduction (H200, 4437 GB/s) is within the ceiling.
    pc = PerfCase(case=0, shapes={"x": [65536, 4096]}, dtype="float32", bytes=(1 << 30) + (1 << 18),
                  kernel=KernelTiming(ms=0.242, ms_min=0.24, ms_max=0.25, spread=0.01), gbps=4437.0)
    h200 = DevicePeaks(device_name="H200", copy_gbps=4250.0, read_gbps=4440.0, measured_at="d", torch_version="t",
                       read_by_kernel={"torch row sum": 4225.0, "triton row sum 1x4096 w8": 4440.0})
    judge_against_peaks(pc, h200, 1 << 30, 1 << 18)
    assert pc.valid and pc.ceiling == "read"


@pytest.mark.parametrize("block_r, block_c", [(1, 4096), (4, 1024), (8, 512)])
def test_the_triton_row_sum_sums_rows(block_r, block_c):
    x = torch.randn(10, 1500)  # rows not a multiple of the block, columns not a multiple of the chunk
    assert torch.allclose(row_sum(x, block_r, block_c, 4), x.sum(dim=1), atol=1e-4)


def test_a_peaks_cache_of_another_schema_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    old = H100.model_dump() | {"schema_version": 1}
    (tmp_path / "peaks.json").write_text(json.dumps({"H100 | torch t": old}))
    assert peaks.cached_peaks("H100 | torch t") is None
    peaks.store_peaks("H100 | torch t", H100)
    assert peaks.cached_peaks("H100 | torch t") == H100
    (tmp_path / "peaks.json").write_text("{not json")
    assert peaks.cached_peaks("H100 | torch t") is None  # damaged: measured again, not trusted


@pytest.mark.parametrize("value, on", [("", False), ("0", False), ("off", False), ("1", True), ("TRUE", True), ("on", True)])
def test_tf32_follows_the_users_setting_in_the_worker_too(monkeypatch, value, on):
    monkeypatch.setenv(precision.ENV, value)
    assert precision.tf32_enabled() is on
    assert precision.worker_env()["TRITON_F32_DEFAULT"] == ("tf32" if on else "ieee")
    assert ("TF32 on" if on else "TF32 off") in judge_precision.describe(on)


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("0", False), ("off", False)])
def test_convolutions_have_their_own_tf32_switch_on_by_default_like_cudnn(monkeypatch, value, on):
    monkeypatch.delenv(precision.ENV, raising=False)  # matmuls: off
    if value is None:
        monkeypatch.delenv(precision.CONV_ENV, raising=False)
    else:
        monkeypatch.setenv(precision.CONV_ENV, value)
    assert precision.conv_tf32_enabled() is on and precision.tf32_enabled() is False
    assert precision.worker_env() == {"TRITON_F32_DEFAULT": "ieee", precision.CONV_ENV: "1" if on else "0"}
    with judge_precision.matmul_precision(False):  # eager's matmuls stay IEEE; its convolutions follow their own switch
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is on
    with judge_precision.matmul_precision(False, conv_tf32=False):  # an exact run asks for both off
        assert torch.backends.cudnn.allow_tf32 is False
    assert ("convolutions may use TF32" if on else "convolutions in IEEE FP32") in judge_precision.describe(False)


def test_a_tf32_setting_that_is_neither_on_nor_off_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(precision.ENV, "maybe")
    with pytest.raises(UsageError, match="KERNELGEN_TF32"):
        precision.tf32_enabled()


def test_the_precision_mode_applies_inside_and_is_restored_after():
    before = torch.backends.cuda.matmul.allow_tf32
    with judge_precision.matmul_precision(not before, conv_tf32=not before):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before)
        assert torch.backends.cudnn.allow_tf32 is (not before)
    assert torch.backends.cuda.matmul.allow_tf32 is before
