"""Drawing an operator's inputs the way its spec says (each input's `init` and dtype).

The one definition of what `init: randint(0, 100)` means, shared by the trusted judge (fresh inputs
for every check) and the offline tracer (which must see the values a kernel will be checked on,
such as integer ranges and masks).
"""

from __future__ import annotations

from typing import Any

from kernelgen.spec.init import draw_init, parse_init
from kernelgen.spec.model import DTYPES, OperatorSpec
from kernelgen.spec.shapes import Case


def torch_dtype(name: str) -> Any:
    """The torch dtype a spec's dtype name stands for ("bfloat16" -> torch.bfloat16)."""
    import torch

    return getattr(torch, DTYPES[name])


def draw_inputs(spec: OperatorSpec, case: Case, dtype: str, seed: int, device: str, *, on_device: bool = False) -> list[Any]:
    """Fresh inputs for one case, drawn per each input's `init`. Small cases are drawn on the CPU so
    the same seed gives the same numbers on every device; large (perf) ones on the device."""
    import torch

    gen_device = device if on_device else "cpu"
    g = torch.Generator(device=gen_device)
    g.manual_seed(seed)
    out = []
    for inp in spec.inputs:
        t = draw_init(parse_init(inp.init), case[inp.name], g, gen_device)
        out.append(t.to(dtype=torch_dtype(spec.input_dtype(inp, dtype)), device=device))
    return out
