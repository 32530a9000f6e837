"""Convolutions through the command line: `kernelgen validate` says yes to a KernelBench-format
convolution chain once its kernel ran (and says which family), no to a convolution outside the family
naming the parameter; `kernelgen new` builds one and its own accuracy check passes."""

from __future__ import annotations

import textwrap
from pathlib import Path

from typer.testing import CliRunner

from kernelgen.cli import app

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A convolution, a ReLU, a bias and a group norm: KernelBench's level-2 shape of problem."""
    def __init__(self, in_channels, out_channels, kernel_size, groups, padding_mode):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=2, padding=1, padding_mode=padding_mode)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x):
        return self.norm(torch.relu(self.conv(x)) + 0.5)

batch_size = 2
in_channels = 3
out_channels = 8
height, width = 9, 11
kernel_size = 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, 2, {mode!r}]
'''


def _problem(tmp_path: Path, mode: str) -> Path:
    path = tmp_path / "level2" / "1001_Conv2d_ReLU_GroupNorm.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PROBLEM.replace("{mode!r}", repr(mode)))
    return path


def test_validate_says_yes_to_a_convolution_chain_after_running_it(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["validate", str(_problem(tmp_path, "zeros"))])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "offline: yes (conv" in text and "matched the reference" in text, text


def test_validate_names_the_parameter_outside_the_family(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["validate", str(_problem(tmp_path, "reflect")), "--no-run"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "offline: no (" in text and "padding_mode='reflect'" in text and "needs an LLM backend" in text, text


def test_new_builds_a_transposed_convolution_that_passes(tmp_path: Path) -> None:
    spec = tmp_path / "deconv.yaml"
    spec.write_text(textwrap.dedent("""\
        name: deconv
        description: a grouped, strided transposed convolution with output padding, then a SiLU
        inputs:
          - {name: x}
          - {name: w}
        outputs:
          - {name: out}
        reference: |
          def deconv(x, w):
              return F.silu(F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2))
        dtypes: [float32]
        test_cases:
          - {x: [2, 4, 5, 7], w: [4, 3, 3, 3]}
        """))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["new", str(spec), "--out", str(out), "--backend", "offline", "--no-bench"])
    assert r.exit_code == 0, r.output
    assert "PASS" in r.output
    source = (out / "deconv" / "deconv_triton.py").read_text()
    assert "Family: conv (1 launch)" in source and "transposed 2-D convolution" in source


# A depthwise 3x3 convolution whose batch x channels (16 x 64 = 1,024) leaves a shrunk input of at most
# 23 pixels under the derivation's 24,000-element budget: before, the shrink took a 3x3 input, the
# convolution's output was 1x1, the trace equated the input's height with the kernel's, and the kernel
# refused every other case (`conv2d_weight.shape[2] is 3; the reference needs x_2 there`; level 1's 82).
DEPTHWISE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A depthwise 3x3 convolution over a square input."""
    def __init__(self, in_channels, kernel_size):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, groups=in_channels, bias=False)

    def forward(self, x):
        return self.conv2d(x)

batch_size = 16
in_channels = 64
kernel_size = 3
height = width = 32

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, kernel_size]
'''


def _depthwise(tmp_path: Path) -> Path:
    path = tmp_path / "level1" / "1082_conv_depthwise_2D.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DEPTHWISE)
    return path


def test_shrunk_cases_leave_the_convolution_room(tmp_path: Path) -> None:
    from kernelgen.spec.kernelbench import derive_spec

    spec = derive_spec(_depthwise(tmp_path)).spec
    assert spec.test_cases
    for case in spec.test_cases:
        # a 3x3 kernel at stride 1: an input of 4 or more leaves an output of 2 or more
        assert min(case["x"][2:]) >= 4, case


def test_new_builds_a_depthwise_convolution_that_passes_every_shape(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["new", str(_depthwise(tmp_path)), "--out", str(out), "--backend", "offline", "--no-bench"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "Accuracy: PASS" in text and "the reference needs" not in text, text
