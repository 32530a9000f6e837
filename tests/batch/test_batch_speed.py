"""What a batch does not repeat (issue 39, seconds per problem):

- which dtypes a batch checks (`--dtypes`): a KernelBench problem its deciding float32 only unless asked
  for all, a YAML spec every dtype it lists unless asked for its deciding ones; the spec the driver
  decided on is what `new` gets, so the operator folder's spec.yaml says the same;
- a measurement's basis (kernelgen.verify.judge.measurebasis): what makes a stored timing stale, in words;
- `optimize` after `new` does not time round 0 again when its measurement's basis is now's, and does
  (saying why) when it is not; the batch's final measurement is the best round's, without a `bench` step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.batch.plan import plan_specs
from kernelgen.cli import app
from kernelgen.devices import DeviceInfo
from kernelgen.spec.load import load_spec
from kernelgen.verify.judge.measurebasis import ALL_BASELINES, changes, tool_version
from kernelgen.precision import precision_policy
from kernelgen.verify.results import KernelTiming, PerfCase, PerformanceResult

RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 300

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''

SCALE = """name: scale
description: x times two, checked in three dtypes of which float32 decides
category: pointwise
inputs:
  - {name: x}
outputs:
  - {name: out}
reference: |
  def scale(x):
      return x * 2
dtypes: [float32, float16, bfloat16]
primary_dtypes: [float32]
tolerance: {float16: {atol: 1.0e-3, rtol: 1.0e-3}}
test_cases:
  - {x: [8, 64]}
"""


@pytest.fixture()
def specs(tmp_path: Path) -> tuple[Path, Path]:
    problem, yaml_spec = tmp_path / "19_ReLU.py", tmp_path / "scale.yaml"
    problem.write_text(RELU)
    yaml_spec.write_text(SCALE)
    return problem, yaml_spec


def test_dtypes_auto_checks_a_kernelbench_problem_in_float32_and_a_yaml_spec_as_written(specs):
    problem, yaml_spec = specs
    relu, scale = plan_specs([problem, yaml_spec])
    assert relu.spec.dtypes == ["float32"] and relu.text and "dtypes: [float32]" in relu.text
    assert scale.spec.dtypes == ["float32", "float16", "bfloat16"] and scale.text == ""  # new reads the file itself


def test_dtypes_all_and_deciding(specs):
    problem, yaml_spec = specs
    relu, scale = plan_specs([problem, yaml_spec], "all")
    assert relu.spec.dtypes == ["float32", "float16", "bfloat16"] and relu.spec.primary_dtypes == ["float32"]
    assert scale.text == ""
    relu, scale = plan_specs([problem, yaml_spec], "deciding")
    assert relu.spec.dtypes == ["float32"]
    assert scale.spec.dtypes == ["float32"] and scale.spec.tolerance == {}  # float16's tolerance went with it
    assert load_spec(_written(scale.text, yaml_spec.parent / "narrowed.yaml"), run_reference=False) == scale.spec


def _written(text: str, path: Path) -> Path:
    path.write_text(text)
    return path


def test_batch_refuses_an_unknown_dtypes_choice(specs):
    problem, _ = specs
    result = CliRunner().invoke(app, ["batch", str(problem), "--dtypes", "some", "--out", str(problem.parent / "out")])
    assert result.exit_code == 2, result.output
    assert "--dtypes some: choose auto, deciding, all" in " ".join(result.output.split())
    assert not (problem.parent / "out").exists()


# --- a measurement's basis -------------------------------------------------------------------------
CPU = DeviceInfo(kind="cpu", torch_device="cpu", interpreter=True)


def _measured(spec, **update) -> PerformanceResult:
    """A result as a CPU dry run of `spec` records it (numbers made up: the basis is what is compared)."""
    import torch
    import triton

    timing = KernelTiming(ms=1.0, ms_min=1.0, ms_max=1.0, spread=0.0, reps=3)
    case = PerfCase(case=0, shapes=spec.test_cases[0], dtype="float32", bytes=8, kernel=timing, eager=timing)
    fields = dict(op=spec.name, kernel=f"{spec.name}_triton.py", device="cpu", device_name="cpu", interpreter=True,
                  measured=False, torch_version=torch.__version__, triton_version=triton.__version__,
                  precision=precision_policy(), cases=[case], tool=tool_version(), baselines=["eager"])
    return PerformanceResult(**{**fields, **update})


def test_a_measurement_holds_until_what_it_was_taken_under_changes(specs):
    _, yaml_spec = specs
    spec = load_spec(yaml_spec, run_reference=False)
    where = dict(kind="cpu", interpreter=True, name="cpu")
    assert changes(_measured(spec), spec, **where) == []
    assert changes(_measured(spec, tool="kernelgen 0.0.1, files 000000000000"), spec, **where) == \
        [f"KernelGen changed (kernelgen 0.0.1, files 000000000000 -> {tool_version()})"]
    assert changes(_measured(spec, tool=""), spec, **where) == ["the measurement does not say which KernelGen took it"]
    assert changes(_measured(spec), spec, kind="cuda", interpreter=False, name="NVIDIA H100 80GB HBM3")[0] == \
        "the device changed (cpu -> cuda)"
    assert changes(_measured(spec), spec.model_copy(update={"test_cases": [{"x": [4, 64]}]}), **where) == \
        ["the perf cases changed"]
    assert changes(_measured(spec), spec, **where, baselines=ALL_BASELINES) == ["it did not time compile, peers"]


def test_a_measurement_under_another_precision_policy_is_stale(specs, monkeypatch):
    _, yaml_spec = specs
    spec = load_spec(yaml_spec, run_reference=False)
    taken = _measured(spec)
    monkeypatch.setenv("KERNELGEN_TF32", "1")
    assert [c.split(" (")[0] for c in changes(taken, spec, kind="cpu", interpreter=True, name="cpu")] == \
        ["the precision policy changed"]


def test_a_gpu_measurement_from_another_model_is_stale(specs):
    _, yaml_spec = specs
    spec = load_spec(yaml_spec, run_reference=False).model_copy(update={"perf_cases": [{"x": [8, 64]}], "perf_dtypes": ["float32"]})
    taken = _measured(spec, device="cuda", device_name="NVIDIA A100-SXM4-80GB", interpreter=False, measured=True)
    assert changes(taken, spec, kind="cuda", interpreter=False, name="NVIDIA H100 80GB HBM3") == \
        ["the device changed (NVIDIA A100-SXM4-80GB -> NVIDIA H100 80GB HBM3)"]
    assert changes(taken, spec, kind="cuda", interpreter=False, name=None) == []  # a basis that knows no model


# --- optimize after new: round 0 is not timed twice -------------------------------------------------
def _state(op: Path) -> dict:
    return json.loads((op / "state.json").read_text())


@pytest.mark.slow
def test_optimize_keeps_round_0s_measurement_while_its_basis_holds(tmp_path):
    spec = _written(SCALE.replace("[float32, float16, bfloat16]", "[float32]").replace("primary_dtypes: [float32]\n", "")
                    .replace("tolerance: {float16: {atol: 1.0e-3, rtol: 1.0e-3}}\n", ""), tmp_path / "scale.yaml")
    run = CliRunner()
    made = run.invoke(app, ["new", str(spec), "--out", str(tmp_path), "--backend", "offline", "--device", "cpu"])
    assert made.exit_code == 0, made.output
    op = tmp_path / "scale"
    measured = _state(op)["rounds"][0]["performance"]["performance"]
    assert measured["tool"] == tool_version() and measured["baselines"] == ["eager"]

    first = run.invoke(app, ["optimize", str(op), "--rounds", "1", "--backend", "offline", "--device", "cpu"])
    assert first.exit_code == 0, first.output
    text = " ".join(first.output.split())
    assert "round 0's measurement is used as it is" in text and "measuring round 0's kernel" not in text
    assert _state(op)["rounds"][0]["performance"]["performance"] == measured  # not replaced by a second timing

    state = _state(op)  # the same folder after a KernelGen upgrade: its round 0 timing no longer stands
    state["rounds"][0]["performance"]["performance"]["tool"] = "kernelgen 0.0.1, files 000000000000"
    (op / "state.json").write_text(json.dumps(state))
    again = run.invoke(app, ["optimize", str(op), "--rounds", "2", "--backend", "offline", "--device", "cpu"])
    assert again.exit_code == 0, again.output
    assert "measuring round 0's kernel on cpu before diagnosing it: KernelGen changed (kernelgen 0.0.1, files 000000000000 ->" \
        in " ".join(again.output.split())
    assert _state(op)["rounds"][0]["performance"]["performance"]["tool"] == tool_version()


# --- memory of a big-tensor bench -------------------------------------------------------------------
def test_a_big_case_counts_its_peers_after_the_kernel_not_beside_it():
    """Level 1's ReLU (one 6.4 GB float32 input, one output): the peer libraries' process is started
    after the kernel's timings (kernelgen.verify.judge.devicememory), so the estimate is the larger of
    the kernel's timing (judge + worker) and the peers', not their sum; a small case still sums them."""
    from kernelgen.batch.footprint import timing_need
    from kernelgen.spec import load_reference, validate_spec_data
    from kernelgen.verify.judge.devicememory import peers_after_kernel

    def spec(shape: list[int]):  # noqa: ANN202
        return validate_spec_data({"name": "op", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}],
                                   "dtypes": ["float32"], "test_cases": [{"x": [4, 4]}], "perf_cases": [{"x": shape}],
                                   "reference": "def op(x):\n    return torch.relu(x)\n"})

    big, small = spec([4096, 393216]), spec([512, 512])
    assert peers_after_kernel(big, [(0, big.perf_cases[0], "float32")])
    assert not peers_after_kernel(small, [(0, small.perf_cases[0], "float32")])
    gib = 4096 * 393216 * 4 / (1 << 30)  # I = O = 6 GiB; P = 2 I; the float64 truth P64 = 4 I
    need = timing_need(load_reference(big), big, big.perf_cases[0], "float32") / (1 << 30)
    judge, worker = 2 * gib + 4 * gib, 4 * gib  # I + O + P64, I + 3 O
    assert need == pytest.approx(judge + worker, rel=1e-6)  # the peers' 3 I come after: not added


# --- a kernel of KernelGen's own is compiled once per judge, not by recording and replay both -----------
# Left in the worker's Triton cache when the module is imported: what Triton would have compiled there.
LEAVES_A_COMPILE = '''
import os as _os
_entry = _os.path.join(_os.environ["TRITON_CACHE_DIR"], "{key}")
_os.makedirs(_entry, exist_ok=True)
open(_os.path.join(_entry, "_kernel.json"), "w").write("compiled")
'''


@pytest.mark.slow
def test_the_replay_worker_starts_from_what_a_trusted_recording_compiled_and_never_from_a_candidates(tmp_path, monkeypatch):
    import kernelgen.verify.judge.judge as judge_module
    from kernelgen.opdir import open_operator
    from kernelgen.verify.judge.accuracy import check_accuracy
    from kernelgen.verify.judge.judge import KernelSource
    from kernelgen.verify.judge.runner import open_judge

    spec = _written(SCALE.replace("[float32, float16, bfloat16]", "[float32]").replace("primary_dtypes: [float32]\n", "")
                    .replace("tolerance: {float16: {atol: 1.0e-3, rtol: 1.0e-3}}\n", ""), tmp_path / "scale.yaml")
    made = CliRunner().invoke(app, ["new", str(spec), "--out", str(tmp_path), "--backend", "offline", "--device", "cpu",
                                    "--no-bench"])
    assert made.exit_code == 0, made.output
    op = open_operator(tmp_path / "scale")
    own = op.file("triton").read_text(encoding="utf-8")
    monkeypatch.setattr(judge_module, "check_source", lambda *a, **k: [])  # the module's `import os` is this test's
    with open_judge(op, CPU) as judge:
        ours = KernelSource(own + LEAVES_A_COMPILE.format(key="a" * 64), op.file("triton").name, "offline")
        theirs = KernelSource(own + LEAVES_A_COMPILE.format(key="b" * 64), op.file("triton").name, "llm")
        for kernel in (ours, theirs):
            verdict = check_accuracy(judge, kernel, seeds=(0,))
            assert verdict.correct, (verdict.error, verdict.violations)
        replay = judge.replayer.worker().scratch / "triton"
        assert (replay / ("a" * 64) / "_kernel.json").is_file()  # KernelGen's own: compiled once, by the recording
        assert not (replay / ("b" * 64)).exists()  # a candidate's recording worker's cache never reaches the replay


# --- the batch's final measurement -------------------------------------------------------------------
@pytest.mark.slow
def test_the_batch_benches_only_where_the_best_rounds_measurement_is_not_the_final_one(tmp_path):
    from kernelgen.batch.basis import JobBasis, tool_identity
    from kernelgen.batch.job import JobRequest, run_job
    from kernelgen.verify.results import RunRecord

    spec = _written(SCALE.replace("[float32, float16, bfloat16]", "[float32]").replace("primary_dtypes: [float32]\n", "")
                    .replace("tolerance: {float16: {atol: 1.0e-3, rtol: 1.0e-3}}\n", ""), tmp_path / "scale.yaml")
    basis = JobBasis(tool=tool_identity(), device="cpu", backend="offline")
    steps = {}
    for out, measure in ((tmp_path / "timed", []), (tmp_path / "untimed", ["--no-bench"])):
        made = CliRunner().invoke(app, ["new", str(spec), "--out", str(out), "--backend", "offline", "--device", "cpu", *measure])
        assert made.exit_code == 0, made.output
        req = JobRequest(name="scale", spec_file=str(spec), spec_label="scale.yaml", out_root=str(out),
                         log_file=str(out / "scale.log"), rounds=0, backend="offline", device="cpu", basis=basis)
        result = run_job(req)
        assert result.status == "finished", result.reason
        steps[out.name] = [s.step for s in result.steps]
        final = RunRecord.model_validate_json((out / "scale" / "final_perf.json").read_text())
        assert final.performance is not None and final.performance.tool == tool_version()
    # round 0 measured by `new` in full (on the interpreter: the kernel and eager) is the final measurement
    assert steps["timed"] == [] and "final measurement: the best round's" in (tmp_path / "timed" / "scale.log").read_text()
    assert steps["untimed"] == ["bench"]  # `new --no-bench` left nothing to reuse: timed now
