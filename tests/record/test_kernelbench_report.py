"""KernelBench's terms in the reports (fast_p over all problems given, against eager and torch.compile) and
KernelBench-format problem files found by `kernelgen batch`'s plan beside YAML specs."""

import textwrap

import pytest

from kernelgen.batch.plan import plan_specs
from kernelgen.batch.report import build_report, fast_p_text, render_markdown
from kernelgen.batch.resume import JobResult
from kernelgen.record.fastp import Outcome, fast_p, fast_p_row
from kernelgen.record.report import ReportRow, fast_p_text as report_fast_p_text
from tests.support.batch_results import write_measured


def test_fast_p_counts_every_problem_and_wrong_ones_as_slow():
    outcomes = [Outcome(True, 2.5), Outcome(True, 1.2), Outcome(True, 0.8), Outcome(True, None), Outcome(False, 3.0)]
    assert fast_p(outcomes, 0) == pytest.approx(4 / 5)  # fast_0: the correct share, measured or not
    assert fast_p_row(outcomes) == pytest.approx({"0": 0.8, "1": 0.4, "1.5": 0.2, "2": 0.2})
    assert fast_p([], 1.0) == 0.0


def test_batch_report_has_fast_p_against_eager_and_compile(tmp_path):
    write_measured(tmp_path, "fast", [0.5], 1.0)  # x2
    write_measured(tmp_path, "slow", [2.0], 1.0)  # x0.5
    results = [JobResult(name="fast", spec="fast.py", status="finished"), JobResult(name="slow", spec="slow.py", status="finished"),
               JobResult(name="wrong", spec="w.py", status="failed"), JobResult(name="bad", spec="b.py", status="invalid")]
    report = build_report(tmp_path, results, "local")
    assert report.summary.fast_p["eager"] == pytest.approx({"0": 0.5, "1": 0.25, "1.5": 0.25, "2": 0.0})
    assert set(report.summary.fast_p) == {"eager", "torch.compile"}
    text = fast_p_text(report)
    assert text.splitlines()[0].startswith("fast_p over 4 problem(s)") and "fast_1.5" in text
    assert "vs eager" in text and "0.25" in text
    assert text in render_markdown(report)


def test_kernelgen_report_fast_p_counts_untested_folders():
    rows = [ReportRow("a", True, 0, 1.6, 0.9, None, 0, 0, True, ""), ReportRow("b", False, None, None, None, None, 0, 0, True, ""),
            ReportRow("c", False, None, None, None, None, 0, 0, True, "", problem="not tested: round 0 never finished")]
    lines = report_fast_p_text(rows).splitlines()
    assert lines[0].startswith("fast_p over 3 problem(s)")
    assert lines[1].split()[-4:] == ["0.33", "0.33", "0.33", "0.00"] and lines[2].split()[-4:] == ["0.33", "0.00", "0.00", "0.00"]


PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 64
dim = 300

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_batch_plan_finds_problem_files_beside_yaml(tmp_path, repo):
    level = tmp_path / "level1"
    level.mkdir()
    (level / "19_ReLU.py").write_text(textwrap.dedent(PROBLEM))
    (level / "20_Broken.py").write_text(textwrap.dedent(PROBLEM).replace("def get_inputs", "def other"))
    (level / "gelu.yaml").write_text((repo / "operator_specs" / "gelu.yaml").read_text())
    planned = {p.spec_path.name: p for p in plan_specs([level])}
    assert set(planned) == {"19_ReLU.py", "20_Broken.py", "gelu.yaml"}
    assert planned["19_ReLU.py"].name == "kb1_19_relu" and planned["19_ReLU.py"].valid
    assert planned["20_Broken.py"].name == "kb1_20_broken" and "defines no get_inputs()" in planned["20_Broken.py"].problem
    assert planned["gelu.yaml"].valid
