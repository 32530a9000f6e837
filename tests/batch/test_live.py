"""The batch report as it stands, and every failure's own reason in it:

- an operator the earlier run reported as `error` (its Ray worker killed) and the same command then
  resumed and finished reads `finished` in batch_report.md and .json — also when the second run
  itself stops right after it (a device session's time limit), before the batch's end;
- a step that dies with a traceback, or a final measurement that is INVALID, is reported with its
  own words, never "see the log".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgen.batch.engine import Event
from kernelgen.batch.outcome import bench_reason as _bench_reason
from kernelgen.batch.outcome import why as _why
from kernelgen.batch.step import StepOutput
from kernelgen.batch.plan import plan_specs
from kernelgen.batch.resume import FINAL_FILE, JobResult, StepRecord, save_job
from kernelgen.batch.run import BatchOptions, PreparedBatch, run_prepared
from kernelgen.verify.results import PerfCase, PerformanceResult, RunRecord

SPECS = Path(__file__).resolve().parent / "data"


class ScriptedEngine:
    """Ends each job as scripted, writing batch_job.json as a finished job does; can stop the batch
    (KeyboardInterrupt, as a killed driver) right after one job's end."""

    name, device = "scripted", "cpu"

    def __init__(self, outcomes: dict[str, tuple[str, str]], stop_after: str | None = None):
        self.outcomes, self.stop_after = outcomes, stop_after

    def describe(self) -> str:
        return "scripted: one worker"

    def device_model(self) -> str:
        return "cpu"

    def run(self, jobs, on_event):  # noqa: ANN001, ANN201
        results = []
        for job in jobs:
            status, reason = self.outcomes[job.name]
            result = JobResult(name=job.name, spec=job.spec_label, status=status, reason=reason, rounds=job.rounds,
                               target="cpu#0")
            if status in ("finished", "failed"):
                (Path(job.out_root) / job.name).mkdir(parents=True, exist_ok=True)
                save_job(Path(job.out_root) / job.name, result)
            on_event(Event(job.name, "done", "cpu#0", result=result))
            if job.name == self.stop_after:
                raise KeyboardInterrupt
            results.append(result)
        return results


def _batch(out: Path, engine: ScriptedEngine) -> PreparedBatch:
    opts = BatchOptions(specs=[SPECS], out_root=out, rounds=1, backend="offline", device="cpu")
    return PreparedBatch(opts, plan_specs([SPECS]), engine)


def _statuses(out: Path) -> dict[str, str]:
    return {r["name"]: r["status"] for r in json.loads((out / "batch_report.json").read_text())["operators"]}


def test_a_resumed_operator_reads_finished_even_when_the_second_run_stops_before_its_end(tmp_path):
    out = tmp_path / "out"
    killed = "the Ray task failed: WorkerCrashedError: the worker died; a later run resumes this operator"
    first = run_prepared(_batch(out, ScriptedEngine({"broadcast": ("finished", ""), "gelu": ("error", killed),
                                                     "row_sum": ("error", killed)})))
    assert [r.status for r in first.results] == ["finished", "error", "error"]
    assert _statuses(out) == {"broadcast": "finished", "gelu": "error", "row_sum": "error"}

    # the same command again: gelu is resumed and finishes, then the run is stopped before row_sum ends
    engine = ScriptedEngine({"broadcast": ("finished", ""), "gelu": ("finished", ""), "row_sum": ("finished", "")},
                            stop_after="gelu")
    with pytest.raises(KeyboardInterrupt):
        run_prepared(_batch(out, engine))
    statuses = _statuses(out)
    assert statuses["gelu"] == "finished", statuses
    row_sum = next(r for r in json.loads((out / "batch_report.json").read_text())["operators"] if r["name"] == "row_sum")
    assert row_sum["status"] == "error" and "the earlier run's verdict" in row_sum["reason"]
    md = (out / "batch_report.md").read_text()
    assert "| gelu | finished |" in md and "| gelu | error |" not in md


def test_an_operator_not_reached_yet_is_pending_not_missing(tmp_path):
    out = tmp_path / "out"
    engine = ScriptedEngine({"broadcast": ("finished", ""), "gelu": ("finished", ""), "row_sum": ("finished", "")},
                            stop_after="broadcast")
    with pytest.raises(KeyboardInterrupt):
        run_prepared(_batch(out, engine))
    assert _statuses(out) == {"broadcast": "finished", "gelu": "pending", "row_sum": "pending"}
    summary = json.loads((out / "batch_report.json").read_text())["summary"]
    assert summary["operators"] == 3 and summary["correct"] == 1  # a pending operator counts, as not correct


def _step(rc: int | None, tail: list[str], errors: list[str] | None = None) -> StepOutput:
    return StepOutput(StepRecord(step="new", exit_code=rc, seconds=12.0), errors or [], tail)


def test_a_traceback_is_reported_with_its_exception_and_note():
    tail = ["Traceback (most recent call last):", '  File "x.py", line 3, in <module>',
            "kernelgen.verify.protocol.ProtocolError: 235868164 bytes at offset 0 do not fit the 67108864-byte arena",
            "kernelgen new: the LLM's 2 exchanges so far are kept in out/op.llm-unfinished-1"]
    why = _why(_step(1, tail), "kernelgen new did not finish")
    assert "see the log" not in why
    assert why.startswith("kernelgen new did not finish: `kernelgen new` exit 1: kernelgen.verify.protocol.ProtocolError: "
                          "235868164 bytes") and "op.llm-unfinished-1" in why
    assert _why(_step(1, [], ["error: the spec is wrong", "hint: fix it"]), "x") == "the spec is wrong hint: fix it"
    assert _why(_step(-9, []), "kernelgen new did not finish").endswith("exit -9 without a word")
    assert "within the step timeout" in _why(_step(None, []), "x")


def test_an_invalid_final_measurement_names_its_reason(tmp_path):
    case = PerfCase(case=0, shapes={"x": [8192, 512]}, dtype="float32", bytes=1 << 24, valid=False,
                    invalid_reason="gemm_weight.shape[0] is 8192; the reference needs 512 there")
    perf = PerformanceResult(op="op", kernel="k.py", device="cuda", device_name="H200", interpreter=False, measured=True,
                             torch_version="2.11", triton_version="3.6", cases=[case])
    (tmp_path / FINAL_FILE).write_text(RunRecord(kind="performance", status="failed", exit_code=1, duration_s=1.0,
                                                 performance=perf).model_dump_json())
    why = _bench_reason(tmp_path, _step(1, ["some table"]))
    assert why == ("the final measurement did not pass: x[8192, 512] float32: INVALID: gemm_weight.shape[0] is 8192; "
                   "the reference needs 512 there")


def test_the_bench_table_says_why_a_case_is_invalid():
    from rich.console import Console

    from kernelgen.record.display import perf_table

    bad = PerfCase(case=0, shapes={"x": [8192, 512]}, dtype="float32", bytes=1 << 24, valid=False,
                   invalid_reason="faster than the copy ceiling: 5100 GB/s > 4250")
    good = PerfCase(case=1, shapes={"x": [64, 512]}, dtype="float32", bytes=1 << 16)
    perf = PerformanceResult(op="op", kernel="k.py", device="cuda", device_name="H200", interpreter=False, measured=True,
                             torch_version="2.11", triton_version="3.6", cases=[bad, good])
    console = Console(width=400, record=True)
    console.print(perf_table(perf))
    lines = console.export_text().splitlines()
    bad_line = next(ln for ln in lines if "8192x512" in ln)  # the reason is on the case's own line
    assert "INVALID: faster than the copy ceiling: 5100 GB/s > 4250" in bad_line
    assert "ok" in next(ln for ln in lines if "64x512" in ln)
