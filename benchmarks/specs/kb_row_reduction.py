"""A KernelBench-format problem (level-1 style, written for KernelGen's benchmarks): the sum of each
row of a 8192 x 8192 float32 matrix. Reads 256 MiB, writes 32 KiB: bound by read bandwidth."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over one dimension."""

    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


rows = 8192
cols = 8192


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return [1]
