"""`kernelgen new` of KernelBench's convolution problems on the CPU (Triton's interpreter), each as a user
runs it, with its time: the issue-38 promise that every convolution problem `validate` says yes to builds
on the CPU within 10 minutes on 2 cores, or validate says why not.

    python benchmarks/kb_conv_cpu.py .kb/level1 .kb/level2 [--match conv] [--only 2/46,1/41] [--sample]
                                     [--timeout 600] [--no-bench] [--out DIR]

- Every problem file whose name --match finds (a case-insensitive regular expression, default "conv": the
  98 convolution problems of levels 1 and 2), of those only --only's (2/46: level 2's 46), with --sample
  the first of each kind (its dims, transposed, depthwise, grouped, pointwise, and the chain's pooling,
  norm, softmax, read from the file name); one at a time: `python -m kernelgen new FILE --backend offline
  --device cpu --no-service --out DIR/gen` in a process of its own, stopped after --timeout seconds
  (--no-service: each build judges in its own process, so nothing outlives the run).
- One row per problem: kind, exit code, seconds, and the verdict (the accuracy line, or the last line of
  a failure); a count last. A problem's failure is one row; the run goes on. --no-bench skips the CPU's
  dry-run timing step (which measures nothing on the interpreter).
- Results are appended to DIR/results.jsonl as they come, and a problem already there is not run again:
  run the same command again after an interruption (delete the file to start over).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from common import REPO, kernelgen  # benchmarks/ is this script's folder, first on sys.path
from kb_tables import problem_number, problems

CHAIN_TAGS = (("pool", "pool"), ("norm", "norm"), ("softmax", "softmax"))


def kind(path: Path) -> str:
    """A problem's kind from its file name: '2-D transposed grouped', '3-D + pool + norm', ..."""
    name = path.name.lower()
    dims = re.search(r"([123])d", name)
    parts = [f"{dims.group(1)}-D" if dims else "?-D"]
    parts += [w for w in ("transpose", "depthwise", "grouped", "pointwise", "separable") if w in name]
    if path.parent.name == "level2":
        parts += [f"+ {tag}" for word, tag in CHAIN_TAGS if word in name]
    return " ".join(parts)


def _wanted(path: Path, only: set[str]) -> bool:
    """--only's entries: a number (that problem of every level) or LEVEL/NUMBER (2/46: level 2's 46)."""
    number = str(problem_number(path))
    return number in only or f"{path.parent.name.removeprefix('level')}/{number}" in only


def select(folders: list[Path], match: str, only: set[str], sample: bool) -> list[Path]:
    chosen = [p for files in problems(folders, match).values() for p in files]
    if only:
        chosen = [p for p in chosen if _wanted(p, only)]
    if sample:
        firsts: dict[tuple[str, str], Path] = {}
        for p in chosen:
            firsts.setdefault((p.parent.name, kind(p)), p)
        chosen = list(firsts.values())
    return chosen


def _verdict(output: str) -> str:
    """The accuracy line ("• Accuracy: PASS — 47/47 checks passed; ..."), or the last line."""
    lines = [ln.strip(" •") for ln in output.splitlines() if ln.strip()]
    accuracy = [ln for ln in lines if ln.startswith("Accuracy: ")]
    return (accuracy[-1] if accuracy else lines[-1] if lines else "no output")[:200]


def build(path: Path, out: Path, timeout: float, bench: bool) -> dict:
    # --no-service: nothing outlives the command (a warm service would stay 10 minutes after the run)
    args = ["new", str(path), "--backend", "offline", "--device", "cpu", "--out", str(out / "gen"), "--force", "--no-service"]
    if not bench:
        args.append("--no-bench")
    started = time.monotonic()
    try:
        rc, text, _ = kernelgen(*args, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - subprocess.TimeoutExpired: one row, the run goes on
        rc, text = 124, f"stopped after {timeout:.0f} s ({type(e).__name__})"
    return {"problem": f"{path.parent.name}/{path.name}", "kind": kind(path), "exit": rc,
            "seconds": round(time.monotonic() - started, 1), "verdict": _verdict(text)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("levels", nargs="+", type=Path, help="KernelBench level folders, e.g. .kb/level1 .kb/level2")
    ap.add_argument("--match", default="conv", help="a regular expression the file name must contain (case-insensitive)")
    ap.add_argument("--only", default="", help="problems, comma-separated: a number (every level's) or LEVEL/NUMBER (2/46)")
    ap.add_argument("--sample", action="store_true", help="the first problem of each kind only")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per problem (the promise: 10 minutes)")
    ap.add_argument("--no-bench", action="store_true", help="skip the CPU's dry-run timing step")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "kb_conv_cpu")
    args = ap.parse_args()
    missing = [str(f) for f in args.levels if not f.is_dir()]
    if missing:
        print(f"no such folder: {', '.join(missing)} (copy KernelBench/level1 and level2 into .kb/)", file=sys.stderr)
        return 2
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "results.jsonl"
    done = {json.loads(ln)["problem"]: json.loads(ln) for ln in log.read_text().splitlines()} if log.is_file() else {}
    rows = []
    for path in select(args.levels, args.match, only, args.sample):
        key = f"{path.parent.name}/{path.name}"
        row = done.get(key)
        if row is None:
            row = build(path, args.out, args.timeout, not args.no_bench)
            with log.open("a") as f:
                f.write(json.dumps(row) + "\n")
        rows.append(row)
        print(f"{row['exit']:>4}  {row['seconds']:7.1f} s  {row['kind']:<28} {key}: {row['verdict']}", flush=True)
    passed = [r for r in rows if r["exit"] == 0]
    slowest = sorted(rows, key=lambda r: -r["seconds"])[:3]
    print(f"\n{len(passed)} of {len(rows)} built and passed (each stopped after {args.timeout:.0f} s); "
          f"{sum(r['seconds'] for r in rows):.0f} s in all; slowest: "
          + ", ".join(f"{r['problem']} {r['seconds']:.0f} s" for r in slowest))
    return 0 if len(passed) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
