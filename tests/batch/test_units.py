"""`kernelgen batch` without running operators: targets and --gpus, the resume rule, shipping folders
to Ray tasks and back, the report's numbers, and the refusals (exit 2, nothing written)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.batch import artifacts
from kernelgen.batch.checkpoint import FolderShipper
from kernelgen.batch.plan import plan_specs
from kernelgen.batch.report import build_report, render_markdown
from kernelgen.batch.basis import JobBasis, save_basis, spec_data
from kernelgen.batch.resume import FINAL_FILE, JOB_FILE, JobResult, phase_of, save_job
from kernelgen.batch.targets import Target, parse_gpus
from kernelgen.cli import app
from kernelgen.errors import UsageError
from kernelgen.fsutil import now
from kernelgen.record.state import OpState, RoundRecord, load_state, save_state
from kernelgen.verify.judge.devicelock import ENV as LOCK_ENV
from tests.support.batch_results import write_measured

SPECS = Path(__file__).resolve().parent / "data"
BAD_SPEC = "name: Bad-Name\ndescription: x\ninputs: []\noutputs:\n  - {name: out}\n"


def flat(text: str) -> str:
    return " ".join(text.split())


# --- targets --------------------------------------------------------------------------------------
def test_gpus_all_count_and_ids_on_a_gpu_host():
    ids = ["0", "1", "2", "3"]
    assert [t.label for t in parse_gpus("all", "cuda", ids)] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert [t.device_id for t in parse_gpus("2", "cuda", ids)] == ["0", "1"]
    assert [t.device_id for t in parse_gpus("3,1", "cuda", ids)] == ["3", "1"]
    assert [t.device_id for t in parse_gpus("2,", "cuda", ids)] == ["2"]
    for bad in ("5", "0", "7,1", "1,1", "two"):
        with pytest.raises(UsageError):
            parse_gpus(bad, "cuda", ids)


def test_gpus_without_a_gpu_means_interpreter_workers():
    assert [t.label for t in parse_gpus("all", "cpu", [])] == ["cpu#0"]
    assert [t.label for t in parse_gpus("3", "cpu", [])] == ["cpu#0", "cpu#1", "cpu#2"]
    with pytest.raises(UsageError, match="no GPU is visible"):
        parse_gpus("0,1", "cpu", [])


def test_each_worker_is_pinned_to_its_device(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELGEN_DEVICE_LOCK", raising=False)
    env = Target("cuda", "3", 0).env(tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["KERNELGEN_DEVICE_LOCK"].endswith("cuda3.lock")
    assert Target("npu", "1", 0).env(tmp_path)["ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert Target("cpu", None, 1).env(tmp_path) == {"KERNELGEN_DEVICE": "cpu"}


def test_gpus_beyond_the_visible_ones_is_refused(tmp_path, monkeypatch):
    import kernelgen.batch.targets as targets

    monkeypatch.setattr(targets, "visible_devices", lambda device="auto": ("cuda", ["0", "1"]))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["batch", str(SPECS), "--out", str(out), "--gpus", "5"])
    assert r.exit_code == 2, r.output
    assert "--gpus 5: only 2 cuda device(s) are visible (0, 1)" in flat(r.output) and "Traceback" not in r.output
    assert not out.exists()


# --- refusals -------------------------------------------------------------------------------------
def test_ray_engine_without_ray_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["batch", str(SPECS), "--out", str(out), "--engine", "ray"])
    assert r.exit_code == 2, r.output
    text = flat(r.output)
    assert "--engine ray needs Ray, which is not installed" in text and "pip install 'kernelgen[ray]'" in text
    assert "Traceback" not in r.output and not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--engine", "spark"], "--engine spark: choose local or ray"),
    (["--rounds", "-1"], "--rounds must be >= 0"),
    (["--ray-address", "auto"], "--ray-address is for --engine ray"),
])
def test_bad_options_are_refused_before_writing(tmp_path, args, message):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["batch", str(SPECS), "--out", str(out), *args])
    assert r.exit_code == 2 and message in flat(r.output), r.output
    assert not out.exists()


def test_missing_spec_path_is_refused(tmp_path):
    r = CliRunner().invoke(app, ["batch", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "no such file or folder" in r.output


def test_plan_keeps_bad_and_duplicate_specs_with_their_reason(tmp_path):
    for f in SPECS.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / "bad.yaml").write_text(BAD_SPEC)
    (tmp_path / "zz_again.yaml").write_text((SPECS / "gelu.yaml").read_text())
    planned = {p.spec_path.name: p for p in plan_specs([tmp_path])}
    assert [n for n, p in planned.items() if p.valid] == ["broadcast.yaml", "gelu.yaml", "row_sum.yaml"]
    assert "name" in planned["bad.yaml"].problem and "\n" not in planned["bad.yaml"].problem
    assert "duplicate operator name 'gelu'" in planned["zz_again.yaml"].problem


# --- resume ---------------------------------------------------------------------------------------
def _op_folder(root: Path, spec_text: str, *, round0_done: bool, job: JobResult | None = None) -> Path:
    op = root / "gelu"
    op.mkdir(parents=True)
    (op / "spec.yaml").write_text(spec_text)
    state = OpState(name="gelu", created_at=now(), backend="offline", device="cpu", best_round=0 if round0_done else None)
    state.rounds.append(RoundRecord(round=0, started_at=now(), finished_at=now() if round0_done else None, backend="offline",
                                    kernel_file="rounds/round_0/gelu_triton.py"))
    save_state(op, state)
    if job:
        save_job(op, job)
    return op


def _data(text: str) -> dict:
    from kernelgen.spec import validate_spec_data
    import yaml

    return spec_data(validate_spec_data(yaml.safe_load(text)))


BASIS = JobBasis(tool="kernelgen 0.1.0, files 1a2b3c4d5e6f", device="cuda: NVIDIA H100 80GB HBM3", backend="offline")


def test_phase_of_an_operator_folder(tmp_path):
    text = (SPECS / "gelu.yaml").read_text()
    spec = _data(text)
    assert phase_of(tmp_path / "gelu", spec, BASIS, 1)[0] == "new"
    op = _op_folder(tmp_path / "a", text, round0_done=False)
    assert phase_of(op, spec, BASIS, 1) == ("redo", "round 0 never finished; the old folder is moved aside")
    op = _op_folder(tmp_path / "b", text, round0_done=True)
    assert phase_of(op, spec, BASIS, 1)[0] == "optimize"
    changed = phase_of(op, _data(text.replace("exact GELU", "GELU")), BASIS, 1)
    assert changed == ("redo", "the spec changed (description) since the earlier run; the old folder is moved aside")
    done = JobResult(name="gelu", spec="gelu.yaml", status="finished", rounds=2)
    op = _op_folder(tmp_path / "c", text, round0_done=True, job=done)
    assert phase_of(op, spec, BASIS, 2)[0] == "done" and phase_of(op, spec, BASIS, 1)[0] == "done"
    assert phase_of(op, spec, BASIS, 3)[0] == "optimize" and phase_of(op, spec, BASIS, None)[0] == "optimize"


def test_the_spec_is_compared_as_data_not_as_text(tmp_path):
    """Comments, key order, flow or block style: the same spec; a KernelBench problem's .py file and the
    spec.yaml derived from it (never the same text) are the same spec too."""
    text = (SPECS / "gelu.yaml").read_text()
    done = JobResult(name="gelu", spec="gelu.yaml", status="finished", rounds=1)
    op = _op_folder(tmp_path, "# a comment\n" + text.replace("dtypes: [float32]", "dtypes:\n  - float32"), round0_done=True, job=done)
    assert phase_of(op, _data(text), BASIS, 1) == ("done", "finished in an earlier run")

    from kernelgen.spec.given import read_spec

    from tests.support.kernelbench_problems import LINEAR

    problem = tmp_path / "level2" / "12_Gemm_Multiply_LeakyReLU.py"
    problem.parent.mkdir()
    problem.write_text(LINEAR)
    given = read_spec(problem, run_reference=False)
    kb = tmp_path / "kb" / given.spec.name
    kb.mkdir(parents=True)
    (kb / "spec.yaml").write_text(given.text)
    assert given.text != problem.read_text()
    assert phase_of(kb, spec_data(read_spec(problem, run_reference=False).spec), BASIS, 1)[0] == "redo"  # no state.json yet
    from kernelgen.batch.basis import folder_spec

    assert folder_spec(kb) == spec_data(given.spec)


def test_a_rerun_redoes_an_operator_when_what_decides_its_result_changed_and_says_what(tmp_path):
    text = (SPECS / "gelu.yaml").read_text()
    done = JobResult(name="gelu", spec="gelu.yaml", status="finished", rounds=1)
    op = _op_folder(tmp_path, text, round0_done=True, job=done)
    save_basis(op, BASIS)
    assert phase_of(op, _data(text), BASIS, 1)[0] == "done"
    same_kind = BASIS.model_copy(update={"device": "cuda"})  # a Ray task knows the kind only: not a change
    assert phase_of(op, _data(text), same_kind, 1)[0] == "done"
    for change, words in [({"tool": "kernelgen 0.2.0, files 9f8e7d6c5b4a"}, "KernelGen changed (kernelgen 0.1.0, files 1a2b3c4d5e6f -> "
                                                                           "kernelgen 0.2.0, files 9f8e7d6c5b4a)"),
                          ({"device": "cuda: NVIDIA A100-SXM4-80GB"}, "the device changed (cuda: NVIDIA H100 80GB HBM3 -> "
                                                                      "cuda: NVIDIA A100-SXM4-80GB)"),
                          ({"backend": "openai"}, "the backend changed (offline -> openai)"),
                          ({"options": ["--model", "qwen"]}, "the LLM options changed (none -> --model qwen)")]:
        phase, why = phase_of(op, _data(text), BASIS.model_copy(update=change), 1)
        assert (phase, why) == ("redo", f"{words} since the earlier run; the old folder is moved aside")


def test_folder_shipped_to_a_task_and_back_replaces_the_old_one_and_keeps_moved_aside_copies(tmp_path):
    driver, node = tmp_path / "driver", tmp_path / "node"
    (driver / "gelu" / "rounds").mkdir(parents=True)
    (driver / "gelu" / "state.json").write_text("old")
    artifacts.unpack(node, artifacts.pack(driver, ["gelu"]))
    assert (node / "gelu" / "state.json").read_text() == "old"
    (node / "gelu" / "state.json").write_text("new")
    (node / "gelu.previous-20260101-000000").mkdir()
    (node / "gelu.previous-20260101-000000" / "kept.txt").write_text("kept")
    (node / "other").mkdir()
    artifacts.unpack(driver, artifacts.pack(node, artifacts.operator_entries(node, "gelu")))
    assert (driver / "gelu" / "state.json").read_text() == "new"
    assert (driver / "gelu.previous-20260101-000000" / "kept.txt").read_text() == "kept"
    assert sorted(p.name for p in driver.iterdir()) == ["gelu", "gelu.previous-20260101-000000"]


def _finish_round(op: Path, k: int) -> None:
    state = load_state(op)
    state.rounds.append(RoundRecord(round=k, started_at=now(), finished_at=now(), backend="offline",
                                    kernel_file=f"rounds/round_{k}/gelu_triton.py"))
    save_state(op, state)


def test_a_task_sends_its_folder_back_after_each_finished_round(tmp_path):
    """What a Ray task sends while it runs: nothing until a round finishes, then the folder with the
    log so far; a copy moved aside goes once; `final` gives the rest."""
    node, driver = tmp_path / "node", tmp_path / "driver"
    text = (SPECS / "gelu.yaml").read_text()
    op = _op_folder(node, text, round0_done=False)
    log = node / "job.log"
    log.write_text("$ kernelgen new\n")
    sent: list[tuple[bytes, str, str]] = []
    shipper = FolderShipper(node, "gelu", log, lambda *copy: sent.append(copy))
    assert not shipper.poll() and not sent  # round 0 under way: nothing the driver could resume from

    state = load_state(op)
    state.rounds[0].finished_at = now()
    save_state(op, state)
    (node / "gelu.previous-20260101-000000").mkdir()  # what `new --force` moved aside
    assert shipper.poll() and not shipper.poll()
    data, log_part, what = sent[0]
    assert (log_part, what) == ("$ kernelgen new\n", "round 0 finished")
    artifacts.unpack(driver, data)
    assert phase_of(driver / "gelu", _data(text), BASIS, 1) == ("optimize", "round 0 done, 0 optimization round(s) done: optimize resumes")

    with open(log, "a") as f:
        f.write("$ kernelgen optimize\n")
    _finish_round(op, 1)
    assert shipper.poll()
    artifacts.unpack(driver, sent[1][0])
    assert sent[1][1:] == ("$ kernelgen optimize\n", "round 1 finished")
    assert sorted(p.name for p in driver.iterdir()) == ["gelu", "gelu.previous-20260101-000000"]  # not twice
    assert [r.round for r in load_state(driver / "gelu").rounds] == [0, 1]
    with open(log, "a") as f:
        f.write("$ kernelgen bench\n")
    data, rest = shipper.final()
    assert rest == "$ kernelgen bench\n" and artifacts.unpack(driver, data) == [driver / "gelu"]


def test_a_ray_task_pins_its_steps_to_the_device_ray_gave_it(monkeypatch):
    from kernelgen.batch.ray_engine import LOCK_DIR, step_env

    monkeypatch.delenv(LOCK_ENV, raising=False)
    worker = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "1"}
    env = step_env("cuda", ["1"], {}, worker)
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["KERNELGEN_DEVICE"] == "cuda" and env["PATH"] == "/bin"
    assert env[LOCK_ENV] == str(LOCK_DIR / "cuda1.lock")  # one per device of the node, whichever task holds it
    assert "OMP_NUM_THREADS" not in env  # Ray's 1, not the driver's
    assert step_env("cuda", ["0"], {"OMP_NUM_THREADS": "8"}, worker)["OMP_NUM_THREADS"] == "8"
    assert step_env("npu", ["2"], {}, {})["ASCEND_RT_VISIBLE_DEVICES"] == "2"
    assert step_env("cpu", [], {}, worker)["KERNELGEN_DEVICE"] == "cpu"
    monkeypatch.setenv(LOCK_ENV, "/shared/mine.lock")  # a lock the user set is kept
    assert step_env("cuda", ["1"], {}, {**worker, LOCK_ENV: "/shared/mine.lock"})[LOCK_ENV] == "/shared/mine.lock"


# --- report ---------------------------------------------------------------------------------------
def test_report_pass_rate_fast_1_and_geomeans(tmp_path):
    write_measured(tmp_path, "fast", [0.5, 0.5], 1.0)  # x2 at both cases
    write_measured(tmp_path, "mixed", [0.5, 2.0], 1.0)  # x2 and x0.5: not fast at every case
    results = [JobResult(name="fast", spec="fast.yaml", status="finished"), JobResult(name="mixed", spec="mixed.yaml", status="finished"),
               JobResult(name="bad", spec="bad.yaml", status="invalid", reason="name: must match [a-z]")]
    report = build_report(tmp_path, results, "local")
    s = report.summary
    assert (s.operators, s.correct, s.fast_1_count) == (3, 2, 1)
    assert s.geomean["eager"] == pytest.approx(2 ** 0.5) and s.case_timings == 4 and s.measured
    rows = {r.name: r for r in report.operators}
    assert rows["fast"].fast_1 and not rows["mixed"].fast_1 and rows["mixed"].speedup["eager"] == pytest.approx(1.0)
    md = render_markdown(report)
    assert "pass rate 2/3 (67%), fast_1 1/3 (33%)" in md and "| bad | invalid |" in md and "name: must match [a-z]" in md
    assert "dry run" not in md
    assert json.loads(report.model_dump_json())["summary"]["fast_1"] == pytest.approx(1 / 3)


def test_job_file_names_are_stable():
    # benchmarks/run_all.py and earlier batch outputs read these names
    assert (JOB_FILE, FINAL_FILE) == ("batch_job.json", "final_perf.json")


def test_run_all_collect_only_rebuilds_report_and_prints_the_case_table_last(tmp_path, repo):
    import subprocess

    write_measured(tmp_path, "fast", [0.5], 1.0)
    save_job(tmp_path / "fast", JobResult(name="fast", spec="fast.yaml", status="finished", rounds=5))
    (tmp_path / "fast" / "spec.yaml").write_text("name: fast\n")
    proc = subprocess.run([sys.executable, str(repo / "benchmarks" / "run_all.py"), "--out", str(tmp_path), "--collect-only"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()
    assert last[-1].startswith("1 operator(s): pass rate 1/1 (100%), fast_1 1/1 (100%), geomean x2 over eager")
    assert "| fast | 1024x1024 | float32 | 0.5000 | 1.0000 | 1.0000 | 2.00 | 2.00 |" in proc.stdout
    assert json.loads((tmp_path / "batch_report.json").read_text())["summary"]["correct"] == 1
    assert (tmp_path / "results.md").is_file() and (tmp_path / "batch_report.png").is_file()


# --- seconds, and what reads as out of memory --------------------------------------------------------
def test_a_steps_seconds_are_split_at_the_progress_lines_that_begin_a_phase():
    from kernelgen.batch.phases import split

    marks = [(3.0, "kb1_19_relu: generating the kernel (offline)"), (4.5, "some note"),
             (5.0, "kb1_19_relu: checking accuracy of rounds/round_0/kb1_19_relu_triton.py on cuda"),
             (9.0, "kb1_19_relu: measuring performance")]
    assert split("new", marks, 20.0) == {"new: start": 3.0, "new: generate": 2.0, "new: check": 4.0, "new: measure": 11.0}
    rounds = [(2.0, "op: measuring round 0's kernel on cuda before diagnosing it"), (5.0, "op round 1 (1/2): proposing (offline) from round 0"),
              (6.0, "op round 1 (1/2): checking the candidate (x) with every planned check"),
              (8.0, "op round 2 (2/2): proposing (offline) from round 1"), (9.0, "op round 2 (2/2): checking the candidate (y)")]
    assert split("optimize", rounds, 12.0) == {"optimize: start": 2.0, "optimize: time the best": 3.0,
                                               "optimize: propose": 2.0, "optimize: check": 5.0}  # the rounds add up
    assert split("bench", [], 4.0) == {"bench: start": 4.0}
    waited = [*marks[:3], (8.0, "kb1_19_relu: waited 2.5 s for the device"), marks[3]]
    assert split("new", waited, 20.0) == {"new: start": 3.0, "new: generate": 2.0, "new: check": 1.5,
                                          "new: measure": 11.0, "new: check (device lock)": 2.5}


def test_new_says_how_long_its_check_waited_for_the_device(tmp_path, monkeypatch, repo):
    """Another process holding the GPU's lock while `new` checks: the step says how long it waited, so a
    batch's report shows the queue (kernelgen.batch.phases) instead of counting it as the check's work."""
    import threading
    import time

    from kernelgen.verify.judge.devicelock import device_lock

    lock, out = tmp_path / "cuda0.lock", tmp_path / "out"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    monkeypatch.setenv("KERNELGEN_NO_SERVICE", "1")
    held, done = threading.Event(), threading.Event()

    def timing_elsewhere() -> None:  # as another problem's timing would: until 3 s after the kernel is written
        with device_lock(True, str(lock)):  # (into `new`'s staging folder: renamed into `out` at the end)
            held.set()
            while not any(tmp_path.rglob("broadcast_triton.py")) and not done.is_set():
                time.sleep(0.05)
            time.sleep(3.0)

    other = threading.Thread(target=timing_elsewhere)
    other.start()
    assert held.wait(10)
    try:
        r = CliRunner().invoke(app, ["new", str(repo / "operator_specs" / "broadcast.yaml"), "--out", str(out),
                                     "--backend", "offline", "--no-bench", "--device", "cpu"])
    finally:
        done.set()
        other.join(30)
    assert r.exit_code == 0, r.output
    said = [float(m) for m in __import__("re").findall(r"broadcast: waited (\d+\.\d) s for the device", flat(r.output))]
    assert said and said[0] >= 1.0, flat(r.output)


def test_what_reads_as_the_device_out_of_memory():
    from kernelgen.batch.step import OUT_OF_MEMORY

    for said in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 GiB.",
                 "RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"):
        assert OUT_OF_MEMORY.search(said), said
    for said in ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448",
                 "MemoryError", "the kernel refuses perf case 0"):
        assert not OUT_OF_MEMORY.search(said), said  # a launch configuration, the host: not the device's memory
