"""PyTorch's precision policy, stated: one typed object (kernelgen.precision.PrecisionPolicy)
resolved from the user's switches (--precision / KERNELGEN_PRECISION, then KERNELGEN_TF32 and
KERNELGEN_CONV_TF32, then PyTorch's defaults), carried to the worker, read by the ceilings and named by
every report."""

from __future__ import annotations

import os

import pytest
import torch
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.errors import UsageError
from kernelgen.record.display import tf32_label
from kernelgen import precision
from kernelgen.verify.judge import precision as judge_precision
from kernelgen.verify.judge.performance import counted_products, judge_against_peaks
from kernelgen.precision import PrecisionPolicy
from kernelgen.verify.results import DevicePeaks, KernelTiming, PerfCase, PerformanceResult

SWITCHES = (precision.OPTION_ENV, precision.ENV, precision.CONV_ENV)


@pytest.fixture(autouse=True)
def no_switch_set(monkeypatch):
    for name in SWITCHES:
        monkeypatch.setenv(name, "")  # recorded, so whatever a test (or --precision) sets is undone after it
        monkeypatch.delenv(name)


def test_pytorchs_defaults_are_the_policy_when_nothing_is_set():
    p = precision.precision_policy()
    assert (p.matmul, p.conv, p.matmul_from, p.conv_from) == ("ieee", "tf32", "pytorch-default", "pytorch-default")
    assert p == PrecisionPolicy() and p.is_pytorch_default
    assert p.label() == "matmul IEEE, conv TF32 (PyTorch's defaults)"
    assert "torch.backends.cudnn.allow_tf32 = True" in p.describe() and "allow_tf32 = False" in p.describe()


@pytest.mark.parametrize("text, modes", [
    ("pytorch", {"matmul": "ieee", "conv": "tf32"}), ("ieee", {"matmul": "ieee", "conv": "ieee"}),
    ("TF32", {"matmul": "tf32", "conv": "tf32"}), ("conv=ieee", {"conv": "ieee"}),
    ("matmul=high, conv=tf32", {"matmul": "tf32", "conv": "tf32"}), ("matmul=highest", {"matmul": "ieee"}),
])
def test_precision_takes_presets_per_kind_modes_and_pytorchs_matmul_words(text, modes):
    assert precision.parse_precision(text) == modes


@pytest.mark.parametrize("text", ["", "fast", "matmul=medium", "conv=high", "matmul=tf32,matmul=ieee", "gemm=tf32"])
def test_a_precision_that_means_nothing_is_a_usage_error_saying_what_it_takes(text):
    with pytest.raises(UsageError, match="precision") as e:
        precision.parse_precision(text)
    assert "matmul=tf32,conv=ieee" in (e.value.hint or "")


def test_the_option_beats_the_per_switch_variables_which_beat_pytorchs_defaults(monkeypatch):
    monkeypatch.setenv(precision.ENV, "1")
    p = precision.precision_policy()
    assert (p.matmul, p.matmul_from, p.conv, p.conv_from) == ("tf32", "env", "tf32", "pytorch-default")
    assert p.label() == "matmul TF32 (KERNELGEN_TF32=1), conv TF32 (PyTorch's default)"
    p = precision.use_precision("conv=ieee")  # --precision names conv only: matmul still from the environment
    assert os.environ[precision.OPTION_ENV] == "conv=ieee"
    assert (p.matmul, p.matmul_from, p.conv, p.conv_from) == ("tf32", "env", "ieee", "option")
    assert "--precision conv=ieee" in p.label() and precision.precision_policy() == p


def test_the_worker_gets_the_policy_and_sets_pytorchs_switches_to_it(monkeypatch):
    p = precision.use_precision("matmul=tf32,conv=ieee")
    env = precision.worker_env()
    assert env == {"TRITON_F32_DEFAULT": "tf32", precision.CONV_ENV: "0"}  # tl.dot's default follows the matmul mode
    seen = PrecisionPolicy.from_worker_env(env)
    assert (seen.matmul, seen.conv) == (p.matmul, p.conv)
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        seen.apply_to_torch()
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_eager_runs_under_the_policy_and_a_float32_truth_with_both_switches_off():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with judge_precision.applied(PrecisionPolicy(matmul="tf32", conv="tf32")):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        with judge_precision.applied(exact=True):
            assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_the_command_line_option_is_checked_and_exported_for_what_the_command_starts(tmp_path):
    bad = CliRunner().invoke(app, ["bench", str(tmp_path), "--precision", "fast"])
    assert bad.exit_code == 2 and "'fast' is not a precision setting" in bad.output and "Traceback" not in bad.output
    for command in ("new", "test", "bench", "optimize", "batch"):
        assert "--precision" in " ".join(CliRunner().invoke(app, [command, "--help"]).output.split()), command
    CliRunner().invoke(app, ["test", str(tmp_path / "no-such-op"), "--precision", "matmul=tf32"])
    assert os.environ[precision.OPTION_ENV] == "matmul=tf32"  # the service key, the workers and batch steps follow it
    assert precision.precision_policy().matmul_from == "option"


def _conv_case(tflops: float) -> PerfCase:
    flops = 2 * 10**12
    ms = flops / (tflops * 1e12) * 1e3
    return PerfCase(case=0, shapes={"x": [8, 32, 512, 512]}, dtype="float32", bytes=10**9, flops=flops,
                    kernel=KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=0.0), tflops=tflops, gbps=1e9 / (ms * 1e-3) / 1e9)


H100 = DevicePeaks(device_name="H100", copy_gbps=3000.0, read_gbps=3080.0, measured_at="2026-11-23", torch_version="t",
                   matmul={"bfloat16": 700.0, "float16": 720.0, "float32": 55.0, "tf32": 380.0})


def test_a_float32_convolution_may_reach_the_tf32_rate_exactly_where_the_policy_lets_convolutions_use_tf32():
    conv = torch.nn.Conv2d(4, 8, 3)
    products = counted_products(lambda x: conv(x), [torch.randn(2, 4, 16, 16)], {})
    assert set(products) == {"conv"}
    assert set(counted_products(lambda a, b: a @ b, [torch.randn(4, 8), torch.randn(8, 3)], {})) == {"matmul"}
    fast = _conv_case(200.0)  # one TF32 product: past tf32x3's 127 TFLOP/s, within TF32's 380
    judge_against_peaks(fast, H100, 10**9, 0, tf32=PrecisionPolicy().tf32_for(set(products)))
    assert fast.valid and fast.precision == "TF32"
    held = _conv_case(200.0)
    judge_against_peaks(held, H100, 10**9, 0, tf32=PrecisionPolicy(conv="ieee").tf32_for(set(products)))
    assert not held.valid and "TF32, which is off" in held.invalid_reason


def test_bench_and_the_log_name_the_policy_a_run_was_measured_under():
    policy = PrecisionPolicy(conv="ieee", conv_from="env")
    perf = PerformanceResult(op="x", kernel="x_triton.py", device="cuda", device_name="H100", interpreter=False,
                             measured=True, torch_version="t", triton_version="t", precision=policy,
                             cases=[_conv_case(50.0)])
    assert tf32_label(perf) == ", precision: matmul IEEE (PyTorch's default), conv IEEE (KERNELGEN_CONV_TF32=0)"
    old = perf.model_copy(update={"precision": None, "tf32": False})  # a state.json written before the policy
    assert tf32_label(old) == ", float32 matmuls with TF32 off"
