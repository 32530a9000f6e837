"""A KernelBench-format problem (level-2 style, written for KernelGen's benchmarks): a GEMM with a
bias, then a scale and a ReLU fused after it. 1024 x 4096 @ 4096 x 4096 in float32: 34 GFLOP, the
epilogue free if fused."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear (with bias), multiply by a constant, ReLU."""

    def __init__(self, in_features, out_features, scale):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.linear(x) * self.scale)


batch_size = 1024
in_features = 4096
out_features = 4096
scale = 0.5


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
