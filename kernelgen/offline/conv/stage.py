"""What the conv family adds to the stage engine (kernelgen.offline.stages.anchors): a convolution
stage's kernel (conv/emit.py), the data its plan in templates/offline/conv.py.j2 takes, its launch at
a case as the generated _conv_launch works it out, and its description."""

from __future__ import annotations

import math
from typing import Any

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.launch import ConvTiles, cdiv, conv_tiles
from kernelgen.offline.conv.emit import ConvKernel, conv_kernel
from kernelgen.offline.stages.anchors import AnchorKind
from kernelgen.offline.stages.host import access_literal, dtype_of, py, py_shape
from kernelgen.offline.stages.launch import size_at
from kernelgen.offline.stages.program import Access, Program, Stage, StageKnobs, StageLaunch


def conv_plan(g: Graph, prog: Program, st: Stage, k: ConvKernel) -> dict[str, Any]:
    """A convolution stage's operands and geometry, as the plan's _conv_launch takes them."""
    a = g[st.anchor].attrs
    geometry = "(" + ", ".join(py_shape(a[k]) for k in ("stride", "padding", "dilation")) + ")"
    return {"operands": [access_literal(Access(o.buffer, o.views, ())) for o in st.operands],
            "operand_buffers": [o.buffer for o in st.operands],
            "operand_dtypes": [dtype_of(prog, o.buffer) for o in st.operands],
            "moves": list(k.moves), "form": k.form, "geometry": geometry, "conv_groups": py(a["groups"]),
            "epilogue": k.epilogue}


def conv_launch(g: Graph, st: Stage, kernel: ConvKernel, knobs: StageKnobs, binding: dict[str, int], fp32: bool) -> StageLaunch:
    """A convolution stage's tiles at a case, as the generated _conv_launch works them out."""
    v = g[st.anchor]
    x, w = ([size_at(d, binding) for d in g[a].shape] for a in v.args)
    outs = [size_at(d, binding) for d in st.frame]
    groups, stride, form = size_at(v.attrs["groups"], binding), v.attrs["stride"], kernel.form
    if form == "transposed":
        rows = outs[0] * math.prod(cdiv(o, s) for o, s in zip(outs[2:], stride))
    else:
        rows = outs[0] * math.prod(outs[2:])
    cols = outs[1] if form == "direct" else outs[1] // groups
    grid_y = 1 if form == "direct" else groups * (math.prod(stride) if form == "transposed" else 1)
    one = form != "direct" and one_tf32(fp32, getattr(knobs, "tf32", None))
    ct: ConvTiles = conv_tiles(knobs, form, rows, cols, x[1] // groups, math.prod(w[2:]), grid_y, fp32, one,
                               kernel.epilogue)
    return StageLaunch(st.id, "conv", tiles=ct.tiles, mnk=(ct.rows, ct.cols, ct.k), conv=ct)


def one_tf32(fp32: bool, knob: bool | None) -> bool:
    """Whether the file's convolutions take one TF32 product here, as kernelgen.runtime.v1.conv_precision
    decides: fp32 where the precision policy in force allows TF32 for convolutions (the judge sets cuDNN's
    switch from it where the kernel runs; this process's own switch is PyTorch's default, whatever
    --precision said), on an NVIDIA GPU (knob None) or anywhere (knob True). The file decides per call on
    its tensors' device; this models the machine's default one."""
    from kernelgen.precision import conv_tf32_enabled

    if not fp32 or knob is False or not conv_tf32_enabled():
        return False
    import torch  # callers already judge cases with torch loaded

    return knob is True or (torch.cuda.is_available() and torch.version.hip is None)


def conv_describe(g: Graph, st: Stage) -> str:
    frame = ", ".join(py(d) for d in st.frame)
    a = g[st.anchor].attrs
    what = ("transposed " if a["transposed"] else "") + f"{a['n']}-D convolution"
    geo = ", ".join(f"{k}={py_shape(a[k])}" for k in ("stride", "padding", "dilation"))
    return f"{what} [{frame}] ({geo}, groups={py(a['groups'])}) with its epilogue"


CONV_STAGE = AnchorKind("conv", conv_kernel, conv_plan, conv_launch, conv_describe)
