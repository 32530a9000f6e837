"""GPU memory of one `kernelgen bench`, per process, as `nvidia-smi` sees it (issue 39: level 1's ReLU and
Softmax, 6.4 GB inputs, ran out of memory on an 80 GB H100 in the final bench).

    python benchmarks/bench_memory.py OP_DIR [OP_DIR ...] [--interval 0.25] [--tree PATH]

Each operator folder (a batch's `--out/<name>`, or `kernelgen new`'s) is benched as a user runs it,
`python -m kernelgen bench OP_DIR --json TMP` with KERNELGEN_NO_SERVICE=1 (so the judge is the bench
process itself, and every process it starts is its descendant), while `nvidia-smi
--query-compute-apps` is read every --interval seconds. Per operator: the peak of each process of the
bench's tree -- the bench (the judge), the sandboxed workers (record, replay: forked from the judge's
fork server, so told apart by when they held memory), the peer libraries' process -- the peak of their
sum, the exit code and the seconds. `--tree PATH` benches with another checkout's kernelgen (e.g. the
tree before a change: `git worktree add ../old <commit>`), for a before/after on the same GPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, tree_env

GiB = 1 << 30


def _gpu_memory() -> dict[int, int]:
    """pid -> bytes it holds on any GPU (nvidia-smi's per-process figure: its context and allocator)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout
    held: dict[int, int] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            held[int(parts[0])] = held.get(int(parts[0]), 0) + int(parts[1]) * (1 << 20)
    return held


def _descendants(root: int) -> dict[int, str]:
    """pid -> its command line, for `root` and every process under it."""
    parent: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid = int(stat.parent.name)
            parent[pid] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd[pid] = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree and p not in tree}
        tree |= more
        grew = bool(more)
    return {p: cmd.get(p, "") for p in tree}


def _role(pid: int, root: int, cmdline: str) -> str:
    if pid == root:
        return "bench (judge)"
    if "peerproc" in cmdline:
        return "peer libraries"
    return "worker" if "kernelgen.verify.worker" in cmdline or "zygote" in cmdline else "other"


def bench_one(op_dir: Path, interval: float, tree: Path | None) -> None:
    env = {**tree_env(tree), "KERNELGEN_NO_SERVICE": "1"}
    scratch = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    out, said = scratch / "final.json", open(scratch / "output.txt", "w+")  # a file: a full pipe would stall the bench
    t0 = time.monotonic()
    # run in the tree's folder: `python -m` puts the working folder first on the path
    proc = subprocess.Popen([sys.executable, "-m", "kernelgen", "bench", str(op_dir), "--json", str(out)], env=env,
                            cwd=tree or REPO, stdout=said, stderr=subprocess.STDOUT, text=True)
    peak: dict[int, tuple[str, int, float, float]] = {}  # pid -> role, peak bytes, first and last second seen holding
    total = 0
    while proc.poll() is None:
        held, tree_now = _gpu_memory(), _descendants(proc.pid)
        mine = {p: b for p, b in held.items() if p in tree_now}
        total = max(total, sum(mine.values()))
        now = time.monotonic() - t0
        for p, b in mine.items():
            role, most, first, _ = peak.get(p, (_role(p, proc.pid, tree_now[p]), 0, now, now))
            peak[p] = (role, max(most, b), first, now)
        time.sleep(interval)
    said.seek(0)
    err = said.read()
    said.close()
    print(f"\n{op_dir.name}: exit {proc.returncode} after {time.monotonic() - t0:.1f} s; peak of the tree's sum "
          f"{total / GiB:.1f} GiB")
    for p, (role, most, first, last) in sorted(peak.items(), key=lambda kv: kv[1][2]):
        print(f"  {role:16s} pid {p:<8d} peak {most / GiB:6.1f} GiB   holding from {first:6.1f} s to {last:6.1f} s")
    if proc.returncode:
        print("  " + "\n  ".join(err.strip().splitlines()[-5:]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op_dirs", nargs="+", type=Path)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between nvidia-smi reads")
    ap.add_argument("--tree", type=Path, default=None, help=f"the kernelgen checkout to bench with (default {REPO})")
    args = ap.parse_args()
    for op_dir in args.op_dirs:
        bench_one(op_dir.resolve(), args.interval, args.tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
