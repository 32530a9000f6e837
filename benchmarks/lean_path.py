"""The generated wrappers' own Python per call on their lean launch (no GPU needed), beside host_path.py.

    python benchmarks/lean_path.py [--calls 20000] [--specs broadcast gelu softmax ...]

host_path.py mocks `JITFunction.run` to return None, so every call there takes Triton's own
`kernel[grid](...)` path and the lean launch (kernelgen.runtime.v1: lean_launch, keep_launch) never
engages. Here Triton's driver is a fake whose launcher does nothing, and each spec's kernel a JIT function
whose launch returns a compiled kernel holding that launcher (as tests/offline/test_offline_lean_launch.py
does), so after the first call every call goes through lean_launch: the plan lookup, the allocation, the
alignment test and the launcher call, which is what a GPU pays on every call after the first. The first
test case of each spec, contiguous, float32; the best of 7 repeats of --calls calls. Compare two trees by
running this script from each checkout on one machine, alternating.
"""

from __future__ import annotations

import argparse
import os
import timeit
from types import SimpleNamespace

from common import REPO, load_module, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

os.environ.pop("TRITON_INTERPRET", None)  # the real JIT's classes, with the driver faked below


class _Launcher:
    """Triton's launcher class, doing nothing: the wrapper's side of the launch is what is timed."""

    def __call__(self, *args: object) -> None:
        pass


def main() -> int:
    use_this_tree()
    import torch
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs, load_spec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--specs", nargs="*", default=["broadcast", "gelu", "scale_shift", "softmax", "layer_norm",
                                                   "rms_norm", "row_sum"])
    args = ap.parse_args()
    driver._active = SimpleNamespace(launcher_cls=_Launcher, get_current_device=lambda: 0,
                                     get_current_stream=lambda device: 0)
    for name in args.specs:
        spec = load_spec(REPO / "operator_specs" / f"{name}.yaml")
        module = load_module(generate_kernel(spec).source, name)
        real = getattr(module, f"_{name}_kernel")
        # Triton 3.3+'s launcher signature: every argument of the kernel, constexprs too
        compiled = SimpleNamespace(run=_Launcher(), function=0, packed_metadata=(4, 1, 0),
                                   src=SimpleNamespace(signature={n: "i32" for n in real.arg_names}))

        class Compiled(JITFunction):  # its launch returns the compiled kernel above, as JITFunction.run does
            def run(self, *a: object, grid: object, warmup: bool, **k: object) -> SimpleNamespace:  # noqa: ARG002
                return compiled

        setattr(module, real.__name__, Compiled(real.fn))
        fn = getattr(module, name)
        inputs = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")
        fn(*inputs)  # compiles (here: returns the fake) and keeps the lean launch
        plan = next(iter(module._PLANS.values()))
        if not any(plan.lean.values()):
            print(f"{name:<24} no lean launch kept (the wrapper's launch order is unknown to keep_launch)")
            continue
        us = min(timeit.repeat(lambda: fn(*inputs), number=args.calls, repeat=7)) / args.calls * 1e6
        shapes = ", ".join(str(list(t.shape)) for t in inputs)
        print(f"{name:<24} {us:6.2f} us   ({shapes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
