"""Verify, optimize and time every example operator on a GPU, in one call, and print one table.

    python benchmarks/run_all.py [--out DIR] [--rounds 5] [--jobs 6] [--specs 'operator_specs/*.yaml']

Each operator goes through plain `kernelgen` commands, so the numbers are the ones a user gets:
  1. `kernelgen new SPEC --backend offline --no-bench`, then `kernelgen optimize OP --rounds R
     --backend offline` (which first measures round 0 on this device);
  2. `kernelgen bench OP --json`: the best kernel against eager and torch.compile, in one process.
Operators run several at a time sharing one GPU through KERNELGEN_DEVICE_LOCK: correctness checks
overlap, every timed section holds the device alone (kernelgen/devicelock.py). Start-up, imports
and compilation, most of the wall time, overlap. Writes DIR/results.json, results.md and
results.png, then prints the table last.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sh(cmd: list[str], log: Path, timeout: float) -> tuple[int, float]:
    t0 = time.monotonic()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, cwd=REPO).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.monotonic() - t0


def kg(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelgen", *args]


def versions() -> dict[str, str]:
    import torch
    import triton

    info = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(), "date": date.today().isoformat()}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name()
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            info["driver"] = "unknown"
    else:
        info["device"] = "cpu (Triton interpreter): NOT a measurement"
    return info


def rows_for(op: str, record: dict) -> list[dict]:
    perf = (record or {}).get("performance") or {}
    peaks = perf.get("peaks") or {}
    rows = []
    for c in perf.get("cases", []):
        compute = c.get("bound") == "compute"
        rows.append({
            "op": op,
            "case": "x".join(map(str, next(iter(c["shapes"].values())))),
            "dtype": c["dtype"],
            "eager_ms": (c.get("eager") or {}).get("ms"),
            "compile_ms": (c.get("compiled") or {}).get("ms"),
            "kernel_ms": (c.get("kernel") or {}).get("ms"),
            "spread": (c.get("kernel") or {}).get("spread"),
            "x_eager": c.get("speedup_eager"),
            "x_compile": c.get("speedup_compile"),
            "gbps": c.get("gbps"),
            "tflops": c.get("tflops"),
            "bound": c.get("bound"),
            "frac_peak": c.get("frac_peak"),
            "peak": (peaks.get("matmul_tflops") if compute else peaks.get("copy_gbps")),
            "host_us": c.get("host_us"),
            "eager_host_us": c.get("eager_host_us"),
            "valid": c.get("valid", True),
        })
    return rows


def f(x, spec=".3f"):  # noqa: ANN001, ANN201
    return "—" if x is None else format(x, spec)


def markdown(rows: list[dict], info: dict, summary: dict) -> str:
    head = (f"Device: {info.get('device')}, driver {info.get('driver', '—')}; PyTorch {info['torch']}, Triton {info['triton']}, "
            f"Python {info['python']}; {info['date']}.\n\n")
    lines = ["| operator | case | dtype | eager ms | compile ms | KernelGen ms | x eager | x compile | GB/s | TFLOP/s | % of peak | host µs/call (kernel / eager) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        pct = f(r["frac_peak"] and 100 * r["frac_peak"], ".0f")
        pct = f"{pct}% {'cuBLAS' if r['bound'] == 'compute' else 'copy'}" if pct != "—" else pct
        lines.append(f"| {r['op']} | {r['case']} | {r['dtype']} | {f(r['eager_ms'], '.4f')} | {f(r['compile_ms'], '.4f')} | "
                     f"{f(r['kernel_ms'], '.4f')} | {f(r['x_eager'], '.2f')} | {f(r['x_compile'], '.2f')} | {f(r['gbps'], '.0f')} | "
                     f"{f(r['tflops'], '.0f')} | {pct}{'' if r['valid'] else ' INVALID'} | {f(r['host_us'], '.1f')} / {f(r['eager_host_us'], '.1f')} |")
    tail = (f"\nGeomean speedup vs eager: **{f(summary['geomean_eager'], '.2f')}**, vs torch.compile: **{f(summary['geomean_compile'], '.2f')}** "
            f"over {summary['n']} cases; correct operators: {summary['correct']}/{summary['ops']}.\n")
    return head + "\n".join(lines) + "\n" + tail


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['op']}\n{r['case']} {r['dtype'].replace('float', 'f')}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows)), 5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["x_eager"] or 0 for r in rows], width=0.4, label="vs eager")
    ax.bar([x + 0.2 for x in xs], [r["x_compile"] or 0 for r in rows], width=0.4, label="vs torch.compile")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs), labels, rotation=90, fontsize=6)
    ax.set_ylabel("speedup (x)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_all(args, specs: list[str], out: Path, logs: Path, timings: dict) -> dict[str, dict]:  # noqa: ANN001
    def one(spec: str) -> tuple[str, dict]:
        import yaml

        name = yaml.safe_load(Path(spec).read_text())["name"]
        op_dir, log = out / name, logs / f"{name}.log"
        t = timings.setdefault(name, {})
        rc, t["new_s"] = sh(kg("new", spec, "--out", str(out), "--force", "--backend", "offline", "--no-bench"), log, args.timeout)
        if rc:
            print(f"{name}: kernelgen new failed (rc {rc}); see {log}", flush=True)
            return name, {}
        if args.rounds:
            rc, t["optimize_s"] = sh(kg("optimize", str(op_dir), "--rounds", str(args.rounds), "--backend", "offline"), log, args.timeout)
        rc, t["bench_s"] = sh(kg("bench", str(op_dir), "--json", str(op_dir / "final_perf.json")), log, args.timeout)
        path = op_dir / "final_perf.json"
        print(f"{name}: new {t['new_s']:.0f} s, optimize {t.get('optimize_s', 0):.0f} s, bench {t['bench_s']:.0f} s (rc {rc})", flush=True)
        return name, (json.loads(path.read_text()) if path.is_file() else {})

    with ThreadPoolExecutor(args.jobs) as pool:
        return dict(pool.map(one, specs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "latest")
    ap.add_argument("--specs", default=str(REPO / "operator_specs" / "*.yaml"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=min(6, os.cpu_count() or 2))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--collect-only", action="store_true",
                    help="run nothing: rebuild the table from the final_perf.json files already under --out "
                         "(e.g. an earlier run that was split over two calls)")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    specs = sorted(glob.glob(args.specs))
    info = versions()
    timings: dict[str, dict[str, float]] = {}
    t_start = time.monotonic()

    os.environ["KERNELGEN_DEVICE_LOCK"] = str(out / "device.lock")
    if args.collect_only:
        previous = out / "results.json"
        if previous.is_file():
            info = json.loads(previous.read_text())["info"]  # the versions of the machine that measured
        results = {}
        for path in sorted(out.glob("*/final_perf.json")):
            results[path.parent.name] = json.loads(path.read_text())
        specs = list(results)
    else:
        results = run_all(args, specs, out, logs, timings)

    rows = [r for name in results for r in rows_for(name, results[name])]
    xe = [r["x_eager"] for r in rows if r["x_eager"]]
    xc = [r["x_compile"] for r in rows if r["x_compile"]]
    summary = {
        "geomean_eager": math.exp(sum(map(math.log, xe)) / len(xe)) if xe else None,
        "geomean_compile": math.exp(sum(map(math.log, xc)) / len(xc)) if xc else None,
        "n": len(rows),
        "ops": len(specs),
        "correct": sum(1 for n in results if (results[n].get("performance") or {}).get("cases")),
        "total_s": time.monotonic() - t_start,
    }
    (out / "results.json").write_text(json.dumps({"info": info, "summary": summary, "timings": timings, "rows": rows}, indent=2))
    md = markdown(rows, info, summary)
    (out / "results.md").write_text(md)
    if rows:
        plot(rows, out / "results.png")
    print(f"total {summary['total_s']:.0f} s\n")
    print(md)
    return 0 if rows and summary["correct"] == summary["ops"] else 1


if __name__ == "__main__":
    sys.exit(main())
