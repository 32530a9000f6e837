"""Host time per call of each example operator's offline kernel on a GPU, against an empty Triton launch.

    python benchmarks/launch_overhead.py [--specs operator_specs] [--repeats 20] [--programs] [--tree OLD_TREE]

The target (issue 14): a generated wrapper's host time within 5 us of an empty Triton launch on the
same machine. Each spec's first test case (decode-sized), contiguous, in its first dtype; host time
as the judge takes it (kernelgen.verify.timing.host_overhead_us: 50 calls without waiting for the
device), the best of --repeats, so another process's burst does not count. Run it on an idle GPU:
a batch sharing the GPU inflates every number here. Prints one table, the empty launch first.

--programs adds the programs of stages (the nd and conv families: one spec per family and kind of
tests/support/nd_specs.py and conv_specs.py, at its first test case), whose wrappers launch a kernel
per stage. --tree OLD_TREE writes every kernel with that checkout's kernelgen instead (this script and
its spec lists stay this checkout's): run once per tree on one warm GPU to compare two trees' host paths.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import triton
import triton.language as tl

from common import REPO, load_entry, use_tests, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

# host time of the real JIT's launch: triton.jit reads it below ("0", not unset: the test specs' helper
# turns the interpreter on where it is unset)
os.environ["TRITON_INTERPRET"] = "0"


@triton.jit
def _empty(x_ptr, n, BLOCK: tl.constexpr):  # noqa: ARG001 - launched for its cost only
    pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=Path, default=REPO / "operator_specs")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--programs", action="store_true", help="also the nd and conv families' programs of stages")
    ap.add_argument("--tree", type=Path, default=REPO, help="the checkout whose kernelgen writes the kernels")
    args = ap.parse_args()
    use_this_tree(args.tree.resolve())

    import torch

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs, load_spec
    from kernelgen.verify.timing import host_overhead_us

    def best(fn) -> float:  # noqa: ANN001
        return min(host_overhead_us(fn, "cuda") for _ in range(args.repeats))

    x = torch.empty(1024, device="cuda")
    rows = [("empty Triton launch", best(lambda: _empty[(1,)](x, 1024, BLOCK=128)), None)]
    rows.append(("eager torch.add", best(lambda: torch.add(x, x)), None))
    folder = Path(tempfile.mkdtemp(prefix="kg-launch-"))
    specs = [load_spec(path) for path in sorted(args.specs.glob("*.yaml"))]
    if args.programs:
        use_tests()
        from tests.support.conv_specs import KINDS
        from tests.support.nd_specs import FAMILIES

        specs += [group[0] for group in [*FAMILIES.values(), *KINDS.values()]]
    for spec in specs:
        fn = load_entry(generate_kernel(spec).source, spec.name, folder)
        case, dtype = spec.test_cases[0], spec.dtypes[0]
        inputs = draw_inputs(spec, case, dtype, 0, "cuda", on_device=True)
        params = spec.param_defaults
        ref = None
        if spec.reference:
            from kernelgen.spec import load_reference

            reference = load_reference(spec)
            ref = best(lambda: reference(*inputs, **params))
        rows.append((f"{spec.name} {'x'.join(map(str, next(iter(case.values()))))} {dtype}", best(lambda: fn(*inputs, **params)), ref))
    empty = rows[0][1]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print("| call | host µs/call | over the empty launch | eager reference µs/call |\n|---|---:|---:|---:|")
    for name, us, ref in rows:
        print(f"| {name} | {us:.1f} | {us - empty:+.1f} | {'—' if ref is None else f'{ref:.1f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
