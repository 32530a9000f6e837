# EXPECT: no-triton-kernel
# Hostile: PyTorch only, no Triton at all.
import torch


def broadcast(x, bias):
    return x + bias
