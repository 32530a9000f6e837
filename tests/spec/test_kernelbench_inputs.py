"""What a derived spec makes of a problem's less plain inputs: a number get_inputs() passes to forward
(a spec param), and dims the module fixes (a LayerNorm's shape: kept at KernelBench's size, or the
module built again at shrunk sizes where keeping them would be too large)."""

import math
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from kernelgen.errors import ProblemFileError
from kernelgen.spec import draw_inputs, load_reference
from kernelgen.spec.kernelbench import derive_spec
from kernelgen.spec.kernelbench.shrink import HARD_CAP, KEPT_CAP
from tests.support.kernelbench_problems import LAYERNORM, SCALAR


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# --- a number from get_inputs() ------------------------------------------------------------------
def test_a_float_from_get_inputs_is_a_param_passed_in_its_place(tmp_path):
    derived = derive_spec(write(tmp_path, SCALAR, "level1/5_Matrix_scalar_multiplication.py"))
    spec = derived.spec
    assert [i.name for i in spec.inputs] == ["A"]
    assert [(p.name, p.type, p.default) for p in spec.params] == [("s", "float", 3.14)]
    assert "def kb1_5_matrix_scalar_multiplication(A, s=3.14):" in spec.reference and "_MODEL(A, s)" in spec.reference
    assert "# get_inputs() passes 3.14" in derived.text
    assert yaml.safe_load(derived.text)["params"] == [{"name": "s", "type": "float", "default": 3.14}]
    a = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")[0]
    fn = load_reference(spec)
    torch.testing.assert_close(fn(a), a * 3.14)
    torch.testing.assert_close(fn(a, s=-2.0), a * -2.0)  # the param reaches forward, not a baked constant


def test_a_drawn_number_takes_the_problems_constant(tmp_path):
    text = SCALAR.replace("import torch\n", "import random\nimport torch\n", 1).replace(
        "    s = 3.14\n", "    s = random.uniform(0.5, 1.5)\n").replace("N = 512\n", "N = 512\ns = 0.75\n")
    derived = derive_spec(write(tmp_path, text, "level1/5_Scaled.py"))
    assert [(p.name, p.default) for p in derived.spec.params] == [("s", 0.75)]
    assert "draws it anew each call" in derived.text and "the problem's constant `s = 0.75` is used" in derived.text
    with pytest.raises(ProblemFileError, match=r"draws input 1 \(`s`\) anew each call .* no module-level constant `s`"):
        derive_spec(write(tmp_path, text.replace("s = 0.75\n", ""), "level1/5_Drawn.py"))


# --- dims the module fixes -------------------------------------------------------------------------
def test_layernorm_over_three_dims_keeps_them_and_shrinks_the_batch(tmp_path):
    spec = derive_spec(write(tmp_path, LAYERNORM, "level1/40_LayerNorm.py")).spec
    assert spec.perf_cases == [{"x": [16, 20, 96, 96], "ln_weight": [20, 96, 96], "ln_bias": [20, 96, 96]}]
    # 16 rows of 20x96x96 = 184,320 elements (2.9M) are above HARD_CAP, and a batch of 16 counts as a
    # structural size, so no case shrinks by value; the normalized dims stay and the batch goes down to 2
    assert 16 * 20 * 96 * 96 > HARD_CAP
    assert spec.test_cases == [{"x": [2, 20, 96, 96], "ln_weight": [20, 96, 96], "ln_bias": [20, 96, 96]}]
    assert "_SIZED" not in spec.reference
    x, w, b = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")
    torch.testing.assert_close(load_reference(spec)(x, w, b), torch.nn.functional.layer_norm(x, (20, 96, 96), w, b))


def test_a_module_fixing_too_many_dims_is_built_again_at_shrunk_sizes(tmp_path):
    text = LAYERNORM.replace("features = 20", "features = 192").replace("dim1 = 96", "dim1 = 256").replace(
        "dim2 = 96", "dim2 = 256")
    assert 192 * 256 ** 2 > KEPT_CAP  # one normalized row is already more than a kept case may hold
    spec = derive_spec(write(tmp_path, text, "level1/40_Huge.py")).spec
    assert spec.perf_cases[0]["x"] == [16, 192, 256, 256]
    for case in spec.test_cases:  # the normalized dims shrink with get_init_inputs()'s, equal ones equal
        _, f, d1, d2 = case["x"]
        assert case["ln_weight"] == [f, d1, d2] and d1 == d2 != f and math.prod(case["x"]) < HARD_CAP
    assert "_SIZED = {" in spec.reference and "_model(ln_weight, ln_bias)" in spec.reference
    fn = load_reference(spec)
    for case in spec.test_cases:
        x, w, b = draw_inputs(spec, case, "float32", 0, "cpu")
        torch.testing.assert_close(fn(x, w, b), torch.nn.functional.layer_norm(x, tuple(w.shape), w, b))
    meta = [torch.empty(s, device="meta") for s in spec.perf_cases[0].values()]
    assert fn(*meta).shape == (16, 192, 256, 256)  # KernelBench's own module at the perf case
    with pytest.raises(ValueError, match="no Model built for parameters and buffers of shapes"):
        fn(*[torch.empty(s, device="meta") for s in ([2, 3, 4, 5], [3, 4, 5], [3, 4, 5])])


# --- cases small in arithmetic too -------------------------------------------------------------------
CONV_TRANSPOSE_3D = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x):
        return self.conv_transpose3d(x)

batch_size = 16
in_channels = 32
out_channels = 16
kernel_size = (3, 5, 7)
depth_in = 16
height_in = 32
width_in = 64

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth_in, height_in, width_in)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''


def _work(spec, case):
    from kernelgen.spec.kernelbench.extents import case_work

    fn = load_reference(spec)
    return case_work(lambda: fn(*[torch.empty(s, device="meta") for s in case.values()]))


def test_a_convolution_case_is_small_in_multiply_adds_not_only_in_elements(tmp_path):
    """KernelBench's level 1's 58: the channels reach get_init_inputs() and are held, and a batch of 16
    counted as structural, so its case was x[16, 32, 16, 3, 5] -- 122,880 elements, 206 M multiply-adds,
    74 s for one call of its kernel in the interpreter, and `kernelgen new` past 10 minutes on 2 cores.
    Each case now keeps the channels and the kernel and goes under its budget of multiply-adds and of
    the largest tensor an op makes."""
    from kernelgen.spec.kernelbench.shrink import WORK_BUDGETS

    spec = derive_spec(write(tmp_path, CONV_TRANSPOSE_3D, "level1/58_conv_transposed_3D.py")).spec
    assert spec.perf_cases[0]["x"] == [16, 32, 16, 32, 64]
    before = _work(spec, {"x": [16, 32, 16, 3, 5], "w": [32, 16, 3, 5, 7]})  # the case it had
    assert before.macs > 2e8 and before.largest > 3e5
    assert len(spec.test_cases) == 2
    for case in spec.test_cases:
        assert case["x"][1] == 32 and case["conv_transpose3d_weight"] == [32, 16, 3, 5, 7], case
        assert min(case["x"]) >= 2, case  # never a size 1: the trace would take it for a constant
    first, second = (_work(spec, case) for case in spec.test_cases)
    macs, largest = WORK_BUDGETS[0]
    assert first.macs <= macs and first.largest <= largest, (spec.test_cases[0], first)
    # the second is smaller again (its own budget is below what 2x2x2 through a 3x5x7 kernel makes)
    assert second.macs <= first.macs and second.largest <= first.largest and spec.test_cases[0] != spec.test_cases[1]
    x, w = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")
    torch.testing.assert_close(load_reference(spec)(x, w), torch.nn.functional.conv_transpose3d(x, w))


POOLED = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, pool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.maxpool = nn.MaxPool3d(kernel_size=pool_kernel_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, x):
        return self.global_avg_pool(self.maxpool(self.conv_transpose(x) * 0.5))

batch_size = 16
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
pool_kernel_size = 2

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, pool_kernel_size]
'''


def test_a_lighter_case_never_pools_a_dim_down_to_one(tmp_path):
    """Shrinking a pooled chain's input toward 2 would pool a dim to 1, which the trace takes for a
    constant ('a trace that fixes x.shape[2] to 2', level 2's 96): no op of a case may make a size-1
    dim where the case it was shrunk from had more, and the generator serves every case."""
    from kernelgen.offline import route

    spec = derive_spec(write(tmp_path, POOLED, "level2/1096_ConvTranspose3d_MaxPool.py")).spec
    perf = _work(spec, spec.perf_cases[0])
    for case in spec.test_cases:  # the global pool's 1x1x1 is the perf case's too
        assert _work(spec, case).keeps_sizes_of(perf), (case, _work(spec, case).shapes, perf.shapes)
    assert route(spec).family.name == "conv"
