"""KernelBench problems on a GPU: eager, another tree's round 0, this tree's round 0 and knob settings
of this tree, on the same inputs in one process, timed in turns (issue 29's before/after).

    python benchmarks/kb_versus.py OLD_TREE PROBLEM.py... [--variants] [--compile] [--out DIR] [--rep-ms 30]

- OLD_TREE writes its round-0 kernels in a child process (benchmarks/trees.py's write_kernels), this
  tree in this process (`first_kernel(spec, sm_count)`); --variants adds, per problem, the knob
  settings in VARIANTS (generate_kernel(spec, knobs): the base knobs, no dispatch table);
- every kernel is checked against the reference on the perf case (float32, KernelBench's shapes),
  at 10x the spec's tolerance, and a wrong one is reported, not timed;
- eager (the reference), --compile adds torch.compile of it; kernels timed in turns (each turn:
  every function once through kernelgen.verify.timing), the median of the turns' medians.
The table comes last: µs of each, old and new against eager, the best variant. Details in --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from common import load_entry, use_this_tree  # benchmarks/ is this script's folder, first on sys.path
from kb_tables import problem_number
from trees import write_kernels

_SPLIT = [{"split": True, "SPLIT_PER_SM": n} for n in (2, 8, 16)]
_ROWS = [{"ROW_TILE": 2048}, {"ROW_TILE": 8192}, {"ROW_TILE": 16384}]
_POINTWISE = [{"TILE_BYTES": 32768}, {"TILE_BYTES": 65536}, {"num_warps": 4}, {"persistent": True},
              {"eviction": "evict_first"}, {"grid": "1d"}, {"grid": "1d", "BLOCK_SIZE": 8192, "num_warps": 8}]
_LONG_ROWS = [{"algorithm": "online", "persistent": False}, {"algorithm": "looped"},
              {"algorithm": "online", "persistent": True, "LOOP_BLOCK": 8192, "num_warps": 16},
              {"algorithm": "online", "persistent": False, "LOOP_BLOCK": 8192, "num_warps": 16},
              {"algorithm": "looped", "LOOP_BLOCK": 8192, "num_warps": 16}]
VARIANTS = {  # KernelBench level-1 number -> knob settings worth timing beside round 0
    37: _SPLIT, 100: _SPLIT, 33: _SPLIT,
    34: [{"ROW_TILE": 8192}, {"ROW_TILE": 2048}, {"split": True, "SPLIT_PER_SM": 8}],
    35: [{"ROW_TILE": 8192}, {"num_warps": 4}, {"split": True, "SPLIT_PER_SM": 4}, {"split": True, "SPLIT_PER_SM": 16}],
    36: [{"ROW_TILE": 16384}, {"split": False}], 49: [{"ROW_TILE": 8192}], 52: [{"ROW_TILE": 2048}],
    47: _ROWS, 51: _ROWS[1:],
    23: _LONG_ROWS, 24: _LONG_ROWS,
    21: _POINTWISE, 20: _POINTWISE[:4], 28: _POINTWISE[:4],
}


NAMED = {"softmax": _LONG_ROWS, "log_softmax": _LONG_ROWS}  # example specs (operator_specs/*.yaml) by name


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: each kernel checked once on the first test case")
    ap.add_argument("--case", type=int, default=0, help="which perf case of each spec (KernelBench files have one)")
    ap.add_argument("--dtype", default="float32")
    return ap.parse_args()


def _kernels(spec, old: dict, args: argparse.Namespace, number: int, sms: int, work: Path) -> tuple[dict, dict]:  # noqa: ANN001
    """The functions to time for one problem (eager, compile, old, new, variants) and notes on the ones
    that are not there (same source as another, failed to build)."""
    import torch

    from kernelgen.offline import first_kernel, generate_kernel
    from kernelgen.spec import load_reference

    fns, notes = {"eager": load_reference(spec)}, {}
    if args.compile:
        fns["compile"] = torch.compile(fns["eager"])
    if "error" not in old:
        fns["old"] = load_entry(Path(old["file"]), old["name"])
    chosen = (VARIANTS.get(number, []) if number else NAMED.get(spec.name, [])) if args.variants else []
    settings = [("new", None)] + [(json.dumps(k, sort_keys=True), k) for k in chosen]
    sources = {"old": Path(old["file"]).read_text()} if "old" in fns else {}
    for label, knobs in settings:
        src = first_kernel(spec, sms).source if knobs is None else generate_kernel(spec, knobs).source
        if src in sources.values():
            notes[label] = "same as " + next(k for k, v in sources.items() if v == src)
            continue
        sources[label] = src
        fns[label] = load_entry(src, spec.name, work)
    return fns, notes


def _drop_wrong(spec, fns: dict, notes: dict, inputs: list, dtype: str) -> None:  # noqa: ANN001
    """Every kernel checked against the reference at 10x the spec's tolerance; a wrong or failing one is
    taken out of `fns` and named in `notes`."""
    import torch

    expected = fns["eager"](*inputs, **spec.param_defaults)
    expected = (expected[0] if isinstance(expected, (tuple, list)) else expected).double()
    tol = spec.tolerance_for(dtype)
    for k in [k for k in fns if k != "eager"]:
        try:
            got = fns[k](*inputs, **spec.param_defaults)
            got = (got[0] if isinstance(got, (tuple, list)) else got).double()
            err = ((got - expected).norm() / expected.norm().clamp_min(1e-30)).item()
            if not torch.allclose(got, expected, atol=10 * tol.atol, rtol=10 * tol.rtol):
                notes[k] = f"wrong (rel err {err:.1e})"
                del fns[k]
        except Exception as e:  # a kernel that fails to build or run is reported, not timed
            notes[k] = f"{type(e).__name__}: {str(e)[:100]}"
            del fns[k]


def _table(rows: list[dict]) -> None:
    print("\n| problem | eager µs | old µs | new µs | old x eager | new x eager | best variant | its x eager |\n"
          "|---|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        us = r["us"]
        e, o, n = us.get("eager"), us.get("old"), us.get("new", us.get("old") if r["notes"].get("new") == "same as old" else None)
        var = {k: v for k, v in us.items() if k.startswith("{")}
        best = min(var, key=var.get) if var else None
        cell = lambda x: f"{x:.1f}" if x else "—"  # noqa: E731
        ratio = lambda x: f"{e / x:.2f}" if x and e else "—"  # noqa: E731
        print(f"| {r['problem']} | {cell(e)} | {cell(o)} | {cell(n)} | {ratio(o)} | {ratio(n)} | {best or '—'} | "
              f"{ratio(var[best]) if best else '—'} |")


def main() -> int:
    args = _args()
    if args.dry_run:
        import os

        os.environ["TRITON_INTERPRET"] = "1"
    use_this_tree()
    import torch
    import triton

    from kernelgen.spec import draw_inputs
    from kernelgen.spec.given import read_spec
    from kernelgen.verify.timing import rep_times, summarize

    device = "cpu" if args.dry_run else "cuda"
    sms = 132 if args.dry_run else torch.cuda.get_device_properties(0).multi_processor_count
    work = Path(tempfile.mkdtemp(prefix="kg-versus-"))
    paths = [p.resolve() for p in args.problems]
    old = write_kernels(args.old.resolve(), paths, work / "old", sms)
    print(f"{'interpreter' if args.dry_run else torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"triton {triton.__version__}; old {args.old}", flush=True)
    rows = []
    for path in paths:
        number, spec = problem_number(path), read_spec(path).spec
        fns, notes = _kernels(spec, old[str(path)], args, number, sms, work)
        cases = spec.effective_perf_cases
        case = spec.test_cases[0] if args.dry_run else cases[min(args.case, len(cases) - 1)]
        inputs = draw_inputs(spec, case, args.dtype, 0, device, on_device=not args.dry_run)
        _drop_wrong(spec, fns, notes, inputs, args.dtype)
        turns: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(0 if args.dry_run else args.turns):
            for k, fn in fns.items():
                turns[k].append(1e3 * summarize(rep_times(lambda: fn(*inputs, **spec.param_defaults), "cuda",
                                                          warmup_ms=5, rep_ms=args.rep_ms)).ms)
        us = {k: statistics.median(v) for k, v in turns.items() if v}
        rows.append({"problem": f"{path.name} {'x'.join(map(str, next(iter(case.values()))))} {args.dtype}",
                     "number": number, "us": us, "notes": notes})
        print(f"  {path.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in us.items()) + (f" | {notes}" if notes else ""), flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "kb_versus.json").write_text(json.dumps(rows, indent=1))
        fns = inputs = None  # freed before the next problem draws its inputs
        torch.cuda.empty_cache()
    _table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
