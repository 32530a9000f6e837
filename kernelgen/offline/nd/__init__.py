"""The n-dimensional generator: what the classic families (pointwise over a broadcast frame, one
reduction over the last dim, a 2-D matmul with a pointwise epilogue) refuse, within reductions over
any dims (argmax, prod, p-norms, down to a scalar), normalizations over any dims (layer, group,
batch, instance, RMS), losses, scans (cumsum, cumprod, reversed, exclusive, masked), batched and
n-D matmuls with epilogues (diag, triu/tril, bias, activations, row reductions and norms after
them), as a program of stages.

    (the trace and the IR are the front end's: kernelgen.offline.frontend)
    schedule.py   the IR cut into stages and the buffers between them            -> stages.Program
    frames.py     where each value of a stage lives in its frame; which dims merge
    access.py     how a stage's kernel names its loads and stores
    emit_tile.py  kernels of pointwise, reduce (emit_reduce.py) and scan stages
    emit_matmul.py  kernels of matmul stages
    host.py       the wrapper's plan, as data for templates/offline/nd.py.j2
    program.py    the file
    knobs.py      the family's knobs
    family.py     the family's face (kernelgen.offline.family)
"""
