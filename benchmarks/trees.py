"""Two trees' round-0 kernels side by side: the same specs, the same inputs, one process, timed in turns.

    python benchmarks/trees.py OLD_TREE [SPEC ...] [--rep-ms 40] [--turns 3] [--dry-run]

A change to the generator (issue 33's restructure, a new family) must leave every kernel it already
wrote as fast as it was. Timings from two calls of the device tool are not comparable (another card,
another clock), so both trees are timed here, in one process, on one card, on the same inputs:

- each tree writes its round-0 kernels (`first_kernel(spec, sm_count)`) in a child process with only
  that tree first on PYTHONPATH, into a folder of its own; a KernelBench problem file is derived by
  each tree itself (the perf case is KernelBench's own shapes either way);
- this process (the current tree) draws each perf case x perf dtype once, checks both kernels against
  the reference (a kernel that is wrong is reported, not timed), and times them in turns (old, new,
  old, new, ...: a clock that drifts affects both), L2 flushed, median of each turn's repetitions;
- byte-identical sources are timed once and marked "same".

SPEC: YAML specs and KernelBench-format problem files (default: every operator_specs/*.yaml).
--dry-run: no GPU; each kernel runs once on the spec's first test case in Triton's interpreter.
The table comes last: case, old µs, new µs, new/old, and whether the sources differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, load_entry, tree_env, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

# Run in a child with one tree first on the path: write every spec's round-0 kernel into OUT.
_WRITE = r"""
import json, sys
from pathlib import Path
from kernelgen.offline import first_kernel
from kernelgen.spec.given import read_spec
out, sms = Path(sys.argv[1]), int(sys.argv[2])
done = {}
for path in sys.argv[3:]:
    try:
        spec = read_spec(path).spec
        kernel = first_kernel(spec, sms)
    except Exception as e:  # a spec this tree cannot build: reported beside the other tree's kernel
        done[path] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
        continue
    (out / f"{spec.name}_triton.py").write_text(kernel.source)
    done[path] = {"name": spec.name, "file": str(out / f"{spec.name}_triton.py")}
print(json.dumps(done))
"""


def write_kernels(tree: Path, specs: list[Path], out: Path, sm_count: int) -> dict[str, dict]:
    """Every spec's round-0 kernel as `tree` writes it: {spec path: {"name", "file"} or {"error"}}."""
    out.mkdir(parents=True, exist_ok=True)
    # stdout apart from stderr (not run_python): the last line of stdout is the JSON, warnings go to stderr
    proc = subprocess.run([sys.executable, "-c", _WRITE, str(out), str(sm_count), *map(str, specs)],
                          env=tree_env(tree), capture_output=True, text=True, cwd=tree)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: writing kernels failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="the other tree (a checkout, e.g. `git worktree add /tmp/old 4525255`)")
    ap.add_argument("specs", nargs="*", type=Path, help="YAML specs and KernelBench problem files")
    ap.add_argument("--rep-ms", type=float, default=40.0, help="repetitions per turn, in ms of device time")
    ap.add_argument("--turns", type=int, default=3, help="alternating turns per kernel")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: run each kernel once in the interpreter")
    args = ap.parse_args()
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    use_this_tree()
    import torch

    from kernelgen.spec import draw_inputs, load_reference
    from kernelgen.spec.given import read_spec
    from kernelgen.verify.timing import rep_times, summarize

    specs = [p.resolve() for p in (args.specs or sorted((REPO / "operator_specs").glob("*.yaml")))]
    device = "cpu" if args.dry_run else "cuda"
    sms = 132 if args.dry_run else torch.cuda.get_device_properties(0).multi_processor_count
    work = Path(tempfile.mkdtemp(prefix="kg-trees-"))
    old = write_kernels(args.old.resolve(), specs, work / "old", sms)
    new = write_kernels(REPO, specs, work / "new", sms)
    if not args.dry_run:
        print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; old {args.old}, new {REPO}", flush=True)

    def time_us(fn) -> float:  # noqa: ANN001
        return 1e3 * summarize(rep_times(fn, device, warmup_ms=10, rep_ms=args.rep_ms)).ms

    rows = []
    for path in specs:
        o, n = old[str(path)], new[str(path)]
        if "error" in o or "error" in n:
            rows.append((path.stem, None, None, o.get("error", "") + " | " + n.get("error", "")))
            continue
        spec = read_spec(path).spec
        same = Path(o["file"]).read_bytes() == Path(n["file"]).read_bytes()
        fns = {"old": load_entry(Path(o["file"]), o["name"]), "new": load_entry(Path(n["file"]), n["name"])}
        reference = load_reference(spec)
        cases = [spec.test_cases[0]] if args.dry_run else spec.effective_perf_cases
        dtypes = ["float32"] if args.dry_run else spec.effective_perf_dtypes
        for case in cases:
            for dtype in dtypes:
                label = f"{spec.name} {'x'.join(map(str, next(iter(case.values()))))} {dtype}"
                inputs = draw_inputs(spec, case, dtype, 0, device, on_device=not args.dry_run)
                expected = reference(*inputs, **spec.param_defaults)
                tol = spec.tolerance_for(dtype)
                wrong = [k for k, fn in fns.items()
                         if not torch.allclose(_first(fn(*inputs, **spec.param_defaults)).double(), _first(expected).double(),
                                               atol=10 * tol.atol, rtol=10 * tol.rtol)]
                if wrong or args.dry_run:
                    rows.append((label, None, None, f"wrong: {', '.join(wrong)}" if wrong else ("same" if same else "differs")))
                    continue
                turns: dict[str, list[float]] = {"old": [], "new": []}
                for _ in range(args.turns):
                    for k in (("old",) if same else ("old", "new")):
                        turns[k].append(time_us(lambda: fns[k](*inputs, **spec.param_defaults)))
                t_old = statistics.median(turns["old"])
                t_new = t_old if same else statistics.median(turns["new"])
                rows.append((label, t_old, t_new, "same" if same else "differs"))
                print(f"  {label}: old {t_old:.1f} us, new {t_new:.1f} us", flush=True)
                del inputs, expected

    print("\n| case | old µs | new µs | new / old | source |\n|---|---:|---:|---:|---|")
    for label, t_old, t_new, note in rows:
        if t_old is None:
            print(f"| {label} | — | — | — | {note} |")
        else:
            print(f"| {label} | {t_old:.1f} | {t_new:.1f} | {t_new / t_old:.3f} | {note} |")
    return 0


def _first(out):  # noqa: ANN001, ANN202 - a kernel's first output (several come back as a tuple)
    return out[0] if isinstance(out, (tuple, list)) else out


if __name__ == "__main__":
    sys.exit(main())
