"""The GPU facts the trust, artifact and LLM work must show, in one call, with a short table last.

    python benchmarks/gpu_checks.py [--out DIR] [--old DIR] [--before DIR] [--only judge,sandbox,export,llm,forge]

1. the sandboxed judge on CUDA: `kernelgen new` for broadcast, row_sum, row_max (65536x4096 fp32:
   read-only kernels judged against the measured read ceiling, the best of several read-only kernels
   with Triton row sums among them, never above it for an honest kernel) and a matmul spec without
   `flops:` in bf16 and float32 (TFLOP/s from PyTorch's flop counter, against the rate of its own
   dtype: float32 against FP32 with TF32 off), and the ceilings per precision;
2. the cost of the judge split and the sandbox: `kernelgen test` wall time with the sandbox on, with
   it off (KERNELGEN_SANDBOX=off), and, given --old, with the KernelGen before the split;
3. an exported op (`kernelgen export`) captured in a CUDA graph and replayed, the result checked;
4. an LLM generation through a local scripted OpenAI-compatible server: the recorded prompt's
   device section (name, SMs, bandwidths, L2);
5. forged timings (`--only forge`): `kernelgen bench` of an honest broadcast kernel and of the same
   kernel that halves `torch.cuda.Event.elapsed_time` through `functools.update_wrapper` on its first
   call (tests/verify/adversarial/forge_event_timer.py) — refused by the static check, and with the
   static check switched off timed at its true time or rejected as forged-timing, never faster; given
   --before (a checkout of KernelGen before trusted timing), the honest kernel's timings and `bench`
   wall time there, for the overhead;
6. issue 31's attacks (`--only attacks`): each file of ATTACKS through `kernelgen test` and `kernelgen
   bench` with the static checks on (refused by the allowlist, naming the construct) and off (the
   worker's seal, the checked timed calls, the ablation: the violation its `# RUNTIME:` line names),
   the codes each run reports and whether a refused timing still showed a number; then the honest
   kernel's `bench` timings here and, given --before (a checkout before this work), there: within 1%.
7. issue 40's record and replay (`--only replay`): every file of tests/verify/replay_attacks/ and
   tests/verify/honest/ through `kernelgen test` (one seed) and `kernelgen bench`, with the static checks
   off (the attacks: refused by name, or timed at the honest kernel's speed; the honest ones: pass); the
   offline kernels of REPLAY_EXAMPLES timed by `bench` here and, given --before (a checkout before record
   and replay), there: honest timings within 2%, and `bench` wall time not worse; and `bench --graph`'s
   CUDA-graph timing of each beside its replay's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Iterator

import yaml

from common import REPO, kernelgen, run_python, use_tests  # benchmarks/ is this script's folder, first on sys.path

SPECS = REPO / "operator_specs"


def kg(*args: str, env: dict | None = None, tree: Path | None = None) -> tuple[int, str, float]:
    """`kernelgen ARGS` with `env` over this process's environment; `tree`: another checkout's, run in it."""
    return kernelgen(*args, tree=tree, env={**os.environ, **(env or {})})


def spec_variant(src: str, dst: Path, **changes: object) -> Path:
    data = yaml.safe_load((SPECS / src).read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    dst.write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/kg-gpu-checks"))
    ap.add_argument("--old", type=Path, help="a checkout of KernelGen before the judge split, to time `test` with")
    ap.add_argument("--before", type=Path, help="a checkout of KernelGen before trusted timing, for the forge check's overhead")
    ap.add_argument("--examples", default=",".join(REPLAY_EXAMPLES), help="the examples replay and replay-examples time")
    ap.add_argument("--only", default="judge,sandbox,export,llm", help="which checks, comma-separated (also: forge, attacks, replay, replay-examples)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str]] = []

    def add(row: tuple[str, str]) -> None:  # printed as it comes: a device call's time limit may cut the rest
        rows.append(row)
        print(f"{row[0]:<44} {row[1]}", flush=True)

    gen = out / "generated"
    if not (gen / "broadcast" / "state.json").is_file() and only & {"sandbox", "export"}:
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(gen), "--force", "--backend", "offline", "--no-bench")
    # the exported op in a CUDA graph and under torch.compile
    if "export" in only:
        add(export_check(gen / "broadcast", out))
    if "judge" in only:
        for row in judge_rows(out, gen):
            add(row)
    if "sandbox" in only:
        for row in sandbox_rows(gen / "broadcast", out, args.old):
            add(row)
    if "llm" in only:
        add(llm_check(out))
    if "forge" in only:  # a folder of its own, written by this tree (the integrity record names the tool)
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(out / "forge-generated"), "--force", "--backend", "offline",
           "--no-bench")
        for row in forge_check(out / "forge-generated" / "broadcast", out, args.before):
            add(row)
    if "attacks" in only:
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(out / "attack-generated"), "--force", "--backend", "offline",
           "--no-bench")
        for row in attack_check(out / "attack-generated" / "broadcast", out, args.before):
            add(row)
    if "replay" in only:
        for row in replay_check(out, args.before, args.examples.split(",")):
            add(row)
    elif "replay-examples" in only:  # the examples alone: a device call runs the files on other GPUs
        for row in replay_examples(out, args.before, args.examples.split(",")):
            add(row)
    return 0


def judge_rows(out: Path, gen: Path) -> Iterator[tuple[str, str]]:
    """1. the judge on CUDA: `new` and `bench` of broadcast, row_sum, row_max and a matmul without flops."""
    specs = {
        "broadcast": SPECS / "broadcast.yaml",
        "row_sum": spec_variant("row_sum.yaml", out / "row_sum.yaml", perf_cases=[{"x": [65536, 4096]}], perf_dtypes=["float32"]),
        "row_max": spec_variant("row_max.yaml", out / "row_max.yaml", perf_cases=[{"x": [65536, 4096]}], perf_dtypes=["float32"]),
        "matmul_noflops": spec_variant("matmul_leakyrelu.yaml", out / "matmul_noflops.yaml", name="matmul_noflops",
                                       flops=None, perf_cases=[{"a": [4096, 4096], "b": [4096, 4096]}], perf_dtypes=["bfloat16", "float32"],
                                       reference="def matmul_noflops(a, b, negative_slope=0.01):\n    return F.leaky_relu(a @ b, negative_slope)\n"),
    }
    for name, spec in specs.items():
        # the judge's verdicts and ceilings: torch.compile and the peers would only cost time here
        rc, text, secs = kg("new", str(spec), "--out", str(gen), "--force", "--backend", "offline", "--no-bench")
        if rc == 0:
            rc2, text2, secs2 = kg("bench", str(gen / name), "--no-compile", "--no-peers", "--json", str(gen / name / "bench.json"))
            text, secs = text + text2, secs + secs2
        (out / f"new_{name}.log").write_text(text)
        state = json.loads((gen / name / "state.json").read_text()) if (gen / name / "state.json").is_file() else {}
        r0 = (state.get("rounds") or [{}])[0]
        acc = (r0.get("accuracy") or {}).get("accuracy") or {}
        bench = gen / name / "bench.json"
        perf = (json.loads(bench.read_text()).get("performance") or {}) if bench.is_file() else {}
        yield (f"new {name}", f"rc {rc}, {secs:.0f} s, accuracy {acc.get('correct')} "
               f"({len(acc.get('checks', []))}/{acc.get('checks_expected')}), sandbox missing: {acc.get('sandbox') or 'none'}")
        for c in perf.get("cases", []):
            unit = (f"{c.get('tflops') or 0:.0f} TFLOP/s ({c.get('flops_source')}, against {c.get('precision')})"
                    if c.get("bound") == "compute" else f"{c.get('gbps') or 0:.0f} GB/s")
            peers = ", ".join(f"{k} {v['ms']:.4f}" for k, v in (c.get("peers") or {}).items()) or "none"
            yield (f"  {name} {next(iter(c['shapes'].values()))} {c['dtype']}",
                   f"{c['kernel']['ms']:.4f} ms, {unit}, {100 * (c.get('frac_peak') or 0):.0f}% of the {c.get('ceiling')} "
                   f"ceiling, valid {c.get('valid')}, x eager {c.get('speedup_eager') or 0:.2f}, peers: {peers}")
        if perf.get("peaks"):
            p = perf["peaks"]
            reads = p.get("read_by_kernel") or {}
            best = max(reads, key=reads.get) if reads else "?"
            rates = ", ".join(f"{k} {v:.0f}" for k, v in (p.get("matmul") or {}).items())
            yield ("  ceilings", f"copy {p['copy_gbps']:.0f} GB/s, read {p.get('read_gbps') or 0:.0f} GB/s ({best}), "
                                 f"matmul TFLOP/s {rates} ({p['device_name']}, TF32 {'on' if perf.get('tf32') else 'off'})")


def sandbox_rows(op: Path, out: Path, old: Path | None) -> Iterator[tuple[str, str]]:
    """2. the cost of the judge split and the sandbox, per `kernelgen test` (given --old, before the split too)."""
    for label, env in (("sandbox on", {}), ("sandbox off", {"KERNELGEN_SANDBOX": "off"})):
        times = []
        for _ in range(2):
            rc, text, secs = kg("test", str(op), env=env)
            times.append(secs)
        yield (f"kernelgen test ({label})", f"rc {rc}, {min(times):.1f} s (best of 2)")
    if old is not None:
        old_gen = out / "old-generated"
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(old_gen), "--force", "--backend", "offline", "--no-bench",
           tree=old)
        times = []
        for _ in range(2):
            rc, text, secs = kg("test", str(old_gen / "broadcast"), tree=old)
            times.append(secs)
        yield ("kernelgen test (before the split)", f"rc {rc}, {min(times):.1f} s (best of 2)")


ADVERSARIAL = REPO / "tests" / "verify" / "adversarial"
BYPASS_STATIC = ("import sys; import kernelgen.verify.judge.judge as j; j.check_source = lambda *a, **k: []; "
                 "from kernelgen.cli import app; app(sys.argv[1:])")
# the stub lives in the CLI's process: the judge must run there too, not in the warm service (a process of
# its own, checks on), where on 2026-12-07 every attack file of issue 40 was refused by the static check
# this run meant to switch off (forbidden-api, monkeypatch), so the replay itself was never asked
NO_SERVICE = {"KERNELGEN_NO_SERVICE": "1"}


def _static_env(static: bool) -> dict[str, str] | None:
    return None if static else {**os.environ, **NO_SERVICE}


def _bench(op: Path, kernel: Path, out: Path, *, static: bool = True, repo: Path = REPO) -> tuple[int, dict, float, str]:
    """`kernelgen bench` of `kernel` on `op` (static checks off: the CLI with them stubbed out)."""
    cmd = ["-m", "kernelgen"] if static else ["-c", BYPASS_STATIC]
    args = ["bench", str(op), "--kernel", str(kernel), "--no-compile", "--no-peers", "--json", str(out)]
    rc, text, secs = run_python([*cmd, *args], tree=repo, env=_static_env(static))
    perf = (json.loads(out.read_text()).get("performance") or {}) if out.is_file() else {}
    if rc and not perf:
        print(f"bench of {kernel.name} exited {rc}: {text.strip()[-600:]}", file=sys.stderr)
    return rc, perf, secs, text


def _cases(perf: dict) -> dict[str, float]:
    return {f"{next(iter(c['shapes'].values()))} {c['dtype']}": c["kernel"]["ms"] for c in perf.get("cases", []) if c.get("kernel")}


def forge_check(op: Path, out: Path, before: Path | None) -> list[tuple[str, str]]:
    """The honest broadcast kernel and the same one with the elapsed_time patch, timed by `bench`."""
    rows: list[tuple[str, str]] = []
    rc, honest, secs, _ = _bench(op, ADVERSARIAL / "honest.py", out / "forge_honest.json")
    timed = _cases(honest)
    checks = {f"{next(iter(c['shapes'].values()))} {c['dtype']}": c.get("timing_check", "") for c in honest.get("cases", [])}
    rows.append(("forge: honest kernel", f"rc {rc}, bench {secs:.1f} s, violations: "
                 f"{[v['code'] for v in honest.get('violations', [])] or 'none'}"))
    rows += [(f"  honest {case}", f"{ms:.4f} ms; {checks.get(case, '')}") for case, ms in timed.items()]
    rc, perf, _, text = _bench(op, ADVERSARIAL / "forge_event_timer.py", out / "forge_static.json")
    codes = sorted({v["code"] for v in perf.get("violations", [])}) or [line for line in text.splitlines() if "monkeypatch" in line][:1]
    rows.append(("forge: patched, static checks on", f"rc {rc}, rejected by: {codes}"))
    rc, perf, _, _ = _bench(op, ADVERSARIAL / "forge_event_timer.py", out / "forge_runtime.json", static=False)
    codes = sorted({v["code"] for v in perf.get("violations", [])})
    rows.append(("forge: patched, static checks off", f"rc {rc}, violations: {codes or 'none'}"))
    for case, ms in _cases(perf).items():
        ratio = ms / timed[case] if timed.get(case) else float("nan")
        # The patch halves every timing: a forged run reads ~x0.5, two honest runs differ by a few %.
        verdict = ("forged-timing" if "forged-timing" in codes else "interpreter dry run, not a measurement"
                   if not perf.get("measured", True) else "its true time" if ratio >= 0.8 else "FASTER: forged and not caught")
        rows.append((f"  patched {case}", f"{ms:.4f} ms = x{ratio:.3f} of the honest time: {verdict}"))
    if before is not None:  # an operator folder of its own: the integrity record names the tool that wrote it
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(out / "before-generated"), "--force", "--backend", "offline",
           "--no-bench", tree=before)
        rc, old, old_secs, _ = _bench(out / "before-generated" / "broadcast", ADVERSARIAL / "honest.py",
                                      out / "forge_before.json", repo=before)
        rows.append(("overhead: bench wall time", f"before {old_secs:.1f} s, after {secs:.1f} s (rc before {rc})"))
        rows += [(f"  before/after {case}", f"{ms:.4f} -> {timed.get(case, float('nan')):.4f} ms")
                 for case, ms in _cases(old).items()]
    return rows


# issue 31's attack classes, each a kernel file with its expected refusal (`# EXPECT:`) and, where the
# allowlist is switched off, the run-time violation that must still reject it (`# RUNTIME:`)
ATTACKS = ("reach_worker_gc", "rebind_worker_method", "skip_when_timed", "cache_by_version", "computed_getattr",
           "private_dispatch_off", "ptr_cache")


def _test(op: Path, kernel: Path, *, static: bool) -> tuple[int, str]:
    """`kernelgen test` of `kernel` on `op`, one seed (static checks off: the CLI with them stubbed out)."""
    cmd = ["-m", "kernelgen"] if static else ["-c", BYPASS_STATIC]
    rc, text, _ = run_python([*cmd, "test", str(op), "--kernel", str(kernel), "--seeds", "1"], tree=REPO, env=_static_env(static))
    return rc, text


def _codes_in(text: str) -> list[str]:
    """The violation codes `text` names, as whole words ("monkeypatched" is not `monkeypatch`)."""
    import re

    from kernelgen.verify.judge.codes import VIOLATION_CODES

    return sorted(code for code in VIOLATION_CODES if re.search(rf"(?<![\w-]){re.escape(code)}(?![\w-])", text))


def attack_check(op: Path, out: Path, before: Path | None) -> list[tuple[str, str]]:
    """Each attack through test and bench, static checks on and off; the honest kernel's timings."""
    rows: list[tuple[str, str]] = []
    for name in ATTACKS:
        kernel = ADVERSARIAL / f"{name}.py"
        head = kernel.read_text().splitlines()[:2]
        want = head[0].removeprefix("# EXPECT: ") + (f" / off: {head[1].removeprefix('# RUNTIME: ')}"
                                                    if head[1].startswith("# RUNTIME: ") else "")
        rc, text = _test(op, kernel, static=True)
        rc_off, text_off = _test(op, kernel, static=False)
        brc, perf, _, btext = _bench(op, kernel, out / f"attack_{name}.json", static=False)
        shown = [f"{c['dtype']} {c['kernel']['ms']:.4f} ms" for c in perf.get("cases", [])
                 if c.get("kernel") and (c.get("violations") or not c.get("valid", True))]
        rows.append((f"attack {name}", f"want {want}; test rc {rc} {_codes_in(text)}; static off: test rc {rc_off} "
                     f"{_codes_in(text_off)}, bench rc {brc} {sorted({v['code'] for v in perf.get('violations', [])})}; "
                     f"refused timings in the table: {'none shown' if '│' in btext and not _refused_numbers(btext) else 'SHOWN'}"
                     f" ({len(shown)} refused case(s) kept in the JSON)"))
    rc, honest, secs, _ = _bench(op, ADVERSARIAL / "honest.py", out / "attack_honest.json")
    timed = _cases(honest)
    rows.append(("attacks: honest kernel", f"rc {rc}, bench {secs:.1f} s, violations: "
                 f"{[v['code'] for v in honest.get('violations', [])] or 'none'}"))
    if before is not None:
        kg("new", str(SPECS / "broadcast.yaml"), "--out", str(out / "attack-before"), "--force", "--backend", "offline",
           "--no-bench", tree=before)
        rc, old, old_secs, _ = _bench(out / "attack-before" / "broadcast", ADVERSARIAL / "honest.py",
                                      out / "attack_before.json", repo=before)
        rows.append(("honest bench wall time", f"before {old_secs:.1f} s, after {secs:.1f} s (rc before {rc})"))
        for case, ms in _cases(old).items():
            now = timed.get(case, float("nan"))
            rows.append((f"  before/after {case}", f"{ms:.4f} -> {now:.4f} ms (x{now / ms:.4f})"))
    else:
        rows += [(f"  honest {case}", f"{ms:.4f} ms") for case, ms in timed.items()]
    return rows


def _refused_numbers(table: str) -> list[str]:
    """Rows of a bench table whose verdict is not ok but whose kernel-ms cell holds a number."""
    rows = [line.split("│") for line in table.splitlines() if line.startswith("│")]
    return [r[3] for r in rows if len(r) > 11 and r[-2].strip() not in ("", "ok") and r[3].strip() not in ("", "—")]


def export_check(op: Path, out: Path) -> tuple[str, str]:
    rc, text, _ = kg("export", str(op))
    (out / "export.log").write_text(text)
    check = f"""
import importlib.util, torch
spec = importlib.util.spec_from_file_location("exported", "{op / 'broadcast_op.py'}")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
x = torch.randn(64, 1024, 256, device="cuda"); b = torch.randn(256, device="cuda")
op = torch.ops.kernelgen.broadcast
y = op(x, b); torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = op(x, b)
x.copy_(torch.randn_like(x)); g.replay(); torch.cuda.synchronize()
err = (out - (x + b)).abs().max().item()
f = torch.compile(lambda x, b: op(x, b) * 2, fullgraph=True)
err2 = (f(x, b) - (x + b) * 2).abs().max().item()
print(f"graph replay max err {{err:.2e}}; compile(fullgraph) max err {{err2:.2e}}")
assert err <= 1e-5 and err2 <= 1e-5, "the exported op's result is wrong under the graph or torch.compile"
"""
    p = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=REPO)
    return ("export -> CUDA graph", (p.stdout.strip().splitlines() or ["?"])[-1] if p.returncode == 0
            else f"FAILED (export rc {rc}): " + "\n".join(p.stderr.strip().splitlines()[-3:]))


def llm_check(out: Path) -> tuple[str, str]:
    """An LLM generation through a local scripted server: the recorded prompt's device section."""
    use_tests()  # the test suite's scripted OpenAI-compatible server
    from tests.support.fake_llm_server import FakeLLMServer, fenced, honest_kernel, ok

    with FakeLLMServer([ok(fenced(honest_kernel()))]) as server:
        rc, text, _ = kg("new", str(SPECS / "broadcast.yaml"), "--out", str(out / "llm"), "--force", "--backend", "openai",
                         "--base-url", server.url, "--model", "scripted", "--no-bench")
    rec = out / "llm" / "broadcast" / "llm" / "0001_generate.json"
    if rec.is_file():
        prompt = json.loads(rec.read_text())["messages"][1]["content"]
        device = prompt[prompt.find("## Device"):][:900]
        (out / "llm_prompt_device.md").write_text(device)
        return ("LLM prompt, device section", " | ".join(line.strip("- ") for line in device.splitlines()[1:6]))
    return ("LLM prompt", f"rc {rc}: " + text[-400:])


# issue 40: what record and replay must show on a GPU
REPLAY_ATTACKS = REPO / "tests" / "verify" / "replay_attacks"
REPLAY_HONEST = REPO / "tests" / "verify" / "honest"
REPLAY_EXAMPLES = ("broadcast", "softmax", "row_sum", "layer_norm", "matmul_leakyrelu", "swiglu")


def _replay_files(op: Path, out: Path) -> Iterator[tuple[str, str]]:
    """Each attack and honest file of issue 40 through test and bench, static checks off."""
    _, honest, _, _ = _bench(op, ADVERSARIAL / "honest.py", out / "replay_honest.json")
    timed = _cases(honest)
    for kernel in sorted(REPLAY_ATTACKS.glob("*.py")) + sorted(REPLAY_HONEST.glob("*.py")):
        want = kernel.read_text().splitlines()[0].removeprefix("# OUTCOME: ") if kernel.parent == REPLAY_ATTACKS else "pass"
        rc, text = _test(op, kernel, static=False)
        brc, perf, _, _ = _bench(op, kernel, out / f"replay_{kernel.stem}.json", static=False)
        ratios = [f"x{ms / timed[case]:.3f}" for case, ms in _cases(perf).items() if timed.get(case)]
        yield (f"replay {kernel.stem}", f"want {want}; test rc {rc} {_codes_in(text)}; bench rc {brc} "
               f"{sorted({v['code'] for v in perf.get('violations', [])})}; vs honest {ratios or 'no timing'}")


def replay_check(out: Path, before: Path | None, names: Iterable[str] = REPLAY_EXAMPLES) -> Iterator[tuple[str, str]]:
    """Issue 40's files, then the examples' offline kernels timed here (and before), with --graph; each row
    yielded as it comes (on an H100 the whole check ran past a 450 s device call and printed nothing)."""
    gen = out / "replay-generated"
    kg("new", str(SPECS / "broadcast.yaml"), "--out", str(gen), "--force", "--backend", "offline", "--no-bench")
    yield from _replay_files(gen / "broadcast", out)
    yield from replay_examples(out, before, names)


def replay_examples(out: Path, before: Path | None, names: Iterable[str] = REPLAY_EXAMPLES) -> Iterator[tuple[str, str]]:
    """The examples' offline kernels timed here (and before, with `bench` wall time), with --graph.

    The wall-time comparison is fair only with the same options on both sides and caches of each tree's
    own: the device code is the same before and after, so whichever tree ran second would find its kernels
    compiled (1-3 s per kernel and dtype on an H100) in KernelGen's compile store and Triton's cache. Each
    tree gets empty ones (its `new` fills them, as a user's would), then `bench` runs twice, alternating
    trees: first after `new`, then again; the CUDA-graph timing is a last run."""
    gen = out / "replay-generated"
    caches = {t: {"KERNELGEN_CACHE_DIR": str(out / f"kg-cache-{t}"), "TRITON_CACHE_DIR": str(out / f"triton-cache-{t}")}
              for t in ("after", "before")}
    for name in names:
        kg("new", str(SPECS / f"{name}.yaml"), "--out", str(gen), "--force", "--backend", "offline", "--no-bench",
           env=caches["after"])
        op = gen / name
        json_out = out / f"replay_{name}_bench.json"
        trees: dict[str, tuple[Path | None, Path]] = {"after": (None, op)}
        if before is not None:
            kg("new", str(SPECS / f"{name}.yaml"), "--out", str(out / "replay-before"), "--force", "--backend", "offline",
               "--no-bench", tree=before, env=caches["before"])
            trees["before"] = (before, out / "replay-before" / name)
        secs: dict[str, list[float]] = {t: [] for t in trees}
        rcs: dict[str, list[int]] = {t: [] for t in trees}
        for _run in ("first", "again"):
            for t, (tree, folder) in trees.items():
                dest = json_out if t == "after" else out / f"replay_{name}_before.json"
                rc, text, took = kg("bench", str(folder), "--no-compile", "--no-peers", "--json", str(dest), env=caches[t], tree=tree)
                secs[t].append(took)
                rcs[t].append(rc)
                if rc != 0:  # matmul_leakyrelu's second bench exited 1 on an H100 (2026-12-08), unseen why
                    print(f"bench of {name} ({t}, {_run}) exited {rc}: {text.strip()[-1500:]}", file=sys.stderr)
        perf = (json.loads(json_out.read_text()).get("performance") or {}) if json_out.is_file() else {}
        now = _cases(perf)
        yield (f"replay bench {name}", f"rc {'/'.join(map(str, rcs['after']))} (first/again), violations "
                     f"{sorted({v['code'] for v in perf.get('violations', [])}) or 'none'}")
        old: dict[str, float] = {}
        if before is not None:
            old_json = out / f"replay_{name}_before.json"
            old = _cases((json.loads(old_json.read_text()).get("performance") or {}) if old_json.is_file() else {})
            yield (f"  {name} bench wall time", f"first: before {secs['before'][0]:.1f} s, after {secs['after'][0]:.1f} s; "
                   f"again: before {secs['before'][1]:.1f} s, after {secs['after'][1]:.1f} s (rc before {'/'.join(map(str, rcs['before']))})")
        graph_json = out / f"replay_{name}_graph.json"
        kg("bench", str(op), "--no-compile", "--no-peers", "--graph", "--json", str(graph_json),
           env=caches["after"])
        gperf = (json.loads(graph_json.read_text()).get("performance") or {}) if graph_json.is_file() else {}
        graphs = {f"{next(iter(c['shapes'].values()))} {c['dtype']}": c["graph"]["ms"] for c in gperf.get("cases", []) if c.get("graph")}
        for case, ms in now.items():
            was = f"before {old[case]:.4f} ms, x{ms / old[case]:.4f}; " if case in old else ""
            graph = f"graph {graphs[case]:.4f} ms" if case in graphs else "no graph timing"
            yield (f"  {name} {case}", f"{was}replay {ms:.4f} ms; {graph}")


if __name__ == "__main__":
    sys.exit(main())
