"""A verdict is shown where people look: `bench`'s table, `new`'s summary (the same table), the log and the
batch report name every violation on the line of the case it concerns, a refused timing shows no
number, and an INVALID case shows its reason on its line."""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

import kernelgen.verify.judge.judge as judge_module
from kernelgen.batch.report import case_rows
from kernelgen.batch.tables import case_columns, markdown_table
from kernelgen.cli import app
from kernelgen.record.display import perf_table
from kernelgen.record.oplog import perf_text
from kernelgen.verify.results import KernelTiming, PerfCase, PerformanceResult, RunRecord, Violation
from tests.support.broadcast import make_op_dir
from tests.support.judging import ADVERSARIAL


TIMING = KernelTiming(ms=0.1234, ms_min=0.12, ms_max=0.13, spread=0.01, reps=10)


def _perf() -> PerformanceResult:
    fine = PerfCase(case=0, shapes={"x": [4096, 4096]}, dtype="float32", bytes=1 << 27, kernel=TIMING,
                    eager=KernelTiming(ms=0.2, ms_min=0.2, ms_max=0.21, spread=0.01, reps=10), gbps=1087.0, speedup_eager=1.62)
    forged = fine.model_copy(update={"case": 1, "shapes": {"x": [8192, 4096]}, "gbps": 2174.0, "violations": [
        Violation(code="forged-timing", message="claimed 1 ms; the judge's clock allows no less than 9 ms"),
        Violation(code="timed-output-wrong", message="12 of 4096 elements differ")]})
    beyond = fine.model_copy(update={"case": 2, "shapes": {"x": [65536, 1000]}, "gbps": 9999.0, "valid": False,
                                     "invalid_reason": "9999 GB/s exceeds the measured copy bandwidth 3000 GB/s"})
    return PerformanceResult(op="broadcast", kernel="broadcast_triton.py", device="cuda", device_name="H100",
                             interpreter=False, measured=True, torch_version="2.13", triton_version="3.9",
                             cases=[fine, forged, beyond], violations=list(forged.violations))


def _line(text: str, shape: str) -> str:
    return next(line for line in text.splitlines() if shape in line)


def test_the_terminal_table_names_violations_and_shows_no_refused_number():
    console = Console(width=400, record=True)
    console.print(perf_table(_perf()))
    text = console.export_text()
    assert "2174" not in text and "9999" not in _line(text, "65536x1000").split("INVALID")[0]
    assert "0.1234" in _line(text, "4096x4096") and "ok" in _line(text, "4096x4096")
    forged = _line(text, "8192x4096")
    assert "forged-timing" in forged and "timed-output-wrong" in forged and "0.1234" not in forged
    assert "INVALID: 9999 GB/s exceeds the measured copy bandwidth" in _line(text, "65536x1000")


def test_the_log_and_the_batch_report_do_the_same():
    log = perf_text(RunRecord(kind="performance", status="failed", exit_code=1, duration_s=1.0, performance=_perf()))
    assert "forged-timing; timed-output-wrong" in _line(log, "8192, 4096") and "2174" not in log
    assert "INVALID: 9999 GB/s" in _line(log, "65536, 1000")
    table = markdown_table(case_columns(), case_rows("broadcast", _perf()))
    assert "forged-timing" in _line(table, "8192x4096") and "2174" not in table and "0.1234" in _line(table, "4096x4096")
    assert "INVALID: 9999 GB/s exceeds" in _line(table, "65536x1000")


@pytest.mark.slow
def test_bench_shows_a_refused_timing_as_no_number_and_its_violation_on_the_line(tmp_path, monkeypatch):
    """Through `kernelgen bench` (the static checks switched off in this judge process, so the kernel
    runs): a cache keyed on the inputs' version serves its second recorded call from a tensor an earlier
    call made, and the case's timing is refused with that reason on its line."""
    monkeypatch.setattr(judge_module, "check_source", lambda *a, **k: [])
    monkeypatch.setenv("COLUMNS", "400")
    op = make_op_dir(tmp_path, ADVERSARIAL / "cache_by_version.py")
    result = CliRunner().invoke(app, ["bench", str(op), "--device", "cpu", "--no-compile", "--no-peers"])
    assert result.exit_code == 1, result.output
    row = _line(result.output, "4x33")
    assert "outside-tensor" in row, result.output
    kernel_ms = row.split("│")[3].strip()
    assert kernel_ms == "—", row
    assert "violation outside-tensor:" in result.output
