"""The n-dimensional family: what the classic families (pointwise over a broadcast frame, one
reduction over the last dim, a 2-D matmul with a pointwise epilogue) refuse, within reductions over
any dims (argmax, prod, p-norms, down to a scalar), normalizations over any dims (layer, group,
batch, instance, RMS), losses, scans (cumsum, cumprod, reversed, exclusive, masked), pooling,
attention, batched and n-D matmuls with epilogues (diag, triu/tril, bias, activations, row reductions
and norms after them), as a program of stages written by the stage engine (kernelgen.offline.stages).

    knobs.py      the family's knobs
    pruning.py    which knob values are worth timing (the engine's launch model against the budgets)
    round0.py     round 0's choices per perf case from the analysis
    family.py     the family's face (kernelgen.offline.family)
"""
