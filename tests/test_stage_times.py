"""`benchmarks/stage_times.py`: a generated kernel's device time launch by launch, beside eager's. The
profiling itself needs a GPU (docs/kernelbench.md has its runs); here, what the CPU can show: the
refusal, and the per-call arithmetic of the table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "stage_times.py"


def test_on_the_cpu_it_says_a_gpu_is_needed_and_why(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "needs a CUDA GPU" in run.stderr and "interpreter" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_table_is_per_call_longest_first_with_launch_counts_and_shares():
    """Two profiled calls: a conv launched once a call (3,000 us each), a norm launched twice a call
    (500 us each): per call, the conv 3,000 us, the norm 1,000 us in 2 launches, 75% and 25%; what is known
    of a kernel's registers goes beside it."""
    child = (f"import sys\nsys.path.insert(0, {str(REPO / 'benchmarks')!r})\nimport stage_times as s\n"
             "events = [('conv', 3000.0), ('norm', 500.0), ('norm', 500.0)] * 2\n"
             "print(s.table('kernel', s.aggregate(events, 2, {'conv': '255 registers'})))\nprint(s.table('eager', []))\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "kernel: 4,000.0 us a call, 3 launches"
    assert lines[1].split() == ["conv", "3,000.0", "us", "75.0%", "(255", "registers)"]
    assert lines[2].split() == ["norm", "1,000.0", "us", "25.0%", "x2"]
    assert lines[3] == "eager: 0.0 us a call, 0 launches" and "no device kernel recorded" in lines[4]
