"""Where the time of one accuracy check and one timing run goes, per operator: the worker's start,
the first (cold: every JIT compile) and a second (warm) accuracy run in the same judge, the slowest
checks of the cold run, and a performance run. What is left after subtracting warm from cold is
compilation; warm is the checks themselves.

    python benchmarks/profile_check.py [--specs operator_specs/softmax.yaml ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def profile(spec_path: Path, out: Path) -> list[str]:
    from kernelgen.devices import resolve_device
    from kernelgen.new import new_operator
    from kernelgen.verify.runner import open_judge, run_accuracy, run_performance

    dev = resolve_device("auto")
    t0 = time.monotonic()
    res = new_operator(spec_path, out_root=out, backend="offline", force=True, measure=False)
    lines = [f"## {res.op.name}", f"- new --no-bench (generate + one accuracy run, own judge): {time.monotonic() - t0:.1f} s"]
    t0 = time.monotonic()
    judge = open_judge(res.op, dev)
    try:
        from kernelgen.verify.runner import kernel_source

        judge.load(kernel_source(res.op, None, "offline"))
        lines.append(f"- judge + worker start + import of the kernel: {time.monotonic() - t0:.1f} s")
        for label in ("cold", "warm"):
            stamps: list[tuple[float, str]] = []
            t0 = time.monotonic()
            rec = run_accuracy(res.op, dev, judge=judge, log=lambda s: stamps.append((time.monotonic(), s)))
            total = time.monotonic() - t0
            acc = rec.accuracy
            lines.append(f"- accuracy {label}: {total:.1f} s, {len(acc.checks) if acc else 0} checks, "
                         f"{'pass' if rec.passed else 'FAIL: ' + rec.describe()[:200]}")
            if label == "cold":
                steps, last = [], t0
                for t, s in stamps:
                    steps.append((t - last, s))
                    last = t
                slow = sorted(steps, reverse=True)[:6]
                lines += [f"  - {dt:.2f} s before `{s[:90]}`" for dt, s in slow]
        t0 = time.monotonic()
        perf = run_performance(res.op, dev, judge=judge)
        lines.append(f"- performance (eager, torch.compile, peers, kernel; every perf case x dtype): {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        perf = run_performance(res.op, dev, judge=judge, no_compile=True, no_eager=True)
        lines.append(f"- performance, kernel only, warm: {time.monotonic() - t0:.1f} s ({perf.status})")
    finally:
        judge.close()
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", nargs="+", type=Path,
                    default=[REPO / "operator_specs" / n for n in ("broadcast.yaml", "softmax.yaml")])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="kg-profile-"))
    lines: list[str] = []
    for spec in args.specs:
        lines += profile(spec, out)
        print("\n".join(lines[-14:]), flush=True)
    (out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
