"""Where a batch's seconds go (issue 39): the baselines timed ahead, beside `new` (kernelgen.batch.ahead),
and the report's line of seconds per stage (derive, new, baselines, optimize, bench)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.batch.ahead import wanted
from kernelgen.batch.phases import baseline_split
from kernelgen.batch.report import build_report, render_markdown
from kernelgen.batch.resume import STAGES, JobResult, StepRecord
from kernelgen.cli import app
from kernelgen.errors import UsageError
from tests.support.twice import SPEC


def test_baselines_are_timed_ahead_on_a_gpu_by_default_not_under_the_interpreter(monkeypatch):
    monkeypatch.delenv("KERNELGEN_BATCH_BASELINES", raising=False)
    assert wanted("cuda") and wanted("npu") and not wanted("cpu")
    assert wanted("auto", {"KERNELGEN_DEVICE": "cuda"}) and not wanted("auto", {"KERNELGEN_DEVICE": "cpu"})
    assert wanted("cpu", {"KERNELGEN_BATCH_BASELINES": "on"}) and not wanted("cuda", {"KERNELGEN_BATCH_BASELINES": "off"})
    with pytest.raises(UsageError, match="KERNELGEN_BATCH_BASELINES=sometimes"):
        wanted("cuda", {"KERNELGEN_BATCH_BASELINES": "sometimes"})


def test_a_batch_refuses_a_bad_baselines_setting_before_writing_anything(tmp_path, monkeypatch):
    (tmp_path / "twice.yaml").write_text(SPEC)
    monkeypatch.setenv("KERNELGEN_BATCH_BASELINES", "sometimes")
    res = CliRunner().invoke(app, ["batch", str(tmp_path / "twice.yaml"), "--out", str(tmp_path / "out"),
                                   "--backend", "offline", "--device", "cpu"])
    assert res.exit_code == 2 and "KERNELGEN_BATCH_BASELINES" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()


def test_the_report_says_the_mean_seconds_per_stage_with_the_baselines_beside_new(tmp_path):
    def job(name: str, new: float, optimize: float, ahead: float | None, derive: float) -> JobResult:
        steps = [StepRecord(step="new", exit_code=0, seconds=new), StepRecord(step="optimize", exit_code=0, seconds=optimize)]
        return JobResult(name=name, spec=f"{name}.py", status="error", steps=steps, derive_s=derive,
                         baselines=StepRecord(step="baselines", exit_code=0, seconds=ahead) if ahead is not None else None)

    report = build_report(tmp_path, [job("a", 20.0, 30.0, 25.0, 1.0), job("b", 10.0, 10.0, None, 3.0)], "local")
    assert report.summary.stages_mean == {"derive": 2.0, "new": 15.0, "baselines": 12.5, "optimize": 20.0, "bench": 0.0}
    assert report.summary.seconds_mean == 35.0  # the baselines ran beside new: not added to an operator's seconds
    assert list(report.summary.stages_mean) == list(STAGES)
    text = render_markdown(report)
    assert ("seconds per stage, mean per operator that ran: derive 2.0, new 15.0, baselines 12.5 (beside new), "
            "optimize 20.0, bench 0.0") in text


def test_the_baselines_line_of_a_case_is_read_into_where_its_seconds_went():
    """The line the baselines-ahead process printed for level 2's 20 on an H100 (2026-12-07), and lines that
    are not a case's: nothing."""
    line = ("baselines ahead: kb2_20_convtranspose3d_sum_residualadd_multiply_residualadd: case 0 float32: eager 3.544 ms, "
            "torch.compile 1.077 ms (63.1 s: inputs 0.5, compile 5.1, device lock 57.2, timing eager 0.3, timing torch.compile 0.1)\n")
    assert baseline_split(line) == pytest.approx({"inputs": 0.5, "compile": 5.1, "device lock": 57.2, "timing": 0.4})
    assert baseline_split("baselines ahead: x: case 0 float32: nothing timed (0.2 s: inputs 0.2)") == {"inputs": 0.2}
    for other in ("baselines ahead: x: peers timed on 1 case(s)", "baselines ahead: x: 3 entries timed in 80.5 s",
                  "case 0 float32: eager 1 ms (2.0 s: inputs 1.0)", ""):
        assert baseline_split(other) == {}


def test_the_report_says_where_the_baselines_seconds_went(tmp_path):
    """Mean seconds per part over the operators that ran (one without a split counts 0), longest first."""
    def job(name: str, phases: dict[str, float]) -> JobResult:
        return JobResult(name=name, spec=f"{name}.py", status="error", steps=[StepRecord(step="new", exit_code=0, seconds=30.0)],
                         baselines=StepRecord(step="baselines", exit_code=0, seconds=sum(phases.values()), phases=phases))

    report = build_report(tmp_path, [job("a", {"baselines: device lock": 60.0, "baselines: compile": 8.0,
                                               "baselines: start and peers": 2.0}), job("b", {})], "local")
    assert report.summary.baselines_mean == {"baselines: device lock": 30.0, "baselines: compile": 4.0,
                                             "baselines: start and peers": 1.0}
    assert "baselines 35.0 (beside new: device lock 30.0, compile 4.0, start and peers 1.0)" in render_markdown(report)


@pytest.mark.slow
def test_the_next_operators_baselines_are_timed_while_this_one_optimizes(tmp_path, monkeypatch):
    """Forced on under the interpreter (where it times eager's dry run only), one worker, two operators:
    each job times its baselines beside `new`, which takes them from the cache; once the first's `new` is
    done, the second's are timed in the background, and the second's own process then times nothing.
    The jobs keep the process's record, the report its stage line. Under the interpreter a baselines
    process lasts ~0.1 s: what is asserted is that it ran and when, never a rounded number of seconds
    (a mean of 0.04 s shows as 0.0 in the report)."""
    for name in ("first", "second"):
        (tmp_path / f"{name}.yaml").write_text(SPEC.replace("twice", name))
    monkeypatch.setenv("KERNELGEN_BATCH_BASELINES", "on")
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["batch", str(tmp_path / "first.yaml"), str(tmp_path / "second.yaml"), "--out", str(out),
                                   "--rounds", "1", "--backend", "offline", "--device", "cpu", "--gpus", "1"])
    assert res.exit_code == 0, res.output
    logs = out / "_batch" / "logs"
    first = (logs / "first.log").read_text()
    assert "timing second's baselines ahead, beside this operator's rounds" in first
    second = (logs / "second.baselines.log").read_text()
    assert second.index("second: 1 entries timed") < second.index("second: 0 entries timed")  # ahead, then its own
    # the second's, started once the first's `new` was done and before the first's rounds ended (the logs'
    # timestamps, to the second)
    new_done = re.search(r"^\[(\S+)\] timing second's baselines ahead", first, re.M).group(1)
    rounds_done = re.findall(r"^\[(\S+)\] exit 0 after", first, re.M)[1]  # new's, then optimize's
    ahead_started = re.search(r"^\[(\S+)\] baselines timed ahead", second, re.M).group(1)
    assert new_done <= ahead_started <= rounds_done, (new_done, ahead_started, rounds_done)
    for name in ("first", "second"):
        final = json.loads((out / name / "final_perf.json").read_text())["performance"]
        assert "Baselines (eager, torch.compile, peers) of 1 of 1 case(s) from the cache" in final["note"]
    assert not list((tmp_path / "cache").rglob("*.claim"))
    jobs = [json.loads((out / name / "batch_job.json").read_text()) for name in ("first", "second")]
    for job in jobs:  # each timed its own beside `new`: the record of a process that ran and ended well
        assert job["status"] == "finished" and job["baselines"]["exit_code"] == 0 and job["baselines"]["seconds"] >= 0
    # the first's process timed eager (the interpreter's dry run) and said where its seconds went
    assert {"baselines: inputs", "baselines: device lock", "baselines: timing", "baselines: start and peers"} <= set(jobs[0]["baselines"]["phases"])
    stages = json.loads((out / "batch_report.json").read_text())["summary"]["stages_mean"]
    assert stages["baselines"] == round(sum(job["baselines"]["seconds"] for job in jobs) / 2, 1)  # from the records
    assert stages["optimize"] > 0
    assert "seconds per stage, mean per operator that ran: derive" in (out / "batch_report.md").read_text()


def test_optimize_does_not_draw_the_same_plot_twice(tmp_path):
    """`optimize` draws its plot after each round and when it stops: the second time, with nothing new,
    the file is left as it is (kernelgen.record.plot)."""
    from kernelgen.record.plot import write_plot
    from kernelgen.record.state import OpState, RoundRecord

    state = OpState(name="op", created_at="2026-11-27T00:00:00", backend="offline", device="cpu",
                    rounds=[RoundRecord(round=0, started_at="2026-11-27T00:00:00", finished_at="2026-11-27T00:00:01",
                                        backend="offline", change="initial kernel", change_type="initial", kernel_file="k.py")])
    path = write_plot(tmp_path, state)
    path.write_bytes(b"drawn once")  # a second drawing would replace it
    write_plot(tmp_path, state)
    assert path.read_bytes() == b"drawn once"
    state.rounds.append(state.rounds[0].model_copy(update={"round": 1}))
    write_plot(tmp_path, state)
    assert path.read_bytes().startswith(b"\x89PNG")  # a new round: drawn again
