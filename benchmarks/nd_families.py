"""The n-dimensional generator's families on a GPU: every spec of tests/support/nd_specs.py built,
run and compared with its reference in float32, float16 and bfloat16 (the interpreter cannot run
bfloat16 arithmetic, so the CPU tests stop at float16), on contiguous and on transposed inputs, each
called twice (the second call of a plan launches every stage through Triton's launcher directly).
One line per spec, a short table last.

    python benchmarks/nd_families.py [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from common import load_entry, use_tests, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

use_this_tree()  # this checkout's kernelgen, whatever else is installed
use_tests()  # the specs: tests/support/nd_specs.py and its helper


def _transposed(t):
    if t.dim() < 2 or not t.dtype.is_floating_point:
        return t
    order = list(reversed(range(t.dim())))
    return t.permute(*order).contiguous().permute(*order)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    if args.device != "cpu":  # the specs' helper turns the interpreter on for the CPU tests: not here
        os.environ["TRITON_INTERPRET"] = "0"
    import torch

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs
    from kernelgen.spec.reference import load_reference
    from tests.support.nd_specs import FAMILIES

    tmp = Path(tempfile.mkdtemp(prefix="nd-families-"))
    rows: list[tuple[str, str, int, int, str]] = []
    for family, specs in FAMILIES.items():
        for spec in specs:
            t0 = time.perf_counter()
            ok = total = 0
            worst = ""
            try:
                kern = generate_kernel(spec)
                fn = load_entry(kern.source, spec.name, tmp)
            except Exception as e:  # noqa: BLE001 - reported per spec, the run goes on
                rows.append((family, spec.name, 0, 1, f"build: {type(e).__name__}: {str(e).splitlines()[0][:90]}"))
                print(f"{spec.name}: build failed: {e}", flush=True)
                continue
            ref = load_reference(spec)
            for ci, case in enumerate(spec.test_cases):
                for dtype in spec.dtypes:
                    for layout in ("contiguous", "transposed"):
                        total += 1
                        try:
                            inputs = draw_inputs(spec, case, dtype, 11 + ci, args.device)
                            if layout == "transposed":
                                inputs = [_transposed(t) for t in inputs]
                            expected = ref(*inputs, **spec.param_defaults)
                            tol = spec.tolerance_for(dtype)
                            for _call in ("first", "second"):  # a plan's second call: every stage's lean launch
                                got = fn(*inputs)
                                if expected.dtype.is_floating_point:
                                    torch.testing.assert_close(got.float(), expected.float(), atol=tol.atol, rtol=tol.rtol)
                                elif not torch.equal(got, expected):
                                    raise AssertionError(f"integer result differs ({_call} call)")
                            ok += 1
                        except Exception as e:  # noqa: BLE001
                            worst = worst or f"case {ci} {dtype} {layout}: {type(e).__name__}: {str(e).splitlines()[0][:90]}"
            secs = time.perf_counter() - t0
            rows.append((family, spec.name, ok, total, worst))
            print(f"{spec.name}: {ok}/{total} in {secs:.1f} s {worst}", flush=True)
    print(f"\n{torch.cuda.get_device_name() if args.device == 'cuda' else args.device}; "
          f"PyTorch {torch.__version__}; Triton {__import__('triton').__version__}")
    print(f"{'family':<15} {'spec':<20} {'passed':>8}  first failure")
    for family, name, ok, total, worst in rows:
        print(f"{family:<15} {name:<20} {ok:>3}/{total:<4}  {worst}")
    bad = sum(1 for r in rows if r[2] != r[3])
    print(f"{len(rows) - bad} of {len(rows)} specs pass every check")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
