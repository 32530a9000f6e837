"""The generated wrappers' own Python per call, with Triton's launch replaced by a no-op (no GPU needed).

    python benchmarks/host_path.py [--calls 5000] [--specs broadcast softmax ...]

Each example spec's offline kernel is imported with Triton's JIT (not the interpreter), and
`JITFunction.run` -- what `kernel[grid](...)` ends in -- is replaced by a function that returns at
once, so what is timed is the wrapper: its shape analysis or cache lookup, the output allocation
(torch.empty on the CPU here) and the call into Triton's `__getitem__`. The decode-sized first
test case of each spec, contiguous, float32; the best of 5 repeats of `--calls` calls. Against
it: an empty call (`lambda *a: None`) and one eager op on the same tensor.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import timeit
from pathlib import Path

from common import REPO, load_entry, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

os.environ.pop("TRITON_INTERPRET", None)  # the real JIT's launch path, with its run() mocked out


def main() -> int:
    use_this_tree()
    import torch
    from triton.runtime.jit import JITFunction

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs, load_spec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--specs", nargs="*", default=["broadcast", "gelu", "scale_shift", "softmax", "layer_norm",
                                                   "rms_norm", "row_sum", "matmul_leakyrelu"])
    args = ap.parse_args()
    JITFunction.run = lambda self, *a, **k: None  # the launch itself: not the wrapper's cost
    x = torch.randn(8, 1000)
    best = lambda stmt, g: min(timeit.repeat(stmt, globals=g, number=args.calls, repeat=5)) / args.calls * 1e6  # noqa: E731
    print(f"{'empty Python call':<24} {best('f(x)', {'f': lambda *a: None, 'x': x}):6.2f} us")
    print(f"{'eager torch.neg (CPU)':<24} {best('torch.neg(x)', {'torch': torch, 'x': x}):6.2f} us")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.specs:
            spec = load_spec(REPO / "operator_specs" / f"{name}.yaml")
            fn = load_entry(generate_kernel(spec).source, name, Path(tmp))
            inputs = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")
            fn(*inputs)  # the first call analyses the signature
            shapes = ", ".join(str(list(t.shape)) for t in inputs)
            print(f"{name:<24} {best('fn(*inputs)', {'fn': fn, 'inputs': inputs}):6.2f} us   ({shapes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
