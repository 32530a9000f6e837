"""KernelBench's levels through KernelGen's offline generator, and KernelBench's fast_p table last.

    python benchmarks/kernelbench.py .kb/level1 .kb/level2 [--out DIR] [--rounds 1] [--gpus all]
    python benchmarks/kernelbench.py .kb/level1 .kb/level2 --validate-only      # the CPU coverage, no kernels built

KernelBench's own files stay out of the repository: copy its `KernelBench/level1` and `level2` folders
into the ignored `.kb/` (they then travel with the working tree to a GPU machine).

- A run is `kernelgen batch LEVEL... --backend offline --out DIR` (one worker per GPU; each problem's
  spec derived from its file, then new, optimize, bench): resumable, so running the same command again
  after an interruption continues where it stopped. Its table ends with fast_p per level and over all,
  against eager and against torch.compile (a problem that does not build, or is wrong, is not fast).
- --validate-only derives every problem's spec and asks the offline generator whether it serves it,
  as `kernelgen validate` does (its kernel run once on the smallest case in a sandboxed interpreter
  worker; --no-run: only generated), `--jobs` problems at once: `offline: yes` per level, then each
  "no" with its reason, grouped, and the time the runs took.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's kernelgen, whatever else is installed


def _number(path: Path) -> int:
    found = re.match(r"\d+", path.name)
    return int(found.group()) if found else 0


def problems(folders: list[Path]) -> dict[str, list[Path]]:
    """Each level folder's problem files, in KernelBench's numbering."""
    return {f.name: sorted(f.glob("*.py"), key=_number) for f in folders}


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


def validate_only(folders: list[Path], *, run: bool = True, jobs: int = 2) -> int:
    """Every problem derived and validated in `jobs` processes (each with its own worker: the kernel
    behind a yes runs once on its smallest case, as `kernelgen validate` does unless --no-run)."""
    import multiprocessing
    import time

    from rich.progress import track

    started = time.monotonic()
    by_level = problems(folders)
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
        for reason, which in sorted(no.items(), key=lambda kv: -len(kv[1])):
            print(f"- {len(which):3d}  {reason}  [{', '.join(which)}]")
    ran = sorted((r for r in results if r[4] > 0), key=lambda r: -r[4])
    how = (f"each yes ran its kernel once on its smallest case in float32 (CPU interpreter): {sum(r[4] for r in ran):.0f} s "
           f"in all, slowest {', '.join(f'{r[0]}/{r[1]} {r[4]:.1f} s' for r in ran[:3])}" if run else "kernels generated, not run (--no-run)")
    print("\n" + "\n".join(summary) + f"\n{how}; {len(tasks)} problems in {time.monotonic() - started:.0f} s, {jobs} processes")
    return 0


def fast_p_table(report, levels: list[str]) -> str:  # noqa: ANN001 - kernelgen.batch.report.BatchReport
    from kernelgen.batch.tables import BASELINES
    from kernelgen.record.fastp import Outcome, fast_p_lines, fast_p_row

    lines = []
    groups = {level: [r for r in report.operators if r.name.startswith(f"kb{level.removeprefix('level')}_")] for level in levels}
    groups["all"] = list(report.operators)
    for label, rows in groups.items():
        table = {b.label: fast_p_row([Outcome(r.status == "finished", r.speedup.get(b.label)) for r in rows]) for b in BASELINES}
        lines += [f"{label}:"] + ["  " + line for line in fast_p_lines(table, len(rows))]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("levels", nargs="+", type=Path, help="KernelBench level folders, e.g. .kb/level1 .kb/level2")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "kernelbench")
    ap.add_argument("--rounds", type=int, default=1, help="optimization rounds per problem")
    ap.add_argument("--gpus", default="all", help="as `kernelgen batch --gpus`: all, a count, or ids 0,1")
    ap.add_argument("--per-gpu", type=int, default=1, help="problems at once on each GPU (KernelBench inputs reach 6 GB)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per step (new, optimize, bench) of one problem")
    ap.add_argument("--validate-only", action="store_true", help="no kernels: the offline coverage per level, reasons grouped")
    ap.add_argument("--no-run", action="store_true", help="with --validate-only: generate each kernel, do not run it once")
    ap.add_argument("--jobs", type=int, default=2, help="with --validate-only: problems validated at once")
    args = ap.parse_args()
    missing = [str(f) for f in args.levels if not f.is_dir()]
    if missing:
        print(f"no such folder: {', '.join(missing)} (copy KernelBench/level1 and level2 into .kb/)", file=sys.stderr)
        return 2
    if args.validate_only:
        return validate_only(args.levels, run=not args.no_run, jobs=args.jobs)

    from kernelgen.batch.report import BatchReport, summary_text

    cmd = [sys.executable, "-m", "kernelgen", "batch", *map(str, args.levels), "--out", str(args.out), "--rounds",
           str(args.rounds), "--backend", "offline", "--gpus", args.gpus, "--step-timeout", str(args.timeout)]
    if args.per_gpu != 1:
        cmd += ["--per-gpu", str(args.per_gpu)]
    rc = subprocess.run(cmd, cwd=REPO).returncode
    if rc == 2 or not (args.out / "batch_report.json").is_file():
        return rc or 1
    report = BatchReport.model_validate_json((args.out / "batch_report.json").read_text(encoding="utf-8"))
    d = report.device
    print(f"\nKernelBench {' + '.join(f.name for f in args.levels)}: {d.get('device', '—')}; PyTorch {d.get('torch', '—')}, "
          f"Triton {d.get('triton', '—')}; {date.today().isoformat()}; {summary_text(report)}\n")
    print(fast_p_table(report, [f.name for f in args.levels]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
