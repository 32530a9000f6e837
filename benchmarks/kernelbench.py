"""KernelBench's levels through KernelGen's offline generator, and KernelBench's fast_p table last.

    python benchmarks/kernelbench.py .kb/level1 .kb/level2 [--out DIR] [--rounds 1] [--gpus all] [--per-gpu auto] [--dtypes deciding]
    python benchmarks/kernelbench.py .kb/level1 .kb/level2 --only 19,23,level2/1   # a named subset
    python benchmarks/kernelbench.py .kb/level1 .kb/level2 --validate-only      # the CPU coverage, no kernels built
    python benchmarks/kernelbench.py .kb/level1 .kb/level2 --validate-only --match conv   # the convolution problems only
    python benchmarks/kernelbench.py --cross-check KB_CHECKOUT OUT_DIR          # KernelBench's own evaluation beside ours

KernelBench's own files stay out of the repository: copy its `KernelBench/level1` and `level2` folders
into the ignored `.kb/` (they then travel with the working tree to a GPU machine).

- A run is `kernelgen batch LEVEL... --backend offline --out DIR` (`--per-gpu auto`: problems packed
  on each GPU as their estimated memory allows, the large ones alone; each problem's spec derived from
  its file once, checked in float32 only unless `--dtypes all`; then new, which measures round 0 in
  full, and optimize; a `bench` step only where the best round's measurement is not the final one):
  resumable, so running the same command again after an
  interruption continues where it stopped and redoes nothing finished (the whole of levels 1 and 2 can
  be made in several runs). `--only` names a subset: `19` (that number in every level given),
  `level2/1`, or a piece of a file name (`Softmax`), comma-separated. It prints, per level, the statuses
  (`memory`: did not fit the GPU, no verdict on the kernel), the seconds per problem and where they
  went, the slowest problems, and fast_p against eager and against torch.compile (a problem that does
  not build, or is wrong, is not fast; one that did not fit the GPU's memory is left out and counted
  apart); then the wall time of this run.
- --validate-only derives every problem's spec and asks the offline generator whether it serves it,
  as `kernelgen validate` does (its kernel run once on the smallest case in a sandboxed interpreter
  worker; --no-run: only generated), `--jobs` problems at once: `offline: yes` per level, then each
  "no" with its reason, grouped, and the time the runs took.
- --cross-check KB_CHECKOUT OUT_DIR: a second harness. Every problem built under OUT_DIR (a batch's
  --out) is exported as KernelBench's ModelNew (`kernelgen export --kernelbench`) and evaluated by
  KernelBench's own `eval_kernel_against_ref` from the checkout given by path (never committed: `git
  clone https://github.com/ScalingIntelligence/KernelBench`), float32, backend "triton", 5 correctness
  trials, each problem in a process of its own (a crash or a CUDA error takes one row, not the table).
  The table shows KernelBench's correctness and speedup over its reference beside KernelGen's, and
  whether they agree (the same correctness, speedups within 10%).

  KernelBench's package imports its LLM helpers when `kernelbench.eval` is imported (`__init__` imports
  `utils`, which imports python-dotenv, litellm, openai and tqdm and calls `load_dotenv()`). The
  evaluation needs none of them, so each one that is not installed is put in `sys.modules` as a stub
  before the import (`_stub_missing`): `load_dotenv` and `tqdm` do nothing (no .env is read), and any
  other name raises if KernelBench ever calls it. The package is imported as KernelBench itself
  imports it, so nothing of its evaluation is re-implemented or skipped.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import types
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

# common.py sits beside this file: first on sys.path when it runs as a script, but not when a test loads
# it by its path (tests/test_kernelbench_crosscheck.py); appended, so it shadows nothing of the test's
sys.path.append(str(Path(__file__).resolve().parent))
from common import REPO, kernelgen, use_this_tree  # noqa: E402
from kb_tables import fast_p_table, problems, subset, time_table  # noqa: E402

use_this_tree()  # this checkout's kernelgen, whatever else is installed


def _reason(text: str) -> str:
    """A reason without the numbers that differ problem to problem, to group by."""
    return re.sub(r"\[[\d, ]+\]|\d+(\.\d+)?", "N", text.split(" (line")[0])[:160]


_WORKER = None  # each pool process's sandboxed interpreter worker, started with the process


def _start_worker() -> None:
    import multiprocessing.util

    from kernelgen.verify.judge.firstrun import first_run_worker

    global _WORKER
    context = first_run_worker()
    _WORKER = context.__enter__()
    multiprocessing.util.Finalize(None, context.__exit__, args=(None, None, None), exitpriority=10)  # on pool.close()


def _verdict(task: tuple[str, Path, bool]) -> tuple[str, str, str, str, float]:
    """(level, problem, yes | no, the grouped reason, seconds of the first run) of one problem file."""
    from kernelgen.backends import offline_verdict
    from kernelgen.errors import KernelGenError
    from kernelgen.spec.given import read_spec

    level, path, run = task
    number = path.name.split("_")[0]
    if run and (_WORKER is None or _WORKER.closed):  # a kernel that timed out took its worker with it
        _start_worker()
    try:
        verdict = offline_verdict(read_spec(path).spec, run=run, worker=_WORKER if run else None)
    except KernelGenError as e:
        return level, number, "no", "not derived: " + _reason(getattr(e, "why", e.message)), 0.0
    if verdict.ok:
        return level, number, "yes", "", verdict.seconds
    return level, number, "no", "offline: no: " + _reason(verdict.detail), verdict.seconds


def validate_only(folders: list[Path], *, run: bool = True, jobs: int = 2, match: str | None = None) -> int:
    """Every problem derived and validated in `jobs` processes (each with its own worker: the kernel
    behind a yes runs once on its smallest case, as `kernelgen validate` does unless --no-run)."""
    import multiprocessing
    import time

    from rich.progress import track

    started = time.monotonic()
    by_level = problems(folders, match)
    tasks = [(level, path, run) for level, files in by_level.items() for path in files]
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=_start_worker if run else None) as pool:
        results = list(track(pool.imap_unordered(_verdict, tasks), total=len(tasks),
                             description=f"deriving and validating ({jobs} processes)"))
        pool.close()  # a normal exit, so each process stops its worker (Finalize above)
        pool.join()
    summary = []
    for level, files in by_level.items():
        rows = [r for r in results if r[0] == level]
        yes = [r for r in rows if r[2] == "yes"]
        no: dict[str, list[str]] = defaultdict(list)
        for r in sorted((r for r in rows if r[2] == "no"), key=lambda r: int(r[1]) if r[1].isdigit() else 0):
            no[r[3]].append(r[1])
        summary.append(f"{level}: offline: yes for {len(yes)} of {len(files)}")
        print(f"\n## {level}: offline: yes for {len(yes)} of {len(files)}")
        if run and yes:  # what `kernelgen new` on the CPU repeats: 3 calls a seed, 14 seeds for a KernelBench spec
            print("- yes, seconds of the one run: " + ", ".join(f"{r[1]} {r[4]:.1f}" for r in sorted(yes, key=lambda r: -r[4])))
        for reason, which in sorted(no.items(), key=lambda kv: -len(kv[1])):
            print(f"- {len(which):3d}  {reason}  [{', '.join(which)}]")
    ran = sorted((r for r in results if r[4] > 0), key=lambda r: -r[4])
    how = (f"each yes ran its kernel once on its smallest case in float32 (CPU interpreter): {sum(r[4] for r in ran):.0f} s "
           f"in all, slowest {', '.join(f'{r[0]}/{r[1]} {r[4]:.1f} s' for r in ran[:3])}" if run else "kernels generated, not run (--no-run)")
    print("\n" + "\n".join(summary) + f"\n{how}; {len(tasks)} problems in {time.monotonic() - started:.0f} s, {jobs} processes")
    return 0


# --- the cross-check against KernelBench's own evaluation ---------------------------------------------
AGREE_SPEEDUP = 0.10  # speedups agree within 10%
KB_TRIALS = 5  # KernelBench's correctness trials (random inputs each)


def _raises(module: str, name: str):  # noqa: ANN202
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{module}.{name} is not installed here: KernelGen's cross-check stubbed {module} so that "
                           "kernelbench.eval imports; KernelBench's evaluation should not call it")
    return missing


def _stub_attr(module: str, name: str) -> Any:
    if name.startswith("__"):  # __file__, __path__, __spec__: a stub has none (inspect and importlib ask)
        raise AttributeError(name)
    return _raises(module, name)


# What a missing helper module becomes: harmless no-ops for what runs at import, raising stubs for the rest.
STUBS: dict[str, dict[str, Any]] = {
    "dotenv": {"load_dotenv": lambda *a, **k: False},  # no .env is read: KernelGen never hands over keys
    "tqdm": {"tqdm": lambda iterable=None, *a, **k: iterable},
    "litellm": {},
    "openai": {},
    "requests": {},
}


def _stub_missing() -> list[str]:
    """Put a stub in sys.modules for each of KernelBench's helper modules that cannot be imported here."""
    stubbed = []
    for name, attrs in STUBS.items():
        try:
            importlib.import_module(name)
            continue
        except ImportError:
            pass
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        module.__getattr__ = lambda attr, _n=name: _stub_attr(_n, attr)  # type: ignore[attr-defined]
        sys.modules[name] = module
        stubbed.append(name)
    return stubbed


def load_kernelbench_eval(checkout: Path) -> tuple[Any, list[str]]:
    """KernelBench's `kernelbench.eval` from a checkout (its `src/` first on sys.path), and the helper
    modules stubbed to import it."""
    src = Path(checkout) / "src"
    if not (src / "kernelbench" / "eval.py").is_file():
        raise SystemExit(f"{checkout}: not a KernelBench checkout (no src/kernelbench/eval.py)")
    sys.path.insert(0, str(src))
    stubbed = _stub_missing()
    return importlib.import_module("kernelbench.eval"), stubbed


def kernelgen_verdict(op_dir: Path) -> tuple[bool, float | None]:
    """KernelGen's own: a correct best round, and its geomean speedup over eager (the final measurement
    of a batch, else the best round's)."""
    from kernelgen.record.state import load_state
    from kernelgen.verify.results import RunRecord

    state = load_state(op_dir)
    best = state.best()
    perf = None
    final = Path(op_dir) / "final_perf.json"
    if final.is_file():
        perf = RunRecord.model_validate_json(final.read_text(encoding="utf-8")).performance
    elif best is not None and best.performance is not None:
        perf = best.performance.performance
    return best is not None, perf.geomean("speedup_eager") if perf is not None else None


def cross_check_one(checkout: Path, op_dir: Path) -> dict[str, Any]:
    """One problem through KernelBench's eval_kernel_against_ref: its correctness and speedup beside
    KernelGen's. Run in a process of its own."""
    from kernelgen.export import export_kernelbench
    from kernelgen.opdir import open_operator
    from kernelgen.spec.kernelbench.readback import read_back

    op = open_operator(op_dir)
    row: dict[str, Any] = {"name": op.name}
    row["kg_correct"], row["kg_speedup"] = kernelgen_verdict(op.path)
    view = read_back(op.spec)
    if view is None:
        return {**row, "note": "not a KernelBench problem (no Model to evaluate)"}
    if not row["kg_correct"]:
        return {**row, "note": "KernelGen has no correct kernel to export"}
    exported = export_kernelbench(op.path).path
    kb_eval, stubbed = load_kernelbench_eval(checkout)
    import torch

    result = kb_eval.eval_kernel_against_ref(view.problem, exported.read_text(encoding="utf-8"), seed_num=42,
                                             num_correct_trials=KB_TRIALS, num_perf_trials=100, measure_performance=True,
                                             backend="triton", precision=torch.float32, device=0)
    if result is None:
        return {**row, "note": "KernelBench's eval returned no result (a lock-file error while compiling: retry)"}
    meta = {k: str(v) for k, v in (result.metadata or {}).items() if k not in ("hardware", "device")}
    kb_speedup = result.ref_runtime / result.runtime if result.runtime > 0 and result.ref_runtime > 0 else None
    return {**row, "kb_compiled": bool(result.compiled), "kb_correct": bool(result.correctness),
            "kb_speedup": kb_speedup, "kb_runtime_us": result.runtime, "kb_ref_runtime_us": result.ref_runtime,
            "stubbed": stubbed, "note": "; ".join(f"{k}: {v}" for k, v in meta.items())[:300]}


def agreement(row: dict[str, Any]) -> str:
    if "kb_correct" not in row:
        return "—"
    if row["kg_correct"] != row["kb_correct"]:
        return "NO: correctness differs"
    a, b = row.get("kg_speedup"), row.get("kb_speedup")
    if row["kb_correct"] and a and b and abs(b / a - 1) > AGREE_SPEEDUP:
        return f"NO: speedups differ by {100 * abs(b / a - 1):.0f}%"
    return "yes"


def cross_table(rows: list[dict[str, Any]]) -> str:
    def x(v: Any) -> str:
        return f"x{v:.3g}" if isinstance(v, (int, float)) else "—"

    def yes(v: Any) -> str:
        return "—" if v is None else ("yes" if v else "no")

    lines = ["| problem | KernelGen correct | KernelGen x eager | KernelBench correct | KernelBench x eager | agree | note |",
             "|---|:---:|---:|:---:|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {yes(r.get('kg_correct'))} | {x(r.get('kg_speedup'))} | {yes(r.get('kb_correct'))} | "
                     f"{x(r.get('kb_speedup'))} | {agreement(r)} | {str(r.get('note') or '—').replace('|', '/')} |")
    agreed = sum(agreement(r) == "yes" for r in rows)
    compared = sum(agreement(r) != "—" for r in rows)
    return "\n".join(lines) + f"\n\n{agreed} of {compared} compared problems agree (correctness, and speedups within {AGREE_SPEEDUP:.0%})."


def cross_check(checkout: Path, out_dir: Path) -> int:
    """Every KernelBench problem built under `out_dir`, each in a process of its own; the table last."""
    from kernelgen.opdir import operator_dirs_under

    rows = []
    for op_dir in operator_dirs_under(out_dir):
        proc = subprocess.run([sys.executable, __file__, "--cross-check-one", str(checkout), str(op_dir)],
                              capture_output=True, text=True)
        found = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode == 0 and found:
            rows.append(json.loads(found[-1]))
        else:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            rows.append({"name": op_dir.name, "note": f"the cross-check process failed (exit {proc.returncode}): {last}"})
        print(f"{op_dir.name}: {agreement(rows[-1])}", file=sys.stderr)
    print(cross_table(rows))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("levels", nargs="*", type=Path, help="KernelBench level folders, e.g. .kb/level1 .kb/level2")
    ap.add_argument("--cross-check", nargs=2, type=Path, metavar=("KB_CHECKOUT", "OUT_DIR"),
                    help="evaluate every problem built under OUT_DIR with KernelBench's own eval_kernel_against_ref")
    ap.add_argument("--cross-check-one", nargs=2, type=Path, help=argparse.SUPPRESS)  # one problem, in its own process
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "kernelbench")
    ap.add_argument("--rounds", type=int, default=1, help="optimization rounds per problem")
    ap.add_argument("--gpus", default="all", help="as `kernelgen batch --gpus`: all, a count, or ids 0,1")
    ap.add_argument("--per-gpu", default="auto", help="workers per GPU, or auto: packed as each problem's estimated memory "
                    "allows, the large ones alone (KernelBench inputs reach 6-16 GB)")
    ap.add_argument("--only", default="", help="a subset: problem numbers (19), level/number (level2/1) or a piece of a "
                    "file name, comma-separated")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per step (new, optimize, bench) of one problem")
    ap.add_argument("--dtypes", default="deciding", help="as `kernelgen batch --dtypes`: deciding (float32, KernelBench's "
                    "own; the default) or all (float16 and bfloat16 checked beside it)")
    ap.add_argument("--validate-only", action="store_true", help="no kernels: the offline coverage per level, reasons grouped")
    ap.add_argument("--no-run", action="store_true", help="with --validate-only: generate each kernel, do not run it once")
    ap.add_argument("--jobs", type=int, default=2, help="with --validate-only: problems validated at once")
    ap.add_argument("--match", help="only the problem files whose name this regular expression finds, case-insensitive "
                    "(--match conv: the convolution problems); with --only, those of them it names")
    args = ap.parse_args()
    if args.cross_check_one:
        print(json.dumps(cross_check_one(*args.cross_check_one)))
        return 0
    if args.cross_check:
        return cross_check(*args.cross_check)
    if not args.levels:
        ap.error("give the KernelBench level folders, or --cross-check KB_CHECKOUT OUT_DIR")
    missing = [str(f) for f in args.levels if not f.is_dir()]
    if missing:
        print(f"no such folder: {', '.join(missing)} (copy KernelBench/level1 and level2 into .kb/)", file=sys.stderr)
        return 2
    if args.validate_only:
        return validate_only(args.levels, run=not args.no_run, jobs=args.jobs, match=args.match)

    return run_levels(args)


def run_levels(args: argparse.Namespace) -> int:
    """The batch over the levels (or the subset `--only` names), then its tables."""
    from kernelgen.batch.report import BatchReport, summary_text

    # a run over whole folders passes the folders (the batch lists them); a subset passes its files
    given = subset(args.levels, args.only, args.match) if args.only or args.match else args.levels
    cmd = ["batch", *map(str, given), "--out", str(args.out), "--rounds", str(args.rounds), "--backend", "offline",
           "--gpus", args.gpus, "--per-gpu", str(args.per_gpu), "--step-timeout", str(args.timeout), "--dtypes", args.dtypes]
    rc, _, wall = kernelgen(*cmd, echo=True)  # the batch's progress shown as it comes
    if rc == 2 or not (args.out / "batch_report.json").is_file():
        return rc or 1
    report = BatchReport.model_validate_json((args.out / "batch_report.json").read_text(encoding="utf-8"))
    d = report.device
    levels = [f.name for f in args.levels]
    print(f"\nKernelBench {' + '.join(levels)}: {d.get('device', '—')}; PyTorch {d.get('torch', '—')}, "
          f"Triton {d.get('triton', '—')}; {date.today().isoformat()}; {summary_text(report)}\n")
    print(time_table(report, levels) + "\n")
    print(fast_p_table(report, levels))
    print(f"\nwall time of this run: {wall:.0f} s (`kernelgen batch` as above; problems finished in an earlier run were "
          f"not redone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
