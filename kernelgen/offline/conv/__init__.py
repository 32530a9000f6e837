"""The convolution family (family.py): forward and transposed convolutions over 1-3 spatial dims --
any stride, padding, dilation and groups; depthwise as a direct kernel -- with the chain after them,
as a program of stages (kernelgen.offline.stages) whose first is the convolution (emit.py: an implicit
GEMM with the per-element and per-channel chain as its epilogue; reductions over pixels or channels
as later stages). 1x1 convolutions with stride 1 stay batched matmuls in the nd family.

    emit.py      the convolution stage's kernel text
    stage.py     what the family adds to the stage engine: that kernel, its plan, launch model, description

    knobs.py     the family's knobs: the convolution's tiles and form, the later stages' tiles
    pruning.py   which knob values are worth timing: tensor-core multiples, shared memory, registers,
                 programs per SM (the convolution's launch model: kernelgen.offline.launch.conv_tiles)
    family.py    the family's face (kernelgen.offline.family)
"""
