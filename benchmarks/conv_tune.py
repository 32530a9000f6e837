"""Tile and precision sweep of the convolution family at KernelBench's own sizes, on every GPU of the
machine at once: the data round 0's conv choices are made from.

    python benchmarks/conv_tune.py [--kb .kb/level1 .kb/level2] [--only 50,63] [--per-gpu 3] [--json FILE] [--round0-only]

For each KernelBench problem whose reference calls a convolution: its spec derived as `kernelgen new`
derives it, the perf case drawn once in float32, then
- the float64 truth (the float32 IEEE reference where float64 does not fit), eager's error against it
  with cuDNN's TF32 allowed (PyTorch's default) and with it off, and eager's median time (TF32 allowed);
- round 0's kernel (one TF32 product where PyTorch allows TF32 for convolutions, its default), round 0's
  tiles with three TF32 products (tf32x3, error near IEEE's: what a user who turns TF32 off gets), and a
  grid of tiles (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages; the direct form: pixels x channels x
  warps) with one TF32 product, five of them with the input copied channels-last first (PACK_X), and
  round 0's with a tap's channel blocks a loop inside the taps' (ONE_LOOP off, the form before 2026-12-07):
  each one's median time and its error.
`--round0-only`: eager, round 0's kernel and round 0's with ONE_LOOP off (seconds a problem, not minutes);
a change to the generated kernels is timed before and after by running this script in each tree.
One JSON line per problem (--json), and a table: the best correct setting per precision against eager.
"Correct" here is the judge's rule: within float32's tolerance of the truth, or no more than 2x
eager's own error (the TF32-allowed eager, as a user runs it).

Processes: --per-gpu of them on each visible GPU, compiling in parallel; each takes its GPU's lock
while it times, so timings never overlap on one GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, load_entry, use_this_tree

use_this_tree()

FORWARD = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    (64, 64, 32, 4, 3), (128, 32, 32, 4, 3), (128, 64, 32, 4, 3), (128, 64, 32, 8, 3), (128, 128, 32, 8, 3),
    (256, 64, 32, 8, 3), (256, 128, 32, 8, 3), (256, 64, 32, 8, 4), (128, 128, 64, 8, 2), (128, 64, 64, 4, 3),
    # BLOCK_K 16: a group of 16 input channels (level 1's 63, level 2's chains) steps K without half padding
    (128, 64, 16, 4, 4), (256, 64, 16, 8, 4), (128, 128, 16, 8, 4), (256, 128, 16, 8, 4),
]
DIRECT = [(64, 16, 16, 4, 2), (128, 16, 16, 4, 2), (128, 32, 16, 4, 2), (256, 16, 16, 4, 2), (256, 32, 16, 8, 2),
          (512, 16, 16, 8, 2), (128, 64, 16, 4, 2), (64, 64, 16, 4, 2)]
_GPU = None
_SWEEP = True


def _init(queue, sweep: bool) -> None:  # noqa: ANN001
    global _GPU, _SWEEP
    _GPU, _SWEEP = queue.get(), sweep
    os.environ["CUDA_VISIBLE_DEVICES"] = str(_GPU)
    os.environ["TRITON_INTERPRET"] = "0"


@contextlib.contextmanager
def _gpu_lock():
    with open(f"/tmp/conv_tune_gpu{_GPU}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_CHUNK = 1 << 25  # elements compared at a time: a float64 copy of level 1's 63's output is 16 GiB, and
#                   making it whole ran that problem out of memory beside four others (H100, 2026-12-07)


def _pairs(got, truth):  # noqa: ANN001, ANN202
    """The two outputs in matching flat chunks, the kernel's in float64 one chunk at a time."""
    g, t = got.reshape(-1), truth.reshape(-1)
    for i in range(0, g.numel(), _CHUNK):
        yield g[i:i + _CHUNK].double(), t[i:i + _CHUNK]


def _err(got, truth) -> float:  # noqa: ANN001
    return max((float((g - t).abs().max().item()) for g, t in _pairs(got, truth)), default=0.0)


def _ok(got, truth, eager_err: float) -> bool:  # noqa: ANN001
    import torch

    if got.shape != truth.shape or not bool(torch.isfinite(got).all()):
        return False
    within = all(bool(((g - t).abs() <= 1e-4 + 1e-4 * t.abs()).all()) for g, t in _pairs(got, truth))
    return within or _err(got, truth) <= 2 * eager_err + 1e-4


def _time(fn, inputs) -> float:  # noqa: ANN001
    import triton

    with _gpu_lock():
        return triton.testing.do_bench(lambda: fn(*inputs), warmup=10, rep=40, return_mode="median")


def _truth(ref, inputs):  # noqa: ANN001
    import torch

    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for dt in (torch.float64, torch.float32):
            try:
                return ref(*[t.to(dt) if t.is_floating_point() else t for t in inputs]), str(dt)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
        raise RuntimeError("no truth fits")
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def _variant(spec, knobs, precision, tmp, truth, eager_err, inputs) -> dict:  # noqa: ANN001
    import torch

    from kernelgen.offline import generate_kernel

    t0 = time.perf_counter()
    src = generate_kernel(spec, {**knobs, "tf32": None if precision == "tf32" else False}).source
    fn = load_entry(src, spec.name, tmp)
    with _gpu_lock():  # the first call compiles, then runs: device work, never beside another's timing
        got = fn(*inputs)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        err, ok = _err(got, truth), _ok(got, truth, eager_err)  # float64 passes over the output: device work too
    del got
    return {"knobs": knobs, "precision": precision, "ms": _time(fn, inputs), "err": err, "ok": ok,
            "compile_s": round(compile_s, 2)}


# the input copied channels-last (PACK_X) at round 0's tiles and at the one-TF32-product tiles: an NCHW input
# makes each K step a column of separate loads (sm_90 compiles of level 1's 55: 255 registers and a spill at
# 256x128 with NCHW, 231 and none channels-last), against a copy of the whole input per call. 0-5% slower
# at BLOCK_K 16 with a loop per tap (H200, 2026-12-04); with one K loop, 32-channel steps are tried too.
PACKED = [None, (128, 64, 16, 4, 4), (128, 128, 16, 8, 4), (256, 128, 16, 8, 4), (128, 64, 32, 4, 3),
          (128, 128, 32, 8, 3), (256, 128, 32, 8, 3)]


def _grid(form: str) -> list[dict]:
    rows = DIRECT if form == "direct" else FORWARD
    keys = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")
    grid = [dict(zip(keys, r)) for r in rows]
    if form != "direct":
        grid += [{**(dict(zip(keys, r)) if r else {}), "PACK_X": True} for r in PACKED]
        grid.append({"ONE_LOOP": False})  # round 0's tiles, a tap's channel blocks a loop of their own (before 2026-12-07)
    return grid


def tune(path: str) -> dict:
    import torch

    from kernelgen.offline import first_kernel
    from kernelgen.spec import draw_inputs
    from kernelgen.spec.kernelbench import derive_spec
    from kernelgen.spec.reference import load_reference

    t0 = time.perf_counter()
    row: dict = {"problem": f"{Path(path).parent.name}/{Path(path).stem}", "gpu": _GPU}
    try:
        spec = derive_spec(Path(path)).spec
        kern = first_kernel(spec, torch.cuda.get_device_properties(0).multi_processor_count)
        forms = re.findall(r'_conv_launch\("(\w+)"', kern.source)
        row.update(family=kern.family, forms=forms)
        if not forms:
            row["skip"] = "no conv stage"
            return row
        tmp = Path(tempfile.mkdtemp(prefix="conv-tune-"))
        ref = load_reference(spec)
        case = spec.effective_perf_cases[0]
        with _gpu_lock():
            inputs = draw_inputs(spec, case, "float32", 1, "cuda")
        with torch.no_grad():
            # the float64 truth is seconds of GPU work: under the lock, never beside another process's timing
            # (2026-11-28's sweep took it outside, and level 1's 71 timed round 0's own tiles at x0.92 and x2.11)
            with _gpu_lock():
                truth, row["truth"] = _truth(ref, inputs)
                row["eager_err"] = eager_err = _err(ref(*inputs), truth)
                torch.backends.cudnn.allow_tf32 = False
                row["eager_ieee_err"] = _err(ref(*inputs), truth)
                torch.backends.cudnn.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = False
            row["eager_ieee_ms"] = _time(ref, inputs)
            torch.backends.cudnn.allow_tf32 = True
            row["eager_ms"] = _time(ref, inputs)
            fn = load_entry(kern.source, spec.name, tmp)
            # round 0's first call under the lock too: outside it (until 2026-12-07) a first call, milliseconds
            # of device work at KernelBench's sizes, could overlap another process's timed repetitions
            with _gpu_lock():
                got = fn(*inputs)
                torch.cuda.synchronize()
                # the comparisons are seconds of float64 work at these sizes: outside the lock (until 2026-12-08)
                # they ran beside other processes' timings -- level 1's 55's round 0 read 8.50 ms beside three
                # others and 5.45 ms alone, the same call
                err, ok = _err(got, truth), _ok(got, truth, eager_err)
            row["round0"] = {"ms": _time(fn, inputs), "err": err, "ok": ok}
            del got
            row["variants"] = []
            # --round0-only: round 0 beside its nested-loop form alone (the one change of 2026-12-07 to tell apart)
            variants = ([({}, "tf32x3")] + [(k, "tf32") for k in _grid(forms[0])] if _SWEEP else
                        [({"ONE_LOOP": False}, "tf32")] if forms[0] != "direct" else [])
            for knobs, precision in variants:
                try:
                    row["variants"].append(_variant(spec, knobs, precision, tmp, truth, eager_err, inputs))
                except Exception as e:  # noqa: BLE001 - one variant's failure is a row of its own
                    row["variants"].append({"knobs": knobs, "precision": precision,
                                            "error": f"{type(e).__name__}: {str(e)[:200]}"})
                    torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - one problem's failure is its row
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 1)
        torch.cuda.empty_cache()
    return row


def _best(row: dict, precision: str) -> dict | None:
    ok = [v for v in row.get("variants", []) if v.get("ok") and v["precision"] == precision]
    return min(ok, key=lambda v: v["ms"]) if ok else None


def _precisions(rows: list[dict]) -> list[str]:
    """The precisions `rows` timed variants in (--round0-only: tf32 alone, its ONE_LOOP-off variant)."""
    return [p for p in ("tf32x3", "tf32") if any(v["precision"] == p for r in rows for v in r["variants"])]


def _line(row: dict) -> str:
    if "error" in row or "skip" in row:
        return f"{row['problem']:<70} {row.get('error') or row.get('skip')}"
    e, r0 = row["eager_ms"], row["round0"]
    parts = [f"{row['problem'][:70]:<70} {','.join(row['forms']):<12} eager {e:8.3f} ms (err {row['eager_err']:.1e},"
             f" ieee {row['eager_ieee_err']:.1e})  r0 x{e / r0['ms']:5.2f}{'' if r0['ok'] else ' WRONG'}"]
    for p in _precisions([row]):
        b = _best(row, p)
        parts.append(f"{p} best x{e / b['ms']:5.2f} {tuple(b['knobs'].values())}" if b else f"{p} none correct")
    return "  ".join(parts) + f"  {row['seconds']:.0f} s"


def _files(folders: list[Path], only: set[int]) -> list[str]:
    out = []
    for folder in folders:
        for p in sorted(folder.glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
            if (not only or int(p.name.split("_")[0]) in only) and "conv" in p.read_text().lower():
                out.append(str(p))
    return out


def _summary(rows: list[dict]) -> None:
    for level in ("level1", "level2"):
        rs = [r for r in rows if r["problem"].startswith(level) and "variants" in r]
        if not rs:
            continue
        for p in _precisions(rs):
            sp = [r["eager_ms"] / b["ms"] for r in rs if (b := _best(r, p))]
            geo = math.exp(sum(map(math.log, sp)) / len(sp)) if sp else float("nan")
            print(f"## {level} {p}: best correct on {len(sp)} of {len(rs)}; geomean x{geo:.2f} eager; "
                  f"faster than eager on {sum(s > 1 for s in sp)}")
        r0 = [r["eager_ms"] / r["round0"]["ms"] for r in rs if r["round0"]["ok"]]
        print(f"## {level} round 0: correct {len(r0)} of {len(rs)}; geomean x"
              f"{math.exp(sum(map(math.log, r0)) / max(len(r0), 1)):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", nargs="*", type=Path, default=[REPO / ".kb" / "level1", REPO / ".kb" / "level2"])
    ap.add_argument("--only", default="")
    ap.add_argument("--per-gpu", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--round0-only", action="store_true", help="eager and round 0's kernel, no sweep")
    args = ap.parse_args()
    import torch

    gpus = torch.cuda.device_count()
    files = _files([f for f in args.kb if f.is_dir()], {int(n) for n in args.only.split(",") if n.strip()})
    print(f"{torch.cuda.get_device_name()} x{gpus}; PyTorch {torch.__version__}; {len(files)} problems", flush=True)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    for i in range(gpus * args.per_gpu):
        queue.put(i % gpus)
    rows = []
    with ctx.Pool(gpus * args.per_gpu, initializer=_init, initargs=(queue, not args.round0_only)) as pool:
        for row in pool.imap_unordered(tune, files):
            rows.append(row)
            print(_line(row), flush=True)
            if args.json:
                with args.json.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    _summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
