"""`benchmarks/ptxas_report.py`: round 0's kernel compiled for sm_90a on this machine, which has no GPU,
with the Triton installed here and the ptxas its wheel ships."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "ptxas_report.py"

INSTANCE_NORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Instance normalisation, then a division."""
    def __init__(self, channels: int):
        super(Model, self).__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) / 2.0

def get_inputs():
    return [torch.rand(8, 16, 64, 64)]

def get_init_inputs():
    return [16]
'''


def _has_ptxas() -> bool:
    import triton

    folder = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    return (folder / "ptxas").is_file() or (folder / "ptxas-blackwell").is_file()


@pytest.mark.skipif(not _has_ptxas(), reason="this Triton ships no NVIDIA backend (ptxas)")
def test_each_stage_compiles_for_sm90_with_its_registers_spills_and_ptx_size(tmp_path):
    """The single-pass instance norm (4,096 elements a row, 16 warps) and the division after it: a line
    each with registers, spill bytes, PTX lines and global-memory instructions, none marked; the variance's count is taken from the
    reduced lanes, not summed over the 2-D mask (Triton 3.6 unrolled that sum per element into every
    thread: 191,131 lines of PTX and 62 KB of spills at level 2's 17; this machine's Triton does not, so
    the text is what can be checked here)."""
    problem = tmp_path / "in_problem.py"
    problem.write_text(INSTANCE_NORM)
    run = subprocess.run([sys.executable, str(SCRIPT), str(problem)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("Triton ") and "ptxas" in lines[0]
    assert "x[8, 16, 64, 64], float32, sm_90a, 132 SMs" in lines[1]
    stages = [ln for ln in lines if " stage " in ln]
    assert len(stages) == 2, run.stdout
    for ln in stages:
        m = re.search(r"(\d+) registers, spills (\d+)/(\d+) B, shared \d+ B, ([\d,]+) lines of PTX", ln)
        assert m, ln
        regs, stores, loads, ptx = int(m[1]), int(m[2]), int(m[3]), int(m[4].replace(",", ""))
        assert 0 < regs <= 255 and stores == loads == 0 and 100 < ptx < 20_000
        assert not ln.lstrip().startswith("!")
        assert "; global memory: " in ln and "st.global" in ln, ln
    # compiled as launched: the unit stride of the contiguous dim is a constant, so the division's
    # loads and stores go 16 bytes a thread (a bare compile, its stride a runtime value, reads 4 at a time)
    assert "ld.global.v4.b32" in stages[1] and "st.global.v4.b32" in stages[1], stages[1]

    from kernelgen.offline import generate_kernel
    from kernelgen.spec.given import read_spec

    source = generate_kernel(read_spec(problem, run_reference=False).spec, {}).source
    assert "tl.sum(rmask.to(tl.float32), 0)" in source and "tl.sum(mask.to(" not in source


def test_a_file_that_does_not_read_is_one_failed_line_and_exit_1(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("this is not a KernelBench problem\n")
    run = subprocess.run([sys.executable, str(SCRIPT), str(broken)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 1
    assert "broken.py: failed:" in run.stdout and "Traceback" not in run.stdout + run.stderr
