"""The operator analysis that opens the log: bytes, FLOPs, intensity against the ridge, bound, best
time at the ceiling, strategies; reference ceilings until a device is measured, then its own."""

import textwrap

from kernelgen.record.analysis import REFERENCE_CEILINGS, analyse_operator, latest_peaks, needs_ceilings, with_ceilings
from kernelgen.record.oplog import render_log, update_analysis
from kernelgen.record.state import OpState, RoundRecord
from kernelgen.spec import load_spec, validate_spec_data
from kernelgen.verify.results import DevicePeaks, PerformanceResult, RunRecord

PEAKS = DevicePeaks(device_name="NVIDIA H100 80GB HBM3", copy_gbps=3000.0, matmul_tflops=600.0,
                    measured_at="2026-11-22", torch_version="2.11")


def _spec(text):
    import yaml

    return validate_spec_data(yaml.safe_load(textwrap.dedent(text)))


def test_broadcast_is_memory_bound_with_the_exact_minimum_bytes(repo):
    a = analyse_operator(load_spec(repo / "operator_specs" / "broadcast.yaml"), None)
    first = a.cases[0]  # x[8,1024,1024,32] + bias[32] in float32, out the size of x
    n = 8 * 1024 * 1024 * 32
    assert (first.dtype, first.read_bytes, first.written_bytes) == ("float32", 4 * (n + 32), 4 * n)
    assert first.bound == "memory" and first.ceiling == "copy 4250 GB/s"
    assert abs(first.best_us - first.bytes / 4250e3) < 1e-6
    assert len(a.cases) == 3 * 2  # perf cases x perf_dtypes
    assert not a.ceilings.measured and "NOT this machine" in a.ceilings.source
    assert any("Memory-bound" in s for s in a.strategies)


def test_matmul_flops_come_from_the_spec_else_from_the_flop_counter(repo):
    spec = load_spec(repo / "operator_specs" / "matmul_leakyrelu.yaml")
    a = analyse_operator(spec, None)
    assert all(c.flops_from == "spec" and c.bound == "compute" for c in a.cases)
    assert any("tensor-core" in s for s in a.strategies)
    counted = analyse_operator(spec.model_copy(update={"flops": None}), None)
    m = spec.effective_perf_cases[0]["a"][0]
    assert counted.cases[0].flops_from == "counted" and counted.cases[0].flops == 2 * m ** 3  # square matmul
    assert counted.cases[0].bound == "compute"


def test_long_rows_suggest_an_online_softmax(repo):
    a = analyse_operator(load_spec(repo / "operator_specs" / "softmax.yaml"), None)
    assert any("online softmax" in s for s in a.strategies)


def test_a_reference_that_cannot_run_on_shape_only_tensors_is_said_not_guessed():
    spec = _spec("""\
        name: odd
        inputs: [{name: x}]
        outputs: [{name: out}]
        reference: |
          def odd(x):
              return x + 1
        dtypes: [float32]
        test_cases: [{x: [4]}]
    """)
    # .tolist() needs real data: a meta tensor has none
    a = analyse_operator(spec.model_copy(update={"reference": "def odd(x):\n    return torch.tensor(x.tolist())\n"}), None)
    c = a.cases[0]
    assert c.written_bytes is None and c.bound == "unknown" and c.best_us is None
    assert any("could not run on shape-only tensors" in n for n in a.notes)


def test_measured_ceilings_replace_the_reference_figures(repo):
    spec = load_spec(repo / "operator_specs" / "broadcast.yaml")
    a = analyse_operator(spec, None)
    assert needs_ceilings(a, PEAKS) and not needs_ceilings(a, None)
    b = with_ceilings(a, spec, PEAKS)
    assert b.ceilings.measured and b.ceilings.device_name == PEAKS.device_name and b.ceilings.read_gbps is None
    assert b.cases[0].ceiling == "copy 3000 GB/s" and b.cases[0].best_us > a.cases[0].best_us
    assert b.cases[0].bytes == a.cases[0].bytes  # the facts stay; only the judgement moves
    assert not needs_ceilings(b, PEAKS)
    assert not any("reference figures" in n for n in b.notes)


def _perf_run(peaks):
    perf = PerformanceResult(op="broadcast", kernel="k.py", device="cuda", device_name=peaks.device_name,
                             interpreter=False, measured=True, torch_version="2.11", triton_version="3.6", peaks=peaks)
    return RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=perf)


def test_the_log_is_refreshed_when_the_operator_is_first_measured_on_a_device(repo, tmp_path):
    spec = load_spec(repo / "operator_specs" / "broadcast.yaml")
    state = OpState(name="broadcast", created_at="t", backend="offline", device="cuda",
                    rounds=[RoundRecord(round=0, started_at="t", backend="offline", kernel_file="k.py")])
    assert update_analysis(tmp_path, state, spec)  # a folder from before the analysis gets one
    assert not state.analysis.ceilings.measured
    assert not update_analysis(tmp_path, state, spec)
    state.rounds[0].performance = _perf_run(PEAKS)
    assert latest_peaks([r.performance for r in state.rounds]) == PEAKS
    assert update_analysis(tmp_path, state, spec) and state.analysis.ceilings.measured
    log = render_log(state, spec)
    assert f"measured on {PEAKS.device_name}" in log and "| x[8, 1024, 1024, 32] bias[32] | float32 |" in log
    assert REFERENCE_CEILINGS.source not in log


H100 = DevicePeaks(device_name="NVIDIA H100 80GB HBM3", copy_gbps=3000.0, matmul_tflops=721.0,
                   matmul={"bfloat16": 721.0, "float16": 700.0, "float32": 51.0, "tf32": 378.0},
                   measured_at="2026-11-22", torch_version="2.11")
GEMM_F32 = """\
    name: gemm
    inputs: [{name: a}, {name: b}]
    outputs: [{name: out}]
    reference: |
      def gemm(a, b):
          return a @ b
    dtypes: [float32, bfloat16]
    test_cases: [{a: [8, 8], b: [8, 8]}]
    perf_cases: [{a: [279, 279], b: [279, 279]}]
"""


def test_a_float32_gemm_is_judged_in_its_own_precision_not_against_bf16s_ridge():
    # 2*279^3 / (3*279^2*4) = 46.5 FLOP/byte: memory-bound against bf16's ridge (240), not against float32's
    spec = _spec(GEMM_F32)
    a = analyse_operator(spec, H100, tf32=False)
    f32, bf16 = (next(c for c in a.cases if c.dtype == d) for d in ("float32", "bfloat16"))
    assert round(f32.intensity, 1) == 46.5
    assert f32.bound == "compute" and round(f32.ridge) == 42  # tf32x3: a third of TF32's 378, above FP32's 51
    assert f32.ceiling.startswith("matmul 126 TFLOP/s (tf32x3") and abs(f32.best_us - f32.flops / 126e6) < 1e-6
    assert bf16.bound == "memory" and round(bf16.ridge) == 240 and bf16.ceiling == "copy 3000 GB/s"
    assert any("TF32 off" in n and "float32 42" in n and "bfloat16 240" in n for n in a.notes)
    on = next(c for c in with_ceilings(a, spec, H100, tf32=True).cases if c.dtype == "float32")
    assert round(on.ridge) == 126 and on.bound == "memory"  # TF32's ridge is three times higher
    assert needs_ceilings(a, H100, tf32=True) and not needs_ceilings(a, H100, tf32=False)


def test_the_reference_figures_are_per_precision_too():
    spec = _spec(GEMM_F32.replace("[279, 279]", "[8192, 8192]"))
    f32 = next(c for c in analyse_operator(spec, None, tf32=False).cases if c.dtype == "float32")
    assert "790" not in f32.ceiling and f32.ceiling.startswith("matmul 165 TFLOP/s")  # not the bf16 790 of the H200


def test_the_prompt_states_the_same_analysis(monkeypatch):
    import kernelgen.llm.devicefacts as devicefacts
    from kernelgen.devices import DeviceFacts, DeviceInfo
    from kernelgen.llm.prompts import generation_messages

    facts = DeviceFacts(kind="cuda", name="NVIDIA H100 80GB HBM3", interpreter=False, sm_count=132, torch_version="2.11",
                        triton_version="3.6")
    monkeypatch.setattr(devicefacts, "device_facts", lambda device: facts)
    monkeypatch.setattr(devicefacts, "known_peaks", lambda device: H100)
    monkeypatch.delenv("KERNELGEN_TF32", raising=False)
    user = generation_messages(_spec(GEMM_F32), DeviceInfo("cuda", "cuda", interpreter=False))[1]["content"]
    assert "cuBLAS matmul bfloat16 721, float16 700, float32 (TF32 off) 51, tf32 378 TFLOP/s" in user
    assert ("`a[279, 279] b[279, 279]` float32: at least 934 kB to move, 43.4 MFLOP (46.5 FLOP/byte); compute-bound "
            "against matmul 126 TFLOP/s (tf32x3") in user
    assert "bfloat16: at least 467 kB to move, 43.4 MFLOP (93 FLOP/byte); memory-bound against copy 3000 GB/s" in user
