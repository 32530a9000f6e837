"""Where the seconds of one operator's commands go, step by step, and (with --old) beside an older tree.

    python benchmarks/profile_check.py [--specs SPEC ...] [--old PATH] [--rounds N] [--out DIR]

Per operator (default: broadcast, softmax, a KernelBench-size float32 matmul, A.T @ B with A
8192x2048 and B 8192x4096: benchmarks/specs/matmul_fp32.yaml, and two KernelBench-format problems
written for these benchmarks: a level-2 GEMM + bias + scale + ReLU, benchmarks/specs/kb_gemm_epilogue.py,
and a level-1 row sum, benchmarks/specs/kb_row_reduction.py), each command in a fresh process as a
user types it, against an empty per-user cache (the device's measured ceilings copied in, as every
user has them after their first bench), with no KernelGen service (KERNELGEN_NO_SERVICE=1):
  new --no-bench (cold)      nothing compiled yet
  new --no-bench (again)     the same spec regenerated: compiled kernels kept from the first
  test                       `kernelgen test OP_DIR`
  bench (first)              eager, torch.compile and peers timed
  bench (cached)             the baselines from the cache
  new (with measurement)     check and bench in one command, the baselines cached
then the same commands through the warm KernelGen service (a tree that has one; a runtime folder of
this run's own): the first `test` starts it, the second finds it warm (and the kernel's worker kept),
then bench, new --no-bench and new; the service is stopped after. Then, in one process, against a
fresh cache: judge + worker start + kernel import; accuracy cold and warm (a second run in the same
judge); performance (eager, torch.compile, peers, kernel); the kernel alone, warm; with --rounds N,
`optimize --rounds N --backend offline` last. `--old PATH` (a checkout of an older tree, e.g.
`git worktree add ../old 2bf25a5`) runs the same in that tree and prints its seconds beside. The
table comes last, with issue 32's targets for broadcast and the KernelBench problems; also DIR/profile.md.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, kernelgen, tree_env, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

use_this_tree()  # this checkout's kernelgen, whatever else is installed

SPECS = REPO / "benchmarks" / "specs"
DEFAULT_SPECS = [REPO / "operator_specs" / "broadcast.yaml", REPO / "operator_specs" / "softmax.yaml",
                 SPECS / "matmul_fp32.yaml", SPECS / "kb_gemm_epilogue.py", SPECS / "kb_row_reduction.py"]
COLD = ["new --no-bench (cold)", "new --no-bench (again)", "test", "bench (first)", "bench (cached)", "new (with measurement)"]
SERVICE = ["service: test (first: starts it)", "service: test (warm)", "service: bench (warm, cached)",
           "service: new --no-bench (warm)", "service: new (warm)"]
ROWS = COLD + SERVICE + ["judge + worker start + import", "accuracy cold", "accuracy warm",
                         "performance: eager, compile, peers, kernel", "performance: kernel only, warm", "optimize (offline rounds)"]
# Issue 32's targets on an H100 or H200, in seconds: broadcast's commands, and a KernelBench problem's `new`.
TARGETS = {"test": "broadcast ≤ 6", "service: test (warm)": "broadcast ≤ 2", "new --no-bench (cold)": "broadcast ≤ 8",
           "bench (cached)": "broadcast ≤ 5", "new (with measurement)": "broadcast ≤ 12, KernelBench ≤ 20"}


def _fresh_cache(root: Path) -> Path:
    """An empty per-user cache, with the device's measured ceilings (measured once per device)."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=root))
    user = Path(os.environ.get("KERNELGEN_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelgen")
    if (user / "peaks.json").is_file():
        shutil.copy(user / "peaks.json", cache / "peaks.json")
    return cache


def _cli(tree: Path, cache: Path, *args: str, service: Path | None = None) -> tuple[float, int]:
    """One command in a fresh process; `service`: the runtime folder of the KernelGen service to use
    (None: no service, as every command ran before there was one)."""
    env = {**os.environ, "KERNELGEN_CACHE_DIR": str(cache)}
    if service is None:
        env["KERNELGEN_NO_SERVICE"] = "1"
    else:
        env.pop("KERNELGEN_NO_SERVICE", None)
        env["KERNELGEN_RUNTIME_DIR"] = str(service)
    # run outside any checkout: `python -m` puts the working folder first on the import path
    rc, output, secs = kernelgen(*args, tree=tree, env=env, cwd=cache, timeout=3600)
    if rc:
        print(f"kernelgen {' '.join(args[:1])} exited {rc}: {output.strip()[-600:]}", file=sys.stderr)
    return secs, rc


def _timed(row: dict[str, float | str], label: str, secs: float, rc: int) -> None:
    row[label] = secs if rc == 0 else f"{secs:.1f} (exit {rc})"


def _op_dir(gen: Path) -> str:
    """The operator folder `new` made (a KernelBench problem's name is derived from its file)."""
    made = [p for p in gen.iterdir() if p.is_dir() and not p.name.startswith(".") and ".previous-" not in p.name]
    return str(made[0]) if len(made) == 1 else str(gen / "missing")


def _service_rows(tree: Path, cache: Path, spec: Path, gen: Path, op_dir: str, row: dict[str, float | str]) -> None:
    """The same commands through the warm KernelGen service, in a runtime folder of this run's own."""
    if not (tree / "kernelgen" / "serve").is_dir():
        return  # a tree from before the service
    runtime = Path(tempfile.mkdtemp(prefix="kg-run-"))  # 0700, and short: a socket path has 108 bytes
    new = ["new", str(spec), "--out", str(gen), "--backend", "offline", "--force"]
    steps = [("service: test (first: starts it)", ["test", op_dir]), ("service: test (warm)", ["test", op_dir]),
             ("service: bench (warm, cached)", ["bench", op_dir]), ("service: new --no-bench (warm)", [*new, "--no-bench"]),
             ("service: new (warm)", new)]
    try:
        for label, args in steps:
            _timed(row, label, *_cli(tree, cache, *args, service=runtime))
    finally:
        _cli(tree, cache, "serve", "--stop", service=runtime)
        shutil.rmtree(runtime, ignore_errors=True)


def measure(tree: Path, spec: Path, out: Path, rounds: int, commands_only: bool = False) -> dict[str, float | str]:
    """Every row for one spec with the kernelgen of `tree` (this process imports only that one)."""
    use_this_tree(tree)
    os.environ["PYTHONPATH"] = tree_env(tree)["PYTHONPATH"]
    os.environ["KERNELGEN_NO_SERVICE"] = "1"  # the in-process rows below judge here
    row: dict[str, float | str] = {}
    cache = _fresh_cache(out)
    gen = out / "generated"
    new = ["new", str(spec), "--out", str(gen), "--backend", "offline"]
    _timed(row, "new --no-bench (cold)", *_cli(tree, cache, *new, "--no-bench"))
    op_dir = _op_dir(gen)
    steps = [("new --no-bench (again)", [*new, "--no-bench", "--force"]), ("test", ["test", op_dir]),
             ("bench (first)", ["bench", op_dir]), ("bench (cached)", ["bench", op_dir]),
             ("new (with measurement)", [*new, "--force"])]
    for label, args in steps:
        _timed(row, label, *_cli(tree, cache, *args))
    _service_rows(tree, cache, spec, gen, op_dir, row)
    if commands_only:
        return row
    os.environ["KERNELGEN_CACHE_DIR"] = str(_fresh_cache(out))
    from kernelgen.devices import resolve_device
    from kernelgen.opdir import open_operator
    from kernelgen.verify.judge.runner import kernel_source, open_judge, run_accuracy, run_performance

    dev = resolve_device("auto")
    op = open_operator(op_dir)
    t0 = time.monotonic()
    judge = open_judge(op, dev)
    try:
        judge.load(kernel_source(op, None))
        row["judge + worker start + import"] = time.monotonic() - t0
        for label in ("accuracy cold", "accuracy warm"):
            t0 = time.monotonic()
            rec = run_accuracy(op, dev, judge=judge)
            row[label] = time.monotonic() - t0 if rec.passed else f"FAIL {rec.describe()[:60]}"
        t0 = time.monotonic()
        run_performance(op, dev, judge=judge)
        row["performance: eager, compile, peers, kernel"] = time.monotonic() - t0
        t0 = time.monotonic()
        kernel_only = {"no_compile": True, "no_eager": True, "no_peers": True}
        kernel_only = {k: v for k, v in kernel_only.items() if k in inspect.signature(run_performance).parameters}
        rec = run_performance(op, dev, judge=judge, **kernel_only)
        row["performance: kernel only, warm"] = time.monotonic() - t0 if rec.passed else f"FAIL {rec.status}"
    finally:
        judge.close()
    if rounds:  # last: it changes the operator's kernel
        _timed(row, "optimize (offline rounds)", *_cli(tree, Path(os.environ["KERNELGEN_CACHE_DIR"]), "optimize", op_dir,
                                                       "--rounds", str(rounds), "--backend", "offline"))
    return row


def _cell(v: float | str | None) -> str:
    return "—" if v is None else (f"{v:.1f}" if isinstance(v, float) else v)


def table(results: dict[str, dict[str, dict[str, float | str]]], trees: list[str]) -> str:
    """Markdown: one row per step, a column per operator (and per tree, old first), issue 32's target last."""
    ops = list(results)
    head = ["step (s)"] + [f"{op} {t}" if len(trees) > 1 else op for op in ops for t in trees] + ["target (issue 32)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 2) + "---|"]
    for r in ROWS:
        cells = [_cell(results[op].get(t, {}).get(r)) for op in ops for t in trees]
        lines.append("| " + " | ".join([r, *cells, TARGETS.get(r, "")]) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", nargs="+", type=Path, default=DEFAULT_SPECS)
    ap.add_argument("--old", type=Path, default=None, help="a checkout of the older tree to compare with")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=0, help="also time `optimize --rounds N --backend offline` (last)")
    ap.add_argument("--commands-only", action="store_true", help="only the commands (cold and through the service), "
                    "not the in-process steps: about a minute less per operator and tree")
    ap.add_argument("--measure", nargs=2, metavar=("TREE", "SPEC"), help=argparse.SUPPRESS)  # one tree, one spec
    args = ap.parse_args()
    out = (args.out or Path(tempfile.mkdtemp(prefix="kg-profile-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]).resolve(), Path(args.measure[1]).resolve(), out, args.rounds,
                                 args.commands_only)))
        return 0
    trees = {"before": args.old.resolve(), "after": REPO} if args.old else {"after": REPO}
    results: dict[str, dict[str, dict[str, float | str]]] = {}
    for spec in args.specs:
        name = spec.stem
        results[name] = {}
        for label, tree in trees.items():
            where = out / f"{name}-{label}"
            where.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run([sys.executable, __file__, "--measure", str(tree), str(spec.resolve()), "--out", str(where),
                                   "--rounds", str(args.rounds), *(["--commands-only"] if args.commands_only else [])],
                                  capture_output=True, text=True)
            try:
                results[name][label] = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                results[name][label] = {r: "error" for r in ROWS}
            if proc.returncode or any(isinstance(v, str) for v in results[name][label].values()):
                print(proc.stderr[-2000:], file=sys.stderr)  # why a command failed
            print(f"{name} {label}: " + ", ".join(f"{k} {_cell(v)}" for k, v in results[name][label].items()), flush=True)
    text = table(results, list(trees))
    (out / "profile.md").write_text(text + "\n")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
