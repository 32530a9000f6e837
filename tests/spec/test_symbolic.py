"""Output shapes derived symbolically from the reference and checked on every case; the sizes a problem
fixes; the module's hyper-parameters. A square convolution whose C_out happens to equal H - 2 in the
test case must still get `x[2] - conv2d_weight[2] + 1`, not `conv2d_weight[0]`."""

from __future__ import annotations

import pytest

from kernelgen.spec import load_spec, validate_spec_data
from kernelgen.spec.fixedsizes import fixed_sizes
from kernelgen.spec.given import read_spec
from kernelgen.spec.hyperparams import module_constants
from kernelgen.spec.outshapes import output_shapes
from kernelgen.spec.symbolic import trace_reference
from tests.support.llm_problems import write_problem

SQUARE_CONV = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x):
        return self.conv2d(x)

batch_size = 16
in_channels = 16
out_channels = 128
kernel_size = 3
height = 130
width = 130

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''


def _spec(**fields):  # noqa: ANN003, ANN202
    data = {"name": "op", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}], "dtypes": ["float32"],
            "test_cases": [{"x": [4, 33]}]}
    data.update(fields)
    return validate_spec_data(data)


def test_a_square_convolution_gets_its_rule_not_a_coincidence(tmp_path):
    # out_channels 128 = height - 2 at KernelBench's sizes: a guess from one case reads out[2] as conv2d_weight[0]
    path = tmp_path / "square_conv.py"
    path.write_text(SQUARE_CONV)
    spec = read_spec(path).spec
    (out,) = output_shapes(spec)
    assert out.derived and out.dims == ["x[0]", "conv2d_weight[0]", "x[2] - conv2d_weight[2] + 1", "x[3] - conv2d_weight[3] + 1"]
    assert out.at_perf == [[16, 128, 128, 128]]
    trace = trace_reference(spec)
    assert trace.ops == ["convolution"] and ("conv2d_weight[1]", "x[1]") in trace.equal
    # the channel counts reach the Model's constructor (the derivation's fixed_dims: the judge keeps them);
    # the kernel size is named for what it is
    assert [(f.label, f.value, f.why) for f in fixed_sizes(spec)] == [
        ("x[1]", 16, "the spec's fixed_dims"), ("conv2d_weight[0]", 128, "the spec's fixed_dims"),
        ("conv2d_weight[1]", 16, "the spec's fixed_dims"),
        ("conv2d_weight[2]", 3, "`conv2d`'s kernel_size"), ("conv2d_weight[3]", 3, "`conv2d`'s kernel_size")]
    (conv,) = module_constants(spec)
    assert conv.path == "conv2d" and conv.fixed["stride"] == "(1, 1)" and conv.fixed["kernel_size"] == "(3, 3)"
    assert conv.sizes == {"in_channels": "16", "out_channels": "128"} and "output_padding" not in conv.fixed


def test_strided_padded_convolution_rule_at_the_perf_case(tmp_path):
    spec = read_spec(write_problem(tmp_path, "conv2d_strided")).spec
    (out,) = output_shapes(spec)
    assert out.dims == ["x[0]", "conv_weight[0]", "(x[2] - conv_weight[2]) // 2 + 2", "(x[3] - conv_weight[3]) // 2 + 2"]
    assert out.at_perf == [[4, 32, 32, 24]]


def test_pinned_sizes_and_draw_ranges_are_fixed_others_are_not():
    norm = _spec(reference="def op(x):\n    return F.layer_norm(x, (64,))\n", test_cases=[{"x": [3, 64]}, {"x": [7, 64]}],
                 perf_cases=[{"x": [4096, 64]}])
    assert [(f.label, f.value, f.why) for f in fixed_sizes(norm)] == [("x[1]", 64, "the reference requires it")]
    ce = _spec(inputs=[{"name": "x"}, {"name": "t", "dtype": "int64", "init": "randint(0, 10)"}],
               reference="def op(x, t):\n    return F.cross_entropy(x, t)\n", test_cases=[{"x": [7, 10], "t": [7]}],
               perf_cases=[{"x": [4096, 10], "t": [4096]}])
    assert [(f.label, f.value) for f in fixed_sizes(ce)] == [("x[1]", 10)]
    assert output_shapes(ce)[0].rule == "[] (a 0-dim tensor)"


def test_cases_of_different_ranks_share_a_rule_in_words():
    spec = load_spec("operator_specs/row_mean.yaml", run_reference=False)
    (out,) = output_shapes(spec)
    assert out.derived and out.rule == "`x`'s shape with its last dimension 1" and out.at_perf == [[32768, 1]]


def test_a_data_dependent_shape_is_not_given_a_rule():
    from kernelgen.llm.specfacts import output_facts

    spec = _spec(reference="def op(x):\n    return x[x > 0]\n", test_cases=[{"x": [4, 33]}, {"x": [2, 5]}])
    with pytest.raises(Exception):  # noqa: B017 - not even the meta run can say
        output_shapes(spec)
    (fact,) = output_facts(spec)
    assert fact.shape.startswith("not derivable on meta tensors")


def test_a_rule_traced_on_one_branch_is_not_stated_for_cases_of_the_other():
    spec = _spec(reference="def op(x):\n    return x[:, :8] if x.shape[1] > 8 else x\n",
                 test_cases=[{"x": [4, 32]}, {"x": [2, 6]}], perf_cases=[{"x": [64, 64]}])
    (out,) = output_shapes(spec)
    assert not out.derived and out.rule == "[4, 8] in test case 0; [2, 6] in test case 1", out
    assert "no rule over the input sizes reproduces every case" in out.note


def test_a_divisor_that_is_an_expression_is_parenthesised():
    spec = _spec(reference="def op(x):\n    return x.reshape(-1, 4)\n", test_cases=[{"x": [4, 32]}, {"x": [2, 6]}],
                 perf_cases=[{"x": [64, 64]}])
    (out,) = output_shapes(spec)
    assert out.derived and out.dims == ["x[0]*x[1] // 4", "x[0]*x[1] // (x[0]*x[1] // 4)"], out
