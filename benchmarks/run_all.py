"""Verify, optimize and time every example operator on the GPUs of this machine, and print one table.

    python benchmarks/run_all.py [--out DIR] [--rounds 5] [--gpus all] [--specs operator_specs] [--collect-only]

A thin call of `kernelgen batch SPECS --backend offline --rounds R --gpus G --out DIR`: one worker per
GPU, each operator through `kernelgen new`, `optimize` and `bench --json`; resumable (run it again
after an interruption or a device call's time limit, and finished operators are not redone). The
batch writes DIR/batch_report.{md,json,png}; this script then prints the per-case table last, and
writes it to DIR/results.md.
"""

from __future__ import annotations

import argparse
import glob
import subprocess
import sys
from datetime import date
from pathlib import Path

from common import REPO, kernelgen, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

use_this_tree()  # this checkout's kernelgen, whatever else is installed


def driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "—"
    return out.splitlines()[0] if out else "—"


def specs_of(pattern: str) -> list[str]:
    """A folder, a file, or a glob such as 'operator_specs/*.yaml'."""
    return [pattern] if Path(pattern).exists() else sorted(glob.glob(pattern))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "latest")
    ap.add_argument("--specs", default=str(REPO / "operator_specs"), help="a folder of specs, a spec, or a glob")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gpus", default="all", help="as `kernelgen batch --gpus`: all, a count, or ids 0,1")
    ap.add_argument("--per-gpu", type=int, default=1, help="operators at once on each GPU (timings still one at a time)")
    ap.add_argument("--engine", default="local", help="local or ray (then --ray-address)")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per step (new, optimize, bench) of one operator")
    ap.add_argument("--collect-only", action="store_true",
                    help="run nothing: rebuild the report and the table from the operator folders already under --out "
                         "(e.g. an earlier run that was split over two calls)")
    args = ap.parse_args()

    from kernelgen.batch.report import BatchReport, build_report, collected_results, summary_text, write_report
    from kernelgen.batch.tables import case_columns, markdown_table
    from kernelgen.fsutil import atomic_write

    if args.collect_only:
        report = build_report(args.out.resolve(), collected_results(args.out), "collected from the operator folders")
        write_report(report, args.out)
    else:
        specs = specs_of(args.specs)
        if not specs:
            print(f"no spec matches {args.specs}", file=sys.stderr)
            return 2
        cmd = ["batch", *specs, "--out", str(args.out), "--rounds", str(args.rounds), "--backend", "offline",
               "--gpus", args.gpus, "--engine", args.engine, "--step-timeout", str(args.timeout)]
        if args.per_gpu != 1:
            cmd += ["--per-gpu", str(args.per_gpu)]
        if args.ray_address:
            cmd += ["--ray-address", args.ray_address]
        rc = kernelgen(*cmd, echo=True)[0]  # the batch's progress shown as it comes
        if rc == 2 or not (args.out / "batch_report.json").is_file():
            return rc or 1
        report = BatchReport.model_validate_json((args.out / "batch_report.json").read_text(encoding="utf-8"))

    d = report.device
    text = (f"Device: {d.get('device', '—')}, driver {driver_version()}; PyTorch {d.get('torch', '—')}, "
            f"Triton {d.get('triton', '—')}, Python {d['python']}; {date.today().isoformat()}.\n\n"
            + markdown_table(case_columns(), report.cases) + f"\n\n{summary_text(report)}.\n")
    atomic_write(args.out / "results.md", text)
    print()
    print(text)
    s = report.summary
    return 0 if s.operators and s.correct == s.operators else 1


if __name__ == "__main__":
    sys.exit(main())
