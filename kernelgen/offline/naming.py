"""Kernel-side names for a spec's inputs, outputs and params, clear of the generator's own locals."""

from __future__ import annotations

from kernelgen.spec import OperatorSpec

RESERVED = {
    "pid", "pid_r", "pid_c", "rows", "cols", "mask", "row_mask", "col_mask", "offs", "start", "n_rows",
    "n_inner", "n_cols", "outer", "inner", "tl", "triton", "torch", "math", "functools", "acc", "a", "b",
    "M", "N", "K", "grid", "shape", "frame", "strides", "n_outer", "block_r", "block_c", "block", "num_warps",
    "num_stages", "single_pass", "bm", "bn", "bk", "group", "precision", "result", "offs_m", "offs_n", "offs_k", "k", "typing", "n_elements",
    "BLOCK_R", "BLOCK_C", "BLOCK_SIZE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "SINGLE_PASS",
}


def _free(name: str, taken: set[str]) -> str:
    out = name
    while out in RESERVED or out in taken or out.startswith("v") and out[1:].isdigit():
        out = out + "_"
    taken.add(out)
    return out


class Names:
    def __init__(self, spec: OperatorSpec):
        taken: set[str] = {p.name for p in spec.params} | set(spec.input_names)
        self.inputs = list(spec.input_names)  # the wrapper's parameters and the *_ptr names
        # kernel-local variables holding loaded values: clear of the kernel's own locals
        self.values = [i.name if i.name not in RESERVED else _free(i.name + "_val", taken) for i in spec.inputs]
        self.outputs = [_free(o.name if o.name not in spec.input_names else o.name + "_out", taken)
                        for o in spec.outputs]
