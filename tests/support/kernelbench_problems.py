"""KernelBench-format problem files the tests write (KernelBench's own files never enter the repository)."""

RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 64
dim = 3000

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
'''

LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Gemm, scale, LeakyReLU."""
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)

batch_size = 64
in_features  = 96
out_features = 80
multiplier = 2.0
negative_slope = 0.1

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
'''

SCALAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a matrix-scalar multiplication (C = A * s)"""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s

M = 1024
N = 512

def get_inputs():
    A = torch.rand(M, N)
    s = 3.14
    return [A, s]

def get_init_inputs():
    return []
'''

LAYERNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs Layer Normalization."""
    def __init__(self, normalized_shape: tuple):
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)

batch_size = 16
features = 20
dim1 = 96
dim2 = 96

def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [(features, dim1, dim2)]
'''

# --- the judge's corpus (issue 28): sizes the module fixes, couplings of the draws, the arena ----------
# GroupNorm at batch 2, not KernelBench's 16: what its tests hold is the channels and groups the module
# fixes (64 in 8); the batch is a free size, which the test case keeps as it is. At 16 the interpreter ran
# 8x the programs: its build took 152 s of CPU (122 s alone on a quiet machine), at 2 it takes 32 s.
GROUPNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Group Normalization."""
    def __init__(self, num_features: int, num_groups: int):
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)

batch_size = 2
features = 64
num_groups = 8
dim1 = 256
dim2 = 256

def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]

def get_init_inputs():
    return [features, num_groups]
'''

BATCHNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Batch Normalization, in training mode as KernelBench evaluates it."""
    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)

batch_size = 16
features = 64
dim1 = 256
dim2 = 256

def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]

def get_init_inputs():
    return [features]
'''

GEMM_GROUPNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Linear with fixed features, then GroupNorm: 32 groups of 16 channels."""
    def __init__(self, in_features, out_features, num_groups):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=out_features)

    def forward(self, x):
        return torch.relu(self.gn(self.fc(x)))

batch_size = 1024
in_features = 128
out_features = 512
num_groups = 32

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, num_groups]
'''

CROSS_ENTROPY = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Cross entropy over integer class targets."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)

batch_size = 4096
num_classes = 1000

def get_inputs():
    return [torch.rand(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]

def get_init_inputs():
    return []
'''

SQUARE_INPUT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """An activation on a square 4-D input: renaming its equal spatial dims above 1024 makes a case of
    hundreds of MB, past the worker's transfer arena."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x) * 2.0

batch_size = 16
channels = 3
size = 1024

def get_inputs():
    return [torch.rand(batch_size, channels, size, size)]

def get_init_inputs():
    return []
'''
