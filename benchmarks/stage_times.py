"""Where a generated kernel's device time goes, launch by launch, beside eager's: the question a slow
chain leaves. On an H100 (2026-12-07) level 2's 17 (Conv2d 64->128 on 128x128, InstanceNorm, divide) took
36.8 ms a call against eager's 4.9, while level 2's 1, the same convolution with a ReLU and a bias, took
3.6 ms: the judge's number says the kernel is slow, not which of its three launches is.

    python benchmarks/stage_times.py OP_DIR [OP_DIR ...] [--reps 20] [--case 0] [--dtype float32]

OP_DIR: an operator folder as `kernelgen new` or `kernelgen batch` made it (spec.yaml and NAME_triton.py,
the kept kernel). Per folder, on the GPU: the perf case's inputs drawn as the judge draws them (seed 0, on
the device), the kernel and the reference (eager) called 3 times each, then --reps calls of each under
torch.profiler (CUDA activity). One table per folder: each device kernel the call ran, its microseconds a
call (its launches a call where it runs more than once), its share of the call and, for a Triton kernel,
its registers and spills; the kernel's launches first, then eager's, each with its total. PyTorch's default precision policy (convolutions may use TF32)
unless KERNELGEN_PRECISION says otherwise in the environment, as for the judge.

A developer's diagnosis, never a verdict: the judge's timings (`kernelgen bench`) are the numbers that
count, with their own clock, L2 policy and checks; the profiler adds its own overhead per launch. GPU only:
in Triton's interpreter the programs run on the host and no device kernel is recorded.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from common import load_module, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

WARMUP = 3  # calls before the profiled ones: compiles, the plan cache, cuDNN's algorithm choice


@dataclass(frozen=True)
class Row:
    name: str  # the device kernel's name (a Triton launch: its @triton.jit function)
    us: float  # microseconds a call
    launches: float  # launches a call
    facts: str = ""  # a Triton kernel's registers and spills, as ptxas left them


def aggregate(kernels: list[tuple[str, float]], reps: int, facts: dict[str, str] | None = None) -> list[Row]:
    """(name, microseconds) per device kernel launched in `reps` calls -> one row per name, per call,
    the longest first; `facts`: what else is known of a kernel, by name."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for name, us in kernels:
        total[name] += us
        count[name] += 1
    rows = [Row(n, total[n] / reps, count[n] / reps, (facts or {}).get(n, "")) for n in total]
    return sorted(rows, key=lambda r: -r.us)


def table(title: str, rows: list[Row], width: int = 72) -> str:
    """The rows as text: name, us a call, launches a call where not 1, share; the total last."""
    whole = sum(r.us for r in rows)
    lines = [f"{title}: {whole:,.1f} us a call, {sum(r.launches for r in rows):g} launches"]
    for r in rows:
        name = r.name if len(r.name) <= width else r.name[: width - 3] + "..."
        times = "" if abs(r.launches - 1) < 1e-9 else f"  x{r.launches:g}"
        share = r.us / whole if whole else 0.0
        lines.append(f"  {name:<{width}} {r.us:>11,.1f} us {share:>6.1%}{times}" + (f"  ({r.facts})" if r.facts else ""))
    if not rows:
        lines.append("  (no device kernel recorded)")
    return "\n".join(lines)


def device_kernels(fn, reps: int) -> list[tuple[str, float]]:  # noqa: ANN001 - any callable
    """(name, microseconds) of every device kernel `reps` calls of `fn` launched, from torch.profiler."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [(e.name, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == DeviceType.CUDA]


def compiled_facts(module) -> dict[str, str]:  # noqa: ANN001 - a generated kernel's module
    """Registers and spill bytes of each @triton.jit function of `module` compiled so far, by name: a
    conv tile that spills (255 registers and 640-4,652 bytes of spill stores at Triton 3.9's sm_90a for
    round 0's 128x128 and 256x128 tiles, ptxas -v on the CPU, 2026-12-07) is where to look first. Read from
    Triton's per-device cache of compiled kernels (`device_caches`, Triton 3.x); empty where it is not there."""
    import triton

    facts: dict[str, str] = {}
    for name, fn in vars(module).items():
        if not isinstance(fn, triton.JITFunction):
            continue
        for cache in getattr(fn, "device_caches", {}).values():
            kernels = cache[0] if isinstance(cache, tuple) else {}
            for k in kernels.values():
                regs, spills = getattr(k, "n_regs", None), getattr(k, "n_spills", None)
                if regs is not None:
                    facts[name] = f"{regs} registers, {spills or 0} B of local memory a thread: spills"
    return facts


def one(op_dir: Path, case: int, dtype: str, reps: int, device: str) -> str:
    """The two tables of one operator folder."""
    import torch

    from kernelgen.spec import draw_inputs, load_reference, load_spec
    from kernelgen.verify.judge.precision import applied  # the switches the judge runs eager under

    spec = load_spec(op_dir / "spec.yaml")
    module = load_module(op_dir / f"{spec.name}_triton.py", spec.name)
    kernel = getattr(module, spec.name)
    reference = load_reference(spec)
    shapes = spec.effective_perf_cases[case]
    inputs = draw_inputs(spec, shapes, dtype, 0, device, on_device=True)
    params = spec.param_defaults
    with torch.no_grad(), applied():
        launched = device_kernels(lambda: kernel(*inputs, **params), reps)
        mine = aggregate(launched, reps, compiled_facts(module))
        eager = aggregate(device_kernels(lambda: reference(*inputs, **params), reps), reps)
    size = " ".join(f"{n}{list(s)}" for n, s in shapes.items())
    ratio = sum(r.us for r in eager) / max(sum(r.us for r in mine), 1e-9)
    return (f"{spec.name}: perf case {case}, {size}, {dtype}; x{ratio:.2f} over eager by these sums\n"
            + table("kernel", mine) + "\n" + table("eager", eager))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op_dirs", nargs="+", type=Path, help="operator folders made by `kernelgen new` or `batch`")
    ap.add_argument("--reps", type=int, default=20, help="profiled calls of each (default 20)")
    ap.add_argument("--case", type=int, default=0, help="which perf case (default the first)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    use_this_tree()
    import torch

    if args.device != "cuda" or not torch.cuda.is_available():
        print("stage_times: needs a CUDA GPU: in Triton's interpreter the kernel's programs run on the host and "
              "the profiler records no device kernel (time the stages on a GPU machine)", file=sys.stderr)
        return 2
    failed = 0
    for op_dir in args.op_dirs:
        try:
            print(one(op_dir, args.case, args.dtype, args.reps, args.device) + "\n", flush=True)
        except Exception as e:  # noqa: BLE001 - one folder's failure is one line; the rest go on
            failed += 1
            print(f"{op_dir.name}: failed: {type(e).__name__}: {e}\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
