"""KernelBench-format problem files of this repository's own (KernelBench's files never enter it), for
the LLM path's prompts and end-to-end runs: a strided, padded 2-D convolution with a bias; a sum over
one dimension; a GEMM with an epilogue (Linear, scale, GroupNorm); a padded, dilated 1-D max pool
(KernelBench level 1's 41, whose output length is `L - 13`); a whole MLP whose hidden widths are a list
(KernelBench level 3's 1: three GEMMs, its output `[x[0], network_4_weight[0]]`). Small sizes: the CPU interpreter
runs their kernels.

`CONV2D_KERNEL` is a real Triton implicit-GEMM kernel for CONV2D (tests/support/data/conv2d_strided_kernel.py);
`conv2d_wrong_kernel()` is the same kernel without the padding offset: it compiles, runs, and is wrong
at the borders."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import DATA

CONV2D = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A 2-D convolution with stride 2 and padding 1, and a bias."""
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.conv(x)

batch_size = 4
in_channels = 3
out_channels = 32
kernel_size = 3
stride = 2
padding = 1
height = 64
width = 48

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
'''

ROW_SUM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Sums over one dimension, keeping it."""
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)

batch_size = 64
dim1 = 512
dim2 = 384
reduce_dim = 1

def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]

def get_init_inputs():
    return [reduce_dim]
'''

GEMM_EPILOGUE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Linear, then a scale, then GroupNorm."""
    def __init__(self, in_features, out_features, scale, num_groups):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = scale
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        return self.group_norm(self.gemm(x) * self.scale)

batch_size = 256
in_features = 1024
out_features = 512
scale = 0.5
num_groups = 8

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, scale, num_groups]
'''

MAX_POOL1D = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Max Pooling 1D with padding and dilation: KernelBench level 1's 41, at smaller sizes."""
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1, return_indices: bool = False):
        super().__init__()
        self.maxpool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                                    return_indices=return_indices)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.maxpool(x)

batch_size = 2
features = 3
sequence_length = 1024

kernel_size = 8
stride = 1
padding = 4
dilation = 3
return_indices = False

def get_inputs():
    x = torch.rand(batch_size, features, sequence_length)
    return [x]

def get_init_inputs():
    return [kernel_size, stride, padding, dilation, return_indices]
'''

MLP = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A whole MLP: KernelBench level 3's 1, at smaller sizes; its hidden widths come as a list."""
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)

batch_size = 128
input_size = 2048
layer_sizes = [2048, 2048]
output_size = 1024

def get_inputs():
    return [torch.rand(batch_size, input_size)]

def get_init_inputs():
    return [input_size, layer_sizes, output_size]
'''

PROBLEMS = {"conv2d_strided": CONV2D, "row_sum_dim": ROW_SUM, "gemm_scale_groupnorm": GEMM_EPILOGUE, "max_pool1d": MAX_POOL1D,
            "mlp": MLP}


def write_problem(folder: Path, stem: str) -> Path:
    path = Path(folder) / f"{stem}.py"
    path.write_text(PROBLEMS[stem], encoding="utf-8")
    return path


def conv2d_kernel() -> str:
    return (DATA / "conv2d_strided_kernel.py").read_text(encoding="utf-8")


def conv2d_wrong_kernel() -> str:
    """Forgets the padding: every output near the top and left edges reads the wrong input rows."""
    src = conv2d_kernel()
    assert src.count(" - PADDING + ") == 2
    return src.replace(" - PADDING + ", " + ")


def max_pool1d_kernel() -> str:
    """A Triton max pool for MAX_POOL1D (kernel 8, stride 1, padding 4, dilation 3): the window's
    out-of-range positions load -inf."""
    return (DATA / "max_pool1d_kernel.py").read_text(encoding="utf-8")


def max_pool1d_zero_padded_kernel() -> str:
    """The same kernel padding with 0 instead of -inf: right wherever a window holds a non-negative
    value, so right on every `torch.rand` draw, and wrong at the edges of negative data."""
    src = max_pool1d_kernel()
    assert src.count('other=float("-inf")') == 1
    return src.replace('other=float("-inf")', "other=0.0")
