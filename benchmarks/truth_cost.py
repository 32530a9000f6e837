"""The float64 truth at KernelBench's own perf shapes on a GPU: how far eager is from it under each
precision policy, and what the truth costs (seconds, peak device memory) whole, in batch slices and on
a judge-chosen sample -- the numbers kernelgen/verify/judge/bigtruth.py's comments estimate.

    python benchmarks/truth_cost.py [--kb .kb] [--only 1/62,2/14] [--slice-gib 4] [--device cuda] [--test-case]

(`--device cpu --test-case`: a smoke run on the derived test cases, no GPU; its numbers mean nothing.)

Per problem (default: the issue's refused ones, level 1's 55, 58, 62, 69, 73 and level 2's 3 and 14,
and the cost extremes: level 1's 45 and 87, the largest inputs and outputs, 68, the most FLOPs, 94, a
loss over everything, 97, attention), in float32 at the perf case, one line each:
- eager's max abs error against the truth under PyTorch's defaults (cuDNN TF32) and with TF32 off:
  the issue measured 1.05e-3 and 6e-6 at level 1's 62;
- the truth whole (where it fits), then forced into slices of at most --slice-gib, then sampled: its
  seconds, peak memory above what was allocated before, and how it was computed.
A problem's failure is its line; the run goes on.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from common import REPO, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

use_this_tree()

DEFAULT = ("1/55", "1/58", "1/62", "1/69", "1/73", "2/3", "2/14", "1/45", "1/87", "1/68", "1/94", "1/97")


def _problem(kb: Path, key: str) -> Path:
    level, number = key.split("/")
    found = sorted((kb / f"level{level}").glob(f"{number}_*.py"))
    if not found:
        raise FileNotFoundError(f"no problem {key} under {kb}")
    return found[0]


def _measure(make, *, memory: str | None, cuda: bool):
    """(seconds, peak GiB above the start (0 off CUDA), the truth) of one case_truth call under
    KERNELGEN_TRUTH_MEMORY."""
    import torch

    from kernelgen.verify.judge.truthmemory import MEMORY_ENV

    if memory is None:
        os.environ.pop(MEMORY_ENV, None)
    else:
        os.environ[MEMORY_ENV] = memory
    start = 0
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    truth = make()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0, (torch.cuda.max_memory_allocated() - start) / 2**30 if cuda else 0.0, truth


def one(path: Path, slice_gib: float, device: str, test_case: bool) -> str:
    import torch

    from kernelgen.spec import draw_inputs, load_reference
    from kernelgen.spec.given import read_spec
    from kernelgen.verify.judge.bigtruth import case_truth
    from kernelgen.verify.judge.compare import as_tuple, compare_outputs
    from kernelgen.verify.judge.inputs import PERF_SEED
    from kernelgen.verify.judge.precision import applied
    from kernelgen.precision import PrecisionPolicy

    spec = read_spec(path).spec
    ref, params, tol = load_reference(spec), spec.param_defaults, spec.tolerance_for("float32")
    case = spec.test_cases[0] if test_case else spec.effective_perf_cases[0]
    inputs = draw_inputs(spec, case, "float32", PERF_SEED, device, on_device=True)
    cuda = device.startswith("cuda")
    cells = []
    for policy in (PrecisionPolicy(), PrecisionPolicy(conv="ieee", conv_from="env")):
        with torch.no_grad(), applied(policy):
            eager = as_tuple(ref(*inputs, **params))
        secs, peak, truth = _measure(lambda: case_truth(ref, inputs, params, eager, policy=policy, tol=tol), memory=None, cuda=cuda)
        err = compare_outputs(list(eager), eager, tol, truth=truth)[0].eager_max_err
        cells.append(f"eager err {err:.3g} ({'TF32 conv' if policy.conv_tf32 else 'IEEE'})")
        if policy.conv_tf32:
            cells.append(f"whole: {secs:.2f} s, {peak:.1f} GiB, {truth.how}")
    budget = str(int(slice_gib * 2**30))
    for sample in (False, True):
        secs, peak, truth = _measure(lambda: case_truth(ref, inputs, params, eager, sample=sample, tol=tol), memory=budget,
                                     cuda=cuda)
        cells.append(f"{'sampled' if sample else 'sliced'}: {secs:.2f} s, {peak:.1f} GiB, {truth.how}")
    return f"{path.parent.name}/{path.name}: " + "; ".join(cells)


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=REPO / ".kb", help="the folder holding level1/ and level2/")
    parser.add_argument("--only", default=",".join(DEFAULT), help="level/number, comma-separated")
    parser.add_argument("--slice-gib", type=float, default=4.0, help="KERNELGEN_TRUTH_MEMORY for the sliced runs")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--test-case", action="store_true", help="the derived first test case, not the perf case")
    args = parser.parse_args()
    if args.device.startswith("cuda"):
        print(f"{torch.cuda.get_device_name()}; PyTorch {torch.__version__}; free "
              f"{torch.cuda.mem_get_info()[0] / 2**30:.0f} GiB", flush=True)
    failed = 0
    for key in args.only.split(","):
        try:
            print(one(_problem(args.kb, key.strip()), args.slice_gib, args.device, args.test_case), flush=True)
        except Exception as e:  # noqa: BLE001 - one problem's failure is its line
            failed += 1
            print(f"{key}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}", flush=True)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
