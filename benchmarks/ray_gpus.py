"""`kernelgen batch --engine ray` against `--engine local` on this host's GPUs, with a Ray task killed
mid-operator and the same command run again (issue 23). Two phases, one device call each:

    python benchmarks/ray_gpus.py local [--work /tmp/kgray] [--rounds 0]   # call 1
    python benchmarks/ray_gpus.py ray   [--work /tmp/kgray] [--rounds 0]   # call 2: then the table

`local` runs the example operators through `kernelgen batch --engine local --gpus all` (one worker per
GPU). `ray` starts a one-host Ray cluster (`ray start --head`), runs the same batch through
`--engine ray --ray-address auto`, SIGKILLs the Ray worker of the first operator whose round 0 came
back into --out (its pid is in the log that came back with it), lets the batch finish, runs the same
command again (which resumes that operator), stops the cluster, and prints one table comparing both
engines: status per operator (the same on both is the point), the GPU each task ran on (Ray's
placement, and CUDA_VISIBLE_DEVICES as the task's steps saw it), seconds, wall time per engine, and
whether two operators ever ran on one GPU at once.

Why two calls: a device call may run 10 minutes, and one operator with one round took about 92 s on
an H200 (issue 23: four in 184 s on two GPUs), so the 14 examples take about 7 x 92 s = 650 s per
engine; each engine gets a call of its own. `--rounds 0` (new, then the final bench: about 50 s an
operator) fits the 14 in about 7 x 50 = 350 s per call, with room for Ray's start, the kill and the
resumed operator; each batch is stopped at `--budget` seconds anyway, and a stopped batch is
resumable. Every engine gets cold caches of its own (Triton, TorchInductor, KernelGen's ceilings), so
the second engine's wall time is not helped by the first's compiles.

Results go under --work (kept between the two calls while the machine stays warm) and, where the
environment names OUT (the device call's output folder), copies of the reports and the table there.
`--device cpu` runs the same on the Triton interpreter (two workers, a two-CPU Ray cluster): a dry
run of this script, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from common import REPO  # benchmarks/ is this script's folder, first on sys.path
HEADER = re.compile(r"^\[(?P<at>[^\]]+)\] ray task on (?P<where>.+), worker pid (?P<pid>\d+): (?P<env>.*)$", re.M)
RERUN_RESERVE_S = 120  # of --budget, kept for the command run again (one operator's bench, or a round and bench)


def engine_env(work: Path, engine: str) -> dict[str, str]:
    """This process's environment with cold caches of the engine's own."""
    cache = work / f"{engine}-cache"
    return {**os.environ, "PYTHONUNBUFFERED": "1", "KERNELGEN_CACHE_DIR": str(cache / "kernelgen"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton")}


def batch_cmd(args: argparse.Namespace, engine: str) -> list[str]:
    cmd = [sys.executable, "-m", "kernelgen", "batch", str(args.specs), "--out", str(args.work / engine),
           "--rounds", str(args.rounds), "--backend", "offline", "--device", args.device, "--engine", engine,
           "--step-timeout", str(args.step_timeout)]
    if engine == "local":
        return cmd + ["--gpus", "2" if args.device == "cpu" else "all"]
    return cmd + ["--ray-address", "auto"]


def run_batch(cmd: list[str], env: dict[str, str], log: Path, deadline: float, tick=lambda: None) -> dict:
    """Run one batch (its output appended to `log`), stopped at `deadline`; its wall time and exit."""
    t0 = time.monotonic()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        stopped = False
        while proc.poll() is None:
            tick()
            if time.monotonic() > deadline and not stopped:
                stopped = True
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.2)
    return {"wall_s": round(time.monotonic() - t0, 1), "exit": proc.returncode, "stopped_at_budget": stopped}


class Killer:
    """From the driver's side: SIGKILL the Ray worker of the first operator whose round 0 came back
    into --out while its task still runs (no batch_job.json yet)."""

    def __init__(self, out: Path, t0: float):
        self.out, self.t0, self.done = out, t0, {}

    def __call__(self) -> None:
        if self.done or not (self.out / "_batch" / "logs").is_dir():
            return
        for log in sorted((self.out / "_batch" / "logs").glob("*.log")):
            op = self.out / log.stem
            if not (op / "state.json").is_file() or (op / "batch_job.json").is_file():
                continue
            heads = list(HEADER.finditer(log.read_text(encoding="utf-8", errors="replace")))
            pid = int(heads[-1]["pid"]) if heads else 0
            if not pid or not running_steps(f"kernelgen-batch-{log.stem}-pid{pid}-"):
                continue  # its task ended, or is between two steps: a reused worker may run another one by now
            try:  # the folder may be being replaced by a newer copy right now
                state = json.loads((op / "state.json").read_text())
            except (OSError, ValueError):
                continue
            round0 = next((r for r in state["rounds"] if r["round"] == 0), {})
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.done = {"op": log.stem, "pid": pid, "where": heads[-1]["where"], "env": heads[-1]["env"],
                         "after_s": round(time.monotonic() - self.t0, 1), "at": datetime.now().isoformat(timespec="seconds"),
                         "round0_started_at": round0.get("started_at"), "round0_finished_at": round0.get("finished_at")}
            print(f"killed the Ray worker (pid {pid}) of {log.stem} on {self.done['where']}, "
                  f"{self.done['after_s']} s into the batch", flush=True)
            return


def ray_cli(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=120)


def gpu_count(device: str) -> int:
    if device == "cpu":
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def report_file(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"operators": [], "summary": {}, "engine": "no report"}


def report(out: Path) -> dict:
    return report_file(out / "batch_report.json")


def intervals(out: Path, killed: dict) -> list[tuple[str, datetime, datetime, str]]:
    """(where, start, end, operator) of every job that ran under `out`, the killed attempt included."""
    found = []
    for job_file in out.glob("*/batch_job.json"):
        job = json.loads(job_file.read_text())
        if job.get("started_at") and job.get("finished_at") and not job.get("skipped"):
            found.append((job["target"], datetime.fromisoformat(job["started_at"]), datetime.fromisoformat(job["finished_at"]), job["name"]))
    if killed:
        log = (out / "_batch" / "logs" / f"{killed['op']}.log").read_text(encoding="utf-8", errors="replace")
        head = next(h for h in HEADER.finditer(log) if int(h["pid"]) == killed["pid"])
        found.append((killed["where"], datetime.fromisoformat(head["at"]), datetime.fromisoformat(killed["at"]), killed["op"] + " (killed)"))
    return found


def overlaps(spans: list[tuple[str, datetime, datetime, str]]) -> list[str]:
    """Pairs of jobs that ran on one device at once (times have a second's resolution: touching is not overlapping)."""
    clashes = []
    for where in {s[0] for s in spans}:
        on = sorted((s for s in spans if s[0] == where), key=lambda s: s[1])
        clashes += [f"{a[3]} and {b[3]} on {where}" for a, b in zip(on, on[1:]) if b[1] < a[2]]
    return clashes


def seen_env(out: Path, name: str) -> str:
    """CUDA_VISIBLE_DEVICES as each Ray attempt's steps saw it (from the log's task lines)."""
    log = out / "_batch" / "logs" / f"{name}.log"
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    seen = [re.search(r"CUDA_VISIBLE_DEVICES=(\S+)", h["env"]) for h in HEADER.finditer(text)]
    return ",".join(m.group(1) if m else "-" for m in seen) or "-"


def rerun_steps(out: Path, name: str, pid: int) -> list[str]:
    """The steps the operator ran after its killed attempt, from its log."""
    text = (out / "_batch" / "logs" / f"{name}.log").read_text(encoding="utf-8", errors="replace")
    heads = list(HEADER.finditer(text))
    killed_at = next((i for i, h in enumerate(heads) if int(h["pid"]) == pid), len(heads))
    return re.findall(r"\$ kernelgen (\w+)", text[heads[killed_at + 1].start():]) if killed_at + 1 < len(heads) else []


def running_steps(fragment: str) -> bool:
    """Whether a process of this host has `fragment` in its command line (a step's args name its
    task's scratch folder, which names the operator and the worker's pid)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if fragment.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def keep(src: Path, name: str) -> None:
    """A copy under the device call's output folder, when there is one."""
    out = os.environ.get("OUT")
    if out and src.is_file():
        shutil.copyfile(src, Path(out) / name)


def phase_local(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    shutil.rmtree(args.work / "local", ignore_errors=True)
    res = run_batch(batch_cmd(args, "local"), engine_env(args.work, "local"), args.work / "local_batch.txt", t0 + args.budget)
    (args.work / "local.json").write_text(json.dumps(res))
    for src, name in ((args.work / "local_batch.txt", "local_batch.txt"), (args.work / "local" / "batch_report.md", "local_report.md"),
                      (args.work / "local" / "batch_report.json", "local_report.json")):
        keep(src, name)
    rows = report(args.work / "local")["operators"]
    print(f"\nlocal engine: {res['wall_s']} s wall, exit {res['exit']}{' (stopped at --budget)' if res['stopped_at_budget'] else ''}")
    for r in rows:
        print(f"  {r['name']:18} {r['status']:9} {r['target']:8} {r['seconds']:6.0f} s  {r['reason'][:80]}")
    print("two jobs at once on one GPU:", "; ".join(overlaps(intervals(args.work / "local", {}))) or "never")
    return 0


def phase_ray(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    env = engine_env(args.work, "ray")
    out = args.work / "ray"
    shutil.rmtree(out, ignore_errors=True)
    gpus = gpu_count(args.device)
    cpus = 2 if args.device == "cpu" else os.cpu_count() or 2
    ray_cli("stop", "--force", env=env)
    ray_cli("start", "--head", "--port", "6379", f"--num-gpus={gpus}", f"--num-cpus={cpus}", "--include-dashboard=false",
            "--disable-usage-stats", env=env)
    started = round(time.monotonic() - t0, 1)
    log = args.work / "ray_batch.txt"
    log.unlink(missing_ok=True)
    killer = Killer(out, time.monotonic())
    try:
        first = run_batch(batch_cmd(args, "ray"), env, log, t0 + args.budget - RERUN_RESERVE_S, killer)
        if (out / "batch_report.json").is_file():  # the run again writes its own
            shutil.copyfile(out / "batch_report.json", args.work / "ray_first_report.json")
        again = run_batch(batch_cmd(args, "ray"), env, log, t0 + args.budget)
    finally:
        ray_cli("stop", "--force", env=env)
    result = {"cluster_start_s": started, "gpus": gpus, "first": first, "again": again, "killed": killer.done}
    (args.work / "ray.json").write_text(json.dumps(result, indent=1))
    table = summary(args, result)
    (args.work / "summary.md").write_text(table)
    for src, name in ((log, "ray_batch.txt"), (out / "batch_report.md", "ray_report.md"), (out / "batch_report.json", "ray_report.json"),
                      (args.work / "summary.md", "summary.md"), (args.work / "ray_first_report.json", "ray_first_report.json")):
        keep(src, name)
    if killer.done:
        keep(out / "_batch" / "logs" / f"{killer.done['op']}.log", "killed_op.log")
    print(table)
    return 0


def summary(args: argparse.Namespace, ray: dict) -> str:
    local_out, ray_out = args.work / "local", args.work / "ray"
    local_run = json.loads((args.work / "local.json").read_text()) if (args.work / "local.json").is_file() else None
    local = {r["name"]: r for r in report(local_out)["operators"]}
    rays = {r["name"]: r for r in report(ray_out)["operators"]}
    killed = ray["killed"]
    lines = []
    if local_run is None:
        lines.append("local engine: no results under --work (call 1 ran on another machine, or not at all)")
    else:
        lines.append(f"local engine: {local_run['wall_s']} s wall, exit {local_run['exit']}"
                     f"{', stopped at --budget' if local_run['stopped_at_budget'] else ''}")
    f, a = ray["first"], ray["again"]
    lines.append(f"ray engine: cluster started in {ray['cluster_start_s']} s ({ray['gpus']} GPU); batch {f['wall_s']} s wall, "
                 f"exit {f['exit']}{', stopped at --budget' if f['stopped_at_budget'] else ''}; the same command again "
                 f"{a['wall_s']} s, exit {a['exit']}")
    if killed:
        r0 = json.loads((ray_out / killed["op"] / "state.json").read_text())["rounds"][0] if (ray_out / killed["op"] / "state.json").is_file() else {}
        lines.append(f"killed: the Ray worker (pid {killed['pid']}) of {killed['op']} on {killed['where']}, {killed['after_s']} s in, "
                     f"round 0 finished at {killed['round0_finished_at']}; the first run said: {first_reason(args.work, killed['op'])}")
        lines.append(f"resumed: steps run again {rerun_steps(ray_out, killed['op'], killed['pid'])}; round 0 started_at "
                     f"{'unchanged' if r0.get('started_at') == killed['round0_started_at'] else 'CHANGED (redone)'}; "
                     f"{rays.get(killed['op'], {}).get('resumed', '')}")
    else:
        lines.append("killed: nothing (no operator's round 0 came back before its task ended)")
    for engine, out in (("local", local_out), ("ray", ray_out)):
        clash = overlaps(intervals(out, killed if engine == "ray" else {}))
        lines.append(f"{engine}: two operators at once on one GPU: {'; '.join(clash) or 'never'}")
    names = sorted(set(local) | set(rays))
    same = [n for n in names if local.get(n, {}).get("status") == rays.get(n, {}).get("status")]
    lines.append(f"same status on both engines: {len(same)}/{len(names)}"
                 + (f" (differ: {', '.join(n for n in names if n not in same)})" if len(same) < len(names) else ""))
    head = "| operator | local | local GPU | local s | ray | ray placed on | CUDA_VISIBLE_DEVICES seen | ray s | note |"
    rows = [head, "|" + "---|" * 9]
    for n in names:
        lo, ra = local.get(n, {}), rays.get(n, {})
        note = "killed, then resumed" if killed and n == killed["op"] else ""
        rows.append(f"| {n} | {lo.get('status', '—')} | {lo.get('target', '—')} | {lo.get('seconds', 0):.0f} | {ra.get('status', '—')} | "
                    f"{ra.get('target', '—')} | {seen_env(ray_out, n)} | {ra.get('seconds', 0):.0f} | {note} |")
    return "\n".join(lines) + "\n\n" + "\n".join(rows) + "\n"


def first_reason(work: Path, name: str) -> str:
    """The killed operator's status and reason in the first Ray run's report."""
    rows = {r["name"]: r for r in report_file(work / "ray_first_report.json")["operators"]}
    row = rows.get(name)
    return f"{row['status']}: {row['reason']}" if row else "(no report of the first run)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["local", "ray"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/kgray"))
    ap.add_argument("--specs", type=Path, default=REPO / "operator_specs")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--budget", type=float, default=520, help="seconds for the phase's batches; stopped after (resumable)")
    ap.add_argument("--step-timeout", type=float, default=300, help="seconds per step (new, optimize, bench) of one operator")
    args = ap.parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    return phase_local(args) if args.phase == "local" else phase_ray(args)


if __name__ == "__main__":
    sys.exit(main())
