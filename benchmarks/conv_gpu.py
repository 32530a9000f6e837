"""The convolution family on a GPU, in one command: correctness of every kind, then KernelBench's
convolution problems at KernelBench's own shapes, correct and timed against eager (cuDNN).

    python benchmarks/conv_gpu.py [--device cuda] [--kb .kb/level1 .kb/level2] [--only 50,57] [--skip-specs]

1. Every spec of tests/support/conv_specs.py (forward 1-D/2-D/3-D, grouped, depthwise, transposed,
   chains) in float32, float16 and bfloat16, contiguous and channels-last: one line per spec, a count
   last. A result passes within the dtype's tolerance of the float64 truth, or no further from it than
   2x eager's own error (float32 convolutions are TF32 in eager and in the kernel while
   torch.backends.cudnn.allow_tf32 is on, PyTorch's default; KERNELGEN_CONV_TF32=0 runs both in IEEE).
2. Every KernelBench problem with a convolution (`aten.convolution` in its trace) under --kb: its spec
   derived as `kernelgen new` derives it, round 0's kernel (first_kernel) at the perf case in float32:
   the same pass rule against the truth (the reference in IEEE float32 with TF32 off, or float64 with
   --truth float64), then the median of triton.testing.do_bench for the kernel and for eager, and the
   speedup. A table per level ends with the geomean speedup and the share faster than eager.
A problem's failure is one row; the run goes on. `--only` takes problem numbers (both levels).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, load_entry, use_tests, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

use_this_tree()  # this checkout's kernelgen, whatever else is installed
use_tests()  # the specs: tests/support/conv_specs.py and its helper


def _channels_last(t):
    if t.dim() < 4 or not t.dtype.is_floating_point:
        return t
    perm = (0, *range(2, t.dim()), 1)
    return t.permute(*perm).contiguous().permute(0, t.dim() - 1, *range(1, t.dim() - 1))


def _judge(got, eager, truth, tol) -> tuple[bool, float, float]:
    """(passes, kernel's max error, eager's max error) against the truth."""
    import torch

    err = (got.double() - truth).abs()
    eager_err = (eager.double() - truth).abs().max().item()
    bound = tol.atol + tol.rtol * truth.abs()
    ok = bool((err <= bound).all()) or err.max().item() <= 2 * eager_err + tol.atol
    ok = ok and got.shape == eager.shape and got.dtype == eager.dtype and bool(torch.isfinite(got).all() or
                                                                                not torch.isfinite(eager).all())
    return ok, err.max().item(), eager_err


def run_specs(device: str, tmp: Path) -> int:
    import torch

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs
    from kernelgen.spec.reference import load_reference
    from tests.support.conv_specs import KINDS

    bad = 0
    for kind, specs in KINDS.items():
        for spec in specs:
            fails, total = [], 0
            try:
                fn = load_entry(generate_kernel(spec).source, spec.name, tmp)
            except Exception as e:  # noqa: BLE001 - reported per spec, the run goes on
                print(f"{kind:<11} {spec.name:<28} build failed: {type(e).__name__}: {e}", flush=True)
                bad += 1
                continue
            ref = load_reference(spec)
            for ci, case in enumerate(spec.test_cases):
                for dtype in spec.dtypes:
                    for layout in ("contiguous", "channels_last"):
                        total += 1
                        try:
                            inputs = draw_inputs(spec, case, dtype, 11 + ci, device)
                            if layout == "channels_last":
                                inputs = [_channels_last(t) for t in inputs]
                            truth = ref(*[t.double() if t.is_floating_point() else t for t in inputs])
                            ok, err, eerr = _judge(fn(*inputs), ref(*inputs), truth, spec.tolerance_for(dtype))
                            if not ok:
                                fails.append(f"{dtype} {layout}: {err:.3g} vs eager {eerr:.3g}")
                        except Exception as e:  # noqa: BLE001
                            fails.append(f"{dtype} {layout}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            bad += bool(fails)
            print(f"{kind:<11} {spec.name:<28} {total - len(fails)}/{total}  {'; '.join(fails[:2])}", flush=True)
    print(f"specs: {sum(len(s) for s in KINDS.values()) - bad} of {sum(len(s) for s in KINDS.values())} pass every check\n")
    return bad


def run_problem(path: Path, device: str, tmp: Path, truth_dtype: str) -> dict:
    import torch
    import triton

    from kernelgen.offline import first_kernel
    from kernelgen.spec import draw_inputs
    from kernelgen.spec.kernelbench import derive_spec
    from kernelgen.spec.reference import load_reference

    spec = derive_spec(path).spec
    kern = first_kernel(spec, torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else None)
    fn = load_entry(kern.source, spec.name, tmp)
    ref = load_reference(spec)
    case = spec.effective_perf_cases[0]
    inputs = draw_inputs(spec, case, "float32", 1, device)
    with torch.no_grad():
        eager = ref(*inputs)
        got = fn(*inputs)
        before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        try:
            truth = ref(*[t.to(getattr(torch, truth_dtype)) if t.is_floating_point() else t for t in inputs])
        finally:
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
        ok, err, eerr = _judge(got, eager, truth, spec.tolerance_for("float32"))
        del truth
        t_kernel = triton.testing.do_bench(lambda: fn(*inputs), return_mode="median")
        t_eager = triton.testing.do_bench(lambda: ref(*inputs), return_mode="median")
    return {"ok": ok, "err": err, "eager_err": eerr, "ms": t_kernel, "eager_ms": t_eager, "family": kern.family,
            "shape": case[spec.input_names[0]]}


def run_kernelbench(folders: list[Path], device: str, tmp: Path, only: set[int], truth_dtype: str) -> None:
    import torch

    from kernelgen.spec.kernelbench import derive_spec

    for folder in folders:
        rows = []
        files = sorted(folder.glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
        for path in files:
            number = int(path.name.split("_")[0])
            if (only and number not in only) or "conv" not in path.read_text().lower():
                continue
            t0 = time.perf_counter()
            try:
                if "convolution" not in _calls(derive_spec(path).spec):
                    continue
                r = run_problem(path, device, tmp, truth_dtype)
                speed = r["eager_ms"] / r["ms"]
                rows.append((number, r["ok"], speed))
                print(f"{folder.name}/{number:<4} {'PASS' if r['ok'] else 'FAIL'}  kernel {r['ms']:8.3f} ms  eager {r['eager_ms']:8.3f} ms"
                      f"  x{speed:5.2f}  err {r['err']:.2e} (eager {r['eager_err']:.2e})  {r['family']}  "
                      f"x{r['shape']}  {time.perf_counter() - t0:.0f} s  {path.stem}", flush=True)
            except Exception as e:  # noqa: BLE001 - one row per problem
                rows.append((number, False, None))
                print(f"{folder.name}/{number:<4} ERROR {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                      f"  {path.stem}", flush=True)
            torch.cuda.empty_cache()
        speeds = [s for _, ok, s in rows if ok and s]
        geo = math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else float("nan")
        print(f"## {folder.name}: {sum(ok for _, ok, _ in rows)} of {len(rows)} convolution problems correct; geomean "
              f"x{geo:.2f} over eager (correct ones); {sum(1 for s in speeds if s > 1)} faster than eager; "
              f"below 0.8x: {[n for n, ok, s in rows if ok and s and s < 0.8]}\n", flush=True)


def _calls(spec) -> list[str]:
    """The aten operators the reference calls (run once on fake tensors): a convolution problem's include it."""
    from kernelgen.spec.symbolic import trace_reference

    traced = trace_reference(spec)
    return traced.calls if traced is not None else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--kb", nargs="*", type=Path, default=[REPO / ".kb" / "level1", REPO / ".kb" / "level2"])
    ap.add_argument("--only", default="", help="problem numbers, comma-separated (both levels)")
    ap.add_argument("--skip-specs", action="store_true", help="only KernelBench's problems")
    ap.add_argument("--truth", default="float32", choices=("float32", "float64"),
                    help="the reference's precision the errors are taken against (float32: IEEE, TF32 off)")
    args = ap.parse_args()
    if args.device != "cpu":  # the specs' helper turns the interpreter on for the CPU tests: not here
        os.environ["TRITON_INTERPRET"] = "0"
    import torch
    import triton

    tmp = Path(tempfile.mkdtemp(prefix="conv-gpu-"))
    name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"{name}; PyTorch {torch.__version__}; Triton {triton.__version__}; cudnn.allow_tf32="
          f"{torch.backends.cudnn.allow_tf32}\n", flush=True)
    bad = 0 if args.skip_specs else run_specs(args.device, tmp)
    only = {int(n) for n in args.only.split(",") if n.strip()}
    run_kernelbench([f for f in args.kb if f.is_dir()], args.device, tmp, only, args.truth)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
