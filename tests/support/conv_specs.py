"""Convolution specs the conv family serves, one list per kind (the kinds KernelBench's 97 convolution
problems contain). Sizes are awkward on purpose: odd spatial dims, channel counts no tile divides (37
input channels: a BLOCK_K loop with a masked tail), a stride larger than the kernel, dilation with
padding, asymmetric padding (F.pad before the convolution, and padding='same' with an even kernel)."""

from __future__ import annotations

from kernelgen.spec import OperatorSpec
from tests.support.offline_check import make_spec


def _spec(name: str, inputs: str, body: str, cases: list, init: dict | None = None, **fields) -> OperatorSpec:
    names = inputs.split()
    fields.setdefault("dtypes", ["float32", "float16", "bfloat16"])
    ins = [{"name": n, **({"init": init[n]} if init and n in init else {})} for n in names]
    return make_spec(name=name, inputs=ins, reference=f"def {name}({', '.join(names)}):\n{body}\n", test_cases=cases,
                     **fields)


# kind -> specs; the first of each kind is its snapshot (tests/offline/snapshots/conv_<kind>_<name>.py)
KINDS: dict[str, list[OperatorSpec]] = {
    "forward2d": [
        _spec("conv2d_bias_relu", "x w b", "    return torch.relu(F.conv2d(x, w, b, stride=2, padding=1))",
              [{"x": [2, 3, 9, 11], "w": [5, 3, 3, 3], "b": [5]}]),
        _spec("conv2d_many_channels", "x w", "    return F.conv2d(x, w, padding=1)", [{"x": [1, 37, 6, 7], "w": [19, 37, 3, 3]}]),
        _spec("conv2d_stride_over_kernel", "x w", "    return F.conv2d(x, w, stride=3)", [{"x": [2, 3, 11, 10], "w": [5, 3, 2, 2]}]),
        _spec("conv2d_dilated_padded", "x w", "    return F.conv2d(x, w, padding=(2, 4), dilation=(2, 3))",
              [{"x": [2, 4, 9, 13], "w": [6, 4, 3, 5]}]),
        _spec("conv2d_asym_pad", "x w", "    return F.conv2d(F.pad(x, (1, 2, 0, 3)), w)", [{"x": [2, 3, 7, 8], "w": [5, 3, 3, 3]}]),
        _spec("conv2d_same_even", "x w", "    return F.conv2d(x, w, padding='same')", [{"x": [2, 3, 7, 8], "w": [5, 3, 2, 4]}]),
        _spec("conv2d_pointwise_strided", "x w", "    return F.conv2d(x, w, stride=2)", [{"x": [2, 5, 9, 7], "w": [6, 5, 1, 1]}]),
    ],
    "forward1d": [
        _spec("conv1d_dilated_strided", "x w", "    return F.conv1d(x, w, stride=3, padding=2, dilation=2)",
              [{"x": [2, 5, 23], "w": [7, 5, 3]}]),
    ],
    "forward3d": [
        _spec("conv3d_asym", "x w b", "    return F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1))",
              [{"x": [2, 3, 5, 7, 6], "w": [4, 3, 3, 2, 3], "b": [4]}]),
    ],
    "grouped": [
        _spec("conv2d_groups", "x w b", "    return F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=3)",
              [{"x": [2, 6, 9, 10], "w": [9, 2, 3, 2], "b": [9]}]),
    ],
    "depthwise": [
        _spec("depthwise2d", "x w", "    return F.conv2d(x, w, stride=2, padding=1, groups=x.shape[1])",
              [{"x": [2, 6, 9, 11], "w": [6, 1, 3, 3]}]),
        _spec("depthwise_multiplier", "x w b", "    return F.conv2d(x, w, b, padding=(0, 2), groups=3)",
              [{"x": [2, 3, 9, 11], "w": [6, 1, 3, 5], "b": [6]}]),
    ],
    "transposed": [
        _spec("conv_transpose2d_groups", "x w b",
              "    return F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2), output_padding=(1, 0), groups=2, "
              "dilation=(2, 1))", [{"x": [2, 4, 5, 6], "w": [4, 3, 3, 5], "b": [6]}]),
        _spec("conv_transpose1d", "x w", "    return F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1, dilation=2)",
              [{"x": [2, 4, 9], "w": [4, 3, 3]}]),
        _spec("conv_transpose3d", "x w", "    return F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1)",
              [{"x": [1, 3, 3, 4, 5], "w": [3, 5, 3, 3, 3]}]),
        _spec("conv_transpose2d_stride1", "x w", "    return F.conv_transpose2d(x, w)", [{"x": [2, 5, 6, 7], "w": [5, 4, 3, 3]}]),
    ],
    "chain": [
        # conv -> per-element and per-channel ops (one stage) -> a group norm (a second)
        _spec("conv_relu_group_norm", "x w b gw gb", "    return F.group_norm(torch.relu(F.conv2d(x, w, b)) * 2.0, 2, gw, gb)",
              [{"x": [2, 3, 9, 8], "w": [6, 3, 3, 3], "b": [6], "gw": [6], "gb": [6]}]),
        # eval-mode batch norm, clamp and a residual add: all per-channel or per-element, one stage
        _spec("conv_transpose_bn_eval", "x w b g bb rm rv",
              "    y = F.conv_transpose2d(x, w, b, stride=2)\n"
              "    return torch.clamp(F.batch_norm(y, rm, rv, g, bb, training=False), min=-1.0) + y",
              [{"x": [2, 4, 5, 5], "w": [4, 3, 3, 3], "b": [3], "g": [3], "bb": [3], "rm": [3], "rv": [3]}],
              init={"rv": "uniform(0.5, 1.5)"}),
        _spec("conv3d_softmax_channels", "x w b", "    return torch.sigmoid(torch.softmax(F.conv3d(x, w, b), dim=1) * 2.0)",
              [{"x": [2, 3, 5, 6, 5], "w": [7, 3, 3, 3, 3], "b": [7]}]),
        _spec("conv_pool_mean", "x w b", "    return F.max_pool2d(torch.tanh(F.conv2d(x, w, b) - 0.5), 2).mean(dim=(2, 3))",
              [{"x": [2, 3, 11, 10], "w": [5, 3, 3, 3], "b": [5]}]),
        _spec("conv_min_channels", "x w b", "    return torch.tanh(torch.min(F.conv2d(x, w, b), dim=1, keepdim=True)[0])",
              [{"x": [2, 3, 8, 9], "w": [5, 3, 3, 3], "b": [5]}]),
    ],
}
ALL = {s.name: s for specs in KINDS.values() for s in specs}
# how many launches each chain is: its per-element and per-channel ops fused into the convolution's
# epilogue, a reduction over pixels or channels a later stage
CHAIN_STAGES = {"conv_relu_group_norm": 2, "conv_transpose_bn_eval": 1, "conv3d_softmax_channels": 2,
                "conv_pool_mean": 3, "conv_min_channels": 2}
