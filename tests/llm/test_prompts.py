"""Prompts render (StrictUndefined) and carry what the model needs: the rules, the contract, the spec
with its dtypes, shape relations and output rules, the device's facts (or the plain no-GPU sentence),
the measurements, the diagnosis, the full history, every case of a failed check, and advice for the
operator's kind. No GPU here: device facts are injected by the `gpu_facts` fixture."""

from __future__ import annotations

import pytest
import yaml

from kernelgen.devices import DeviceInfo
from kernelgen.llm.history import history
from kernelgen.llm.kinds import KINDS, operator_kind
from kernelgen.llm.prompts import generation_messages, optimization_messages, repair_messages
from kernelgen.record.state import Diagnosis, KeepDecision, OpState, RoundRecord
from kernelgen.render import render
from kernelgen.spec import load_spec, validate_spec_data
from kernelgen.verify.results import (AccuracyResult, CaseCheck, KernelTiming, PerfCase, PerformanceResult, RunRecord,
                                      Violation)
from tests.support.devices import H100, H100_PEAKS, NO_GPU
from tests.support.paths import SPECS

CPU = DeviceInfo("cpu", "cpu", interpreter=True)
GPU = DeviceInfo("cuda", "cuda", interpreter=False)


@pytest.fixture
def gpu_facts(monkeypatch):  # noqa: ANN001, ANN201
    """The prompts see an H100: its driver facts and its measured ceilings, whatever device runs."""
    import kernelgen.llm.devicefacts as devicefacts

    monkeypatch.setattr(devicefacts, "device_facts", lambda device: H100)
    monkeypatch.setattr(devicefacts, "known_peaks", lambda device: H100_PEAKS)
    return H100


@pytest.fixture(scope="module")
def spec():  # noqa: ANN201
    return load_spec(SPECS / "broadcast.yaml", run_reference=False)


def _spec(**fields):  # noqa: ANN003, ANN202
    data = {"name": "op", "description": "an operator", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}],
            "dtypes": ["float32", "float16"], "test_cases": [{"x": [4, 33]}, {"x": [2, 3, 17]}]}
    data.update(fields)
    return validate_spec_data(data)


def test_system_prompt_states_the_rules_and_the_contract(spec):
    system = generation_messages(spec, CPU)[0]["content"]
    for needle in ("broadcast_triton.py", "broadcast(x, bias)", "triton.language", "no arithmetic in PyTorch",
                   "@triton.jit", "try/except", "baseline", "poisoned", "must not be modified", "fresh random inputs",
                   "measured ceiling", "`kernelgen.runtime.v1`", "`lean_launch(lean, key, aligned, n_tensors, *args)`"):
        assert needle in system, needle


def test_generation_prompt_on_the_cpu_says_plainly_there_is_no_gpu(spec):
    user = generation_messages(spec, CPU)[1]["content"]
    for needle in (spec.description, "return x + bias", "x[3, 7, 33]", "float16 atol 0.001", "def scale_rows",
                   NO_GPU, "PyTorch 2.", "Triton 3.", "design note"):
        assert needle in user, needle
    assert "SMs" not in user and "Measured ceilings" not in user  # nothing pretends to be measured:
    assert "Ceilings: NVIDIA H200 (reference figures), not this machine." in user  # the analysis says whose they are


def test_device_facts_and_measured_ceilings_with_a_gpu(spec, gpu_facts):
    user = generation_messages(spec, GPU)[1]["content"]
    for needle in ("NVIDIA H100 80GB HBM3", "compute capability 9.0", "132 SMs", "warp size 32", "L2 cache 50.0 MiB",
                   "shared memory 228 KiB per SM (227 KiB at most per program)", "65536 32-bit registers per SM",
                   "copy bandwidth 3012 GB/s", "read bandwidth 3350 GB/s", "bf16 matmul 721 TFLOP/s", "2026-11-20",
                   "PyTorch 2.13.0, Triton 3.9.0"):
        assert needle in user, needle
    assert "No GPU" not in user


def test_gpu_without_measured_ceilings_says_so(spec, monkeypatch):
    import kernelgen.llm.devicefacts as devicefacts

    monkeypatch.setattr(devicefacts, "device_facts", lambda device: H100)
    monkeypatch.setattr(devicefacts, "known_peaks", lambda device: None)
    user = generation_messages(spec, GPU)[1]["content"]
    assert "132 SMs" in user and "Measured ceilings: none yet on this device" in user


def test_spec_section_states_dtypes_shape_relations_and_output_rules():
    rotary = _spec(name="rope", description="LLaMA-style rotary embedding", category="other",
                   inputs=[{"name": "x"}, {"name": "cos", "dtype": "float32", "init": "uniform(-1, 1)"},
                           {"name": "sin", "dtype": "float32", "init": "uniform(-1, 1)"}],
                   reference="def rope(x, cos, sin):\n    x1, x2 = x.chunk(2, dim=-1)\n"
                             "    return (x * cos[None, :, None, :] + torch.cat((-x2, x1), -1) * sin[None, :, None, :]).to(x.dtype)\n",
                   test_cases=[{"x": [2, 8, 4, 16], "cos": [8, 16], "sin": [8, 16]},
                               {"x": [1, 5, 3, 32], "cos": [5, 32], "sin": [5, 32]}])
    user = generation_messages(rotary, CPU)[1]["content"]
    assert "`x`: dtype the case dtype; rank 4" in user
    assert "`cos`: dtype float32 (fixed, whatever the case dtype); rank 2; values drawn as `uniform(-1, 1)`" in user
    assert "`cos[0]` == `x[1]`" in user and "`cos[1]` == `x[3]`" in user and "`sin` has the shape of `cos`" in user
    assert "`out`: dtype the case dtype; shape the shape of `x`" in user
    assert "a **rotary** operator" in user and "the advice below is for it" in user and "Liger-Kernel's rope.py" in user
    mean = load_spec(SPECS / "row_mean.yaml", run_reference=False)
    text = generation_messages(mean, CPU)[1]["content"]
    assert "dtype float32 for every case dtype" in text and "`x`'s shape with its last dimension 1" in text
    mm = load_spec(SPECS / "matmul_leakyrelu.yaml", run_reference=False)
    assert "shape [`a[0]`, `b[1]`]" in generation_messages(mm, CPU)[1]["content"]


@pytest.mark.parametrize("fields, kind", [
    ({"category": "other", "reference": "def op(x):\n    return torch.cumsum(x, dim=-1)\n"}, "scan"),
    ({"category": "reduction", "reference": "def op(x):\n    return x.cumsum(-1)\n"}, "scan"),
    ({"category": "other", "reference": "def op(x):\n    return F.scaled_dot_product_attention(x, x, x)\n"}, "attention"),
    ({"category": "other", "reference": "def op(x):\n    return torch.softmax(x @ x.transpose(-1, -2), -1) @ x\n"}, "attention"),
    ({"category": "other", "reference": "def op(x):\n    return torch.gather(x, -1, x.argsort(-1))\n"}, "indexing"),
    ({"category": "other", "reference": "def op(x):\n    return F.layer_norm(x, x.shape[-1:])\n"}, "normalization"),
    ({"category": "other", "reference": "def op(x):\n    return x.amax(-1)\n"}, "reduction"),
    ({"category": "other", "reference": "def op(x):\n    return torch.sigmoid(x) * x\n"}, "pointwise"),
    ({"category": "broadcast", "reference": "def op(x):\n    return x + 1\n"}, "pointwise"),
    ({"category": "matmul", "reference": "def op(x):\n    return x @ x.transpose(-1, -2)\n"}, "matmul"),
    # a chain of GEMMs is a model, whatever the category says (KernelBench level 3's MLP was "a matmul operator")
    ({"category": "matmul", "reference": "def op(x):\n    return torch.relu(torch.relu(x @ x.mT) @ x) @ x.mT\n"}, "model"),
    ({"category": "other", "reference": "def op(x):\n    return (x @ x.mT).relu() @ x\n"}, "model"),
    ({"category": "other", "reference": "def op(x):\n    q = x.mT @ x\n    return F.scaled_dot_product_attention(q, q, q)\n"}, "model"),
])
def test_operator_kind_from_the_reference_before_the_category(fields, kind):
    assert operator_kind(_spec(**fields)) == kind


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_advice_grounded_in_a_named_source(kind):
    text = render(f"prompts/advice/{kind}.md.j2", layers="3 GEMMs (addmm) in a chain", parts=[])  # a model's own lines
    assert 3 <= text.count("\n- ") + 1 <= 7, "a few lines each"
    assert "tutorial" in text or "Liger" in text or "FlagGems" in text or "PyTorch's own" in text or kind == "indexing"


def test_a_scan_gets_scan_advice_not_matmul_advice():
    scan = _spec(category="other", reference="def op(x):\n    return torch.cumsum(x, dim=-1)\n")
    user = generation_messages(scan, CPU)[1]["content"]
    assert "tl.cumsum" in user and "scan-then-fan" in user
    assert "GROUP_SIZE_M" not in user and "tl.dot" not in user


def _check(case: int, dtype: str, passed: bool, seed: int = 1, **kw) -> CaseCheck:  # noqa: ANN003
    return CaseCheck(case=case, shapes={"x": [case + 1, 64], "bias": [64]}, dtype=dtype, seed=seed, call="guarded",
                     passed=passed, output="out", total=64 * (case + 1), **kw)


def test_repair_prompt_lists_passing_and_failing_cases_with_more_lines_and_unwritten_ranges(spec, monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789abcdef")
    checks = [_check(c, d, True, seed=s) for c in range(10) for d in ("float32", "float16") for s in (1, 2)]
    checks += [_check(c, d, False, unwritten=64, mismatches=64, message=f"case {c} {d} seed 1 (guarded), output 'out': "
                      f"64 of {64 * (c + 1)} elements differ (64 never written)",
                      unwritten_first=[c, 0], unwritten_last=[c, 63], unwritten_pattern="rows")
               for c in range(10, 25) for d in ("float32",)]
    acc = AccuracyResult(op="broadcast", kernel="k.py", device="cpu", interpreter=True, compiled=True, correct=False,
                         seeds=[1, 2], checks=checks, error="the kernel raised ValueError: key sk-live-ABCDEFGHIJKLMNOP0123 "
                         "and tok-0123456789abcdef", violations=[Violation(code="unwritten-output", message=
                         "output 'out': 64 of 704 elements were never written (they still hold the poison) [case 10 float32]")])
    run = RunRecord(kind="accuracy", status="failed", exit_code=1, duration_s=1.0, accuracy=acc)
    user = repair_messages(spec, "def broadcast(x, bias):\n    pass\n", run, verdict="wrong answer", attempt=2,
                           intent="wider tiles")[1]["content"]
    assert "15 of 55 checks failed" in user and "wrong answer" in user and "attempt 2" in user and "wider tiles" in user
    assert "- case 0 x[1, 64] bias[64] float16, output `out`: 2 of 2 checks pass (2 seed(s), calls: guarded)" in user
    assert "- 8 more passing: case 6 float32 `out`, case 6 float16 `out`, case 7 float32" in user  # 20 groups: 12 shown
    assert "3 more failing: case 22 float32 `out`, case 23 float32 `out`, case 24 float32 `out`" in user
    assert ("64 of 704 elements never written: first unwritten index [10, 0], last [10, 63] (pattern: rows)" in user)
    assert ("unwritten-output: output 'out': 64 of 704 elements were never written (they still hold the poison) "
            "[case 10 float32]") in user  # the exact violation text
    assert "sk-live-" not in user and "tok-0123456789abcdef" not in user and "[REDACTED]" in user
    assert "CAUSE:" in user


def test_repair_prompt_says_where_errors_lie_and_names_an_out_of_bounds_read(spec):
    """Edges: every failing case's worst element within the first indices of the last dim (a padding
    or a mask), whatever the case's size; a read of memory the kernel never wrote, though it wrote every
    element, is an out-of-bounds read, not "unwritten-output"."""
    failing = [_check(c, "float32", False, seed=s, mismatches=3, worst_index=[c, s], message=f"3 of {64 * (c + 1)} elements differ")
               for c in (1, 2, 3) for s in (0, 1)]
    passing = [_check(0, "float32", True)]
    oob = Violation(code="unwritten-output", message="case 0 float32 seed 1 (two fills): 5 element(s) change with the poison "
                                                      "fill: the kernel reads or returns memory it never wrote")
    acc = AccuracyResult(op="broadcast", kernel="k.py", device="cpu", interpreter=True, compiled=True, correct=False,
                         seeds=[0, 1], checks=passing + failing, violations=[oob])
    run = RunRecord(kind="accuracy", status="failed", exit_code=1, duration_s=1.0, accuracy=acc)
    user = repair_messages(spec, "def broadcast(x, bias):\n    pass\n", run, verdict="wrong answer")[1]["content"]
    assert ("Where the errors lie, over every failing case: the worst element of every failing check (6 distinct) lies "
            "at the start of dim 1 (its first 3 indices)") in user
    assert "where: 2.34% of the elements differ; the worst element of the failing checks (1 distinct)" not in user
    assert "- case 1 x[2, 64] bias[64] float32, output `out`: 2 of 2 checks fail" in user and "where: 2.34% of the elements differ" in user
    assert "out-of-bounds read: case 0 float32 seed 1 (two fills): 5 element(s) change with the poison fill" in user
    assert "a load past the end of an input or a buffer" in user and "(the judge's code: unwritten-output)" in user
    assert not any(line.startswith("- unwritten-output") for line in user.splitlines())


def test_where_errors_finds_a_stride_one_index_or_nothing():
    from kernelgen.llm.failures import where_errors

    shape = [64, 64]
    assert "at indices 1 mod 4 of dim 1 (a stride of 4)" in where_errors([([r, c], shape) for r, c in ((3, 5), (9, 13), (20, 41))])
    assert "at index 7 of dim 0 every time" in where_errors([([7, c], shape) for c in (10, 20, 31)])
    assert "at the edges of dim 0" in where_errors([([r, 30], [64, 64]) for r in (0, 63)] + [([1, 40], [64, 64])])
    assert where_errors([([r, c], shape) for r, c in ((10, 10), (20, 33), (31, 50))]).endswith("share no edge, index or stride")


def _perf(cases: list[PerfCase], measured: bool = True) -> RunRecord:
    return RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=PerformanceResult(
        op="broadcast", kernel="k.py", device="cuda" if measured else "cpu", device_name="NVIDIA H100 80GB HBM3" if measured else "cpu",
        interpreter=not measured, measured=measured, torch_version="2.13.0", triton_version="3.9.0", cases=cases))


def _case(i: int, dtype: str, ms: float, **kw) -> PerfCase:  # noqa: ANN003
    shapes = [{"x": [8, 1024, 1024, 32], "bias": [32]}, {"x": [16384, 4096], "bias": [4096]},
              {"x": [65536, 1000], "bias": [1000]}][i]
    return PerfCase(case=i, shapes=shapes, dtype=dtype, bytes=1 << 28, kernel=KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=0.01),
                    gbps=1500.0, frac_peak=0.5, bound="memory", speedup_eager=1.1, **kw)


LONG_REASON = ("The grid launches 8 programs per row block, far fewer than the 132 SMs can hold; "
               + "each program streams its tile with 4 warps, so latency is not hidden. " * 12
               + "Expected: x1.3 on the 16384x4096 case, where rows are long. END-OF-REASON")


def _state() -> OpState:
    diff = "--- a\n+++ b\n" + "".join(f"-old line {i}\n+new line {i}\n" for i in range(50))
    state = OpState(name="broadcast", created_at="t", backend="openai", device="cuda", best_round=1)
    state.rounds = [
        RoundRecord(round=0, started_at="t", finished_at="t", backend="openai", kernel_file="rounds/round_0/k.py",
                    kept=True, outcome="correct: the starting point", model_notes=["attempt 1, design note: one program per 16x64 tile"]),
        RoundRecord(round=1, started_at="t", finished_at="t", backend="openai", kernel_file="rounds/round_1/k.py", kept=True,
                    change="64x128 tiles", change_type="parameters", claimed_type="parameters", reason="fewer programs",
                    base_round=0, outcome="kept: x1.2 over round 0", performance=_perf([_case(1, "float32", 0.2, speedup_vs_compare=1.2)])),
        RoundRecord(round=2, started_at="t", finished_at="t", backend="openai", kernel_file="rounds/round_2/k.py",
                    change="persistent grid (1024 programs looping over row blocks)", change_type="logic", claimed_type="parameters",
                    reason=LONG_REASON, diff=diff, base_round=1, outcome="reverted to round 1: x0.97, not beyond the noise",
                    decision=KeepDecision(keep=False, speedup=0.97, threshold=1.02, reason="x0.97"),
                    model_notes=["attempt 2, the cause it stated for attempt 1's failure: the loop bound used n_rows // BLOCK_M"],
                    accuracy=RunRecord(kind="accuracy", status="ok", exit_code=0, duration_s=1.0)),
        RoundRecord(round=3, started_at="t", backend="openai", kernel_file="rounds/round_3/k.py"),  # in progress: not history
    ]
    return state


def test_optimization_prompt_has_facts_measurements_diagnosis_and_the_full_history(spec, gpu_facts):
    perf = _perf([_case(0, "float32", 0.7, host_us=12.5), _case(1, "float32", 0.2), _case(1, "bfloat16", 0.1)])
    diag = Diagnosis(round=1, measured=True, min_frac_peak=0.5, bound="memory",
                     lines=["Gap: the worst case reaches 50% of the memory-bound ceiling, so at most x2.00 is left there."])
    user = optimization_messages(spec, "def broadcast(x, bias):\n    pass\n", device=GPU, performance=perf.performance,
                                 diagnosis=diag, history=history(_state()), best_round=1, round_k=4)[1]["content"]
    for needle in ("optimization round 4", "132 SMs", "copy bandwidth 3012 GB/s", "L2 cache 50.0 MiB",
                   "`case 1 x[16384, 4096] bias[4096] bfloat16`", "50% of the memory-bound ceiling", "host 12.5 µs per call",
                   "Not measured: `x[8, 1024, 1024, 32] bias[32] bfloat16`, `x[65536, 1000] bias[1000] float32`",
                   "Bound: memory; the worst case reaches 50% of its ceiling", "at most x2.00 is left there",
                   "### Round 0: the initial kernel", "design note: one program per 16x64 tile",
                   "### Round 1: kept (started from round 0)", "TYPE: detected **parameters** (as claimed)",
                   "x1.200 vs round 0's kernel in the same process",
                   "### Round 2: reverted (started from round 1)",
                   "CHANGE: persistent grid (1024 programs looping over row blocks)",
                   "TYPE: detected **logic**, claimed parameters — detected as logic because the diff changes code beyond",
                   "While repairing: attempt 2, the cause it stated for attempt 1's failure: the loop bound used n_rows // BLOCK_M",
                   "(first lines; 42 more lines not shown)", "+new line 28", "Do not repeat a change",
                   "parameters: tuning constants and launch options only", "this never changes during optimization",
                   "keep `broadcast(x, bias)`", "CHANGE:", "TYPE:", "REASON:"):
        assert needle in user, needle
    assert LONG_REASON in user  # the full REASON, not a 200-character stub
    assert "+new line 29" not in user and "Round 3" not in user
    assert "Already proposed" not in user


def test_no_secret_reaches_a_prompt_through_the_diagnosis(spec, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "deploy-token-value-123")
    diag = Diagnosis(round=0, measured=False, lines=["Round 0 has no timings to analyse (RuntimeError: deploy-token-value-123 "
                                                     "sk-abcdefghijklmnopqrstuvwx)."])
    user = optimization_messages(spec, "x", device=CPU, diagnosis=diag)[1]["content"]
    assert "deploy-token-value-123" not in user and "sk-abcdef" not in user and "no timings to analyse (RuntimeError: [REDACTED]" in user


def test_optimization_prompt_on_the_interpreter_and_for_a_later_candidate(spec):
    perf = _perf([_case(0, "float32", 5.0)], measured=False)
    user = optimization_messages(spec, "x", device=CPU, performance=perf.performance, candidate=3, candidates=3,
                                 earlier=["64x128 tiles", "evict_first on x"])[1]["content"]
    assert NO_GPU in user and "Interpreter dry run on cpu: these numbers are not measurements" in user
    assert "Not measured (never run on the interpreter)" in user
    assert "this is proposal 3 of 3" in user and "- Proposal 1: 64x128 tiles" in user and "- Proposal 2: evict_first on x" in user
    assert "No optimization round yet" in optimization_messages(spec, "x")[1]["content"]


def test_log_shows_claimed_against_detected_type_and_the_models_words(spec):
    from kernelgen.record.oplog import render_log

    log = render_log(_state(), spec)
    assert ("persistent grid (1024 programs looping over row blocks) — type: **logic** (claimed **parameters**; "
            "detected as logic from the diff because the diff changes code beyond tuning constants") in log
    assert "64x128 tiles — type: **parameters** (claimed parameters, detected the same)" in log
    assert "The model's words: attempt 1, design note: one program per 16x64 tile" in log
    assert "The model's words: attempt 2, the cause it stated for attempt 1's failure" in log


def test_prompts_keep_no_text_in_python():
    import inspect

    import kernelgen.llm.prompts as prompts

    src = inspect.getsource(prompts)
    assert "Write the Triton kernel" not in src and "CHANGE:" not in src.split('"""', 2)[2]


def test_device_facts_from_driver_properties():
    from types import SimpleNamespace

    from kernelgen.devices import _cuda_facts, device_facts

    props = SimpleNamespace(multi_processor_count=132, L2_cache_size=52428800, shared_memory_per_multiprocessor=233472,
                            shared_memory_per_block=49152, shared_memory_per_block_optin=232448,
                            regs_per_multiprocessor=65536, warp_size=32, major=9, minor=0, gcnArchName="NVIDIA")
    assert _cuda_facts(props) == {"sm_count": 132, "l2_bytes": 52428800, "smem_per_sm_bytes": 233472,
                                  "smem_per_block_bytes": 232448, "regs_per_sm": 65536, "warp_size": 32,
                                  "compute_capability": "9.0"}
    assert _cuda_facts(SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-", warp_size=64))["compute_capability"] == "gfx942"
    cpu = device_facts(CPU)
    assert cpu.interpreter and cpu.sm_count is None and cpu.torch_version and cpu.triton_version


def test_scrub_candidate_text(monkeypatch):
    from kernelgen.llm.untrusted import scrub_candidate_text

    monkeypatch.setenv("MY_API_KEY", "plain-secret-value-42")
    text = scrub_candidate_text("saw plain-secret-value-42 and sk-proj-ABCDEFGHIJKLMNOPQRST and Bearer abcdefghijklmnopqrstu")
    assert "plain-secret" not in text and "sk-proj" not in text and "abcdefghijklmnopqrstu" not in text
    assert scrub_candidate_text("BLOCK_SIZE = 1024; token = tl.load(p)") == "BLOCK_SIZE = 1024; token = tl.load(p)"
    assert scrub_candidate_text(None) == ""


def test_prompts_render_for_every_example_spec():
    for path in sorted(SPECS.glob("*.yaml")):
        s = load_spec(path, run_reference=False)
        assert s.name in generation_messages(s, CPU)[1]["content"]
        assert yaml.safe_load(path.read_text())["name"] in optimization_messages(s, "x", device=CPU)[1]["content"]
