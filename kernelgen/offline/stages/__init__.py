"""The stage engine: a reference's IR (kernelgen.offline.frontend) as a program of kernel launches, the
one engine the nd and conv families write their files with.

    schedule.py   the IR cut into stages and the buffers between them            -> program.Program
    frames.py     where each value of a stage lives in its frame; which dims merge
    access.py     how a stage's kernel names its loads and stores
    emit_tile.py  kernels of pointwise, reduce (emit_reduce.py, split forms: emit_split.py) and scan stages
    emit_matmul.py  kernels of matmul stages; emit_epilogue.py the chain fused after a matmul or another anchor
    anchors.py    stage kinds a family brings (the conv family's convolution: kernelgen.offline.conv.stage)
    analysis.py   the program and its kernels, once per spec
    launch.py     what a knob setting launches per stage at a case (a model of the file's _tile_config)
    cases.py      one case a setting is judged at, in words and against the budgets (pruning, round 0)
    host.py       the wrapper's plan, as data for templates/offline/stages.py.j2
    file.py       the file
"""
