"""Round 0 on a GPU (issue 21): the analysis-driven first kernels against the best peer, the same with
the tuning memory's advice re-timed, a short search where round 0 is not enough, and host time.

    python benchmarks/round0.py [--specs operator_specs] [--memory EXPORT.json] [--rep-ms 40] [--no-sweep]

In one process, no judge (fast enough for ~8 minutes on one H100; the judge's numbers come from
`kernelgen new` / `bench`): every example spec's perf cases x perf dtypes, plus softmax 32x32000.
Columns, per case x dtype (device time: kernelgen.verify.timing, L2 flushed, faster half of the reps):
- round 0: `first_kernel(spec, sm_count)` (kernelgen.offline.round0), its route for the case;
- + memory: the round-0 kernel with the tuning memory's advice for the case (kernelgen.memory:
  the user's memory, plus --memory's export imported as hypotheses), timed here: the better of the
  two, as the planner's memory round would keep it ("=" when the memory has nothing for the case);
- eager, Liger-Kernel, FlagGems (each checked against the reference first), and the best of them;
  the peers run in a child process of their own, as `bench` runs them (kernelgen.verify.judge.peerproc):
  FlagGems hit an illegal memory access in rms_norm's reference (16384x4096 float32, H100, 2026-11-24),
  which poisoned this script's CUDA context and ended the run; now that case loses its FlagGems column;
- x best: best peer / ours (>= 1 is as fast).
Then the search (--no-sweep skips it): for log_softmax 4096x50257 and softmax 2048x32768, a grid of
row settings (algorithm, persistent, LOOP_BLOCK, num_warps) with the best against eager and the peers:
the settings a second pass of round 0 should pick. Then host time per call (decode-sized shapes, no
device sync): every spec's first test case and the issue's decode shapes, against an empty Triton
launch and eager.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

from common import REPO, load_entry, use_this_tree  # benchmarks/ is this script's folder, first on sys.path
from launch_overhead import _empty  # the empty launch every host time is read against (and no interpreter)

use_this_tree()

EXTRA_CASES = {"softmax": [{"x": [32, 32000]}]}  # the few-rows case, beside the spec's own
DECODE = {"rms_norm": {"x": [1, 4096], "weight": [4096]}, "swiglu": {"gate": [32, 11008], "up": [32, 11008]},
          "gelu": {"x": [32, 8192]}}
SWEEP = {"log_softmax": {"x": [4096, 50257]}, "softmax": {"x": [2048, 32768]}}
SWEEP_GRID = {"algorithm": ["online", "looped"], "persistent": [True, False], "LOOP_BLOCK": [4096, 8192],
              "num_warps": [8, 16, 32]}  # 18 settings per case x dtype: ~2 minutes of compiling on an H100


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=Path, default=REPO / "operator_specs")
    ap.add_argument("--memory", type=Path, help="a `kernelgen memory export` file to advise from, besides the user's memory")
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args()

    from kernelgen.devices import DeviceInfo, device_facts
    from kernelgen.memory import TuningMemory, read_export

    facts = device_facts(DeviceInfo("cuda", "cuda", interpreter=False))
    with TuningMemory() as mem:
        remembered = [e for _, e in mem.entries(device=facts.name)]
    if args.memory:
        remembered += [e.model_copy(update={"origin": "imported"}) for e in read_export(args.memory).entries]
    print(f"{facts.name} ({facts.sm_count} SMs, L2 {(facts.l2_bytes or 0) >> 20} MB), torch {facts.torch_version}, "
          f"triton {facts.triton_version}; {len(remembered)} memory entries for this device", flush=True)
    bench = _Bench(args.rep_ms)
    rows = [row for path in sorted(args.specs.glob("*.yaml")) for row in round0_rows(bench, path, facts, remembered)]
    sweeps = [] if args.no_sweep else sweep_rows(bench, args.specs)
    print_tables(rows, sweeps, *host_rows(bench, args.specs, facts))
    return 0


class _Bench:
    """Timing (kernelgen.verify.timing, L2 flushed, faster half) and kernels loaded from folders of their own."""

    def __init__(self, rep_ms: float):
        self.rep_ms = rep_ms
        self.folder = Path(tempfile.mkdtemp(prefix="kg-round0-"))

    def ms(self, fn) -> float:  # noqa: ANN001
        from kernelgen.verify.timing import rep_times, summarize

        return summarize(rep_times(fn, "cuda", warmup_ms=10, rep_ms=self.rep_ms)).ms

    def load(self, name: str, source: str):  # noqa: ANN201 - each file in a folder of its own (load_entry's)
        return load_entry(source, name, self.folder)


def peers_ms(spec, todo: list[tuple[int, dict, str]]) -> dict[tuple[int, str], dict[str, float]]:  # noqa: ANN001
    """The peer libraries' ms on each (index, shapes, dtype), timed in a child process of their own as
    `bench` times them (each checked against the reference there first); a peer that crashes on a case
    is named and left out of it, and this process's CUDA context is untouched."""
    from kernelgen.verify.judge.peerproc import peer_timings

    run = peer_timings(spec, "cuda", todo, None)  # no other KernelGen process times beside this script
    for note in run.notes:
        print(f"  {spec.name}: {note}", flush=True)
    return {key: {name: t.ms for name, t in timings.items()} for key, timings in run.timings.items()}


def _advised(bench: _Bench, spec, r0, case, dtype, remembered, device, family, space, inputs, expected):  # noqa: ANN001, ANN202
    """The round-0 kernel with the memory's advice for this case, timed; None where it has none."""
    import torch

    from kernelgen.memory import advise
    from kernelgen.offline import generate_kernel

    advice = [a for a in advise(remembered, device=device, family=family, dtype=dtype, shapes=case)
              if a.knob in space and a.value in space[a.knob]]  # an LLM's whole-file changes are not knobs
    if not advice:
        return None
    knobs = {a.knob: a.value for a in reversed(advice)}  # the largest win of each knob last: it stays
    entries = [e for e in r0.dispatch if not (e.dtype == dtype and e.shapes == case)]
    here = next((e.knobs for e in r0.dispatch if e.dtype == dtype and e.shapes == case), {})
    entries.append({"dtype": dtype, "shapes": case, "knobs": {**here, **knobs}, "reason": "memory"})
    try:
        mfn = bench.load(spec.name, generate_kernel(spec, None, dispatch=entries).source)
        torch.testing.assert_close(mfn(*inputs, **spec.param_defaults), expected, atol=0.05, rtol=0.05)
        return bench.ms(lambda: mfn(*inputs, **spec.param_defaults))
    except Exception as e:  # noqa: BLE001 - advice the generator or the check refuses is not kept
        print(f"  {spec.name}: memory advice {knobs} refused: {type(e).__name__}: {str(e)[:80]}", flush=True)
        return None


def round0_rows(bench: _Bench, path: Path, facts, remembered) -> list[tuple]:  # noqa: ANN001
    """(label, round 0 ms, + memory ms, {eager, peers: ms}, best) per perf case x dtype of one spec."""
    from kernelgen.offline import family_of, first_kernel, knob_space
    from kernelgen.spec import draw_inputs, load_reference, load_spec

    spec = load_spec(path)
    family = family_of(spec)
    r0 = first_kernel(spec, facts.sm_count)
    fn = bench.load(spec.name, r0.source)
    space, reference = knob_space(spec), load_reference(spec)
    todo, mine = [], []
    for case in [*spec.effective_perf_cases, *EXTRA_CASES.get(spec.name, [])]:
        for dtype in spec.effective_perf_dtypes:
            inputs = draw_inputs(spec, case, dtype, 0, "cuda", on_device=True)
            expected = reference(*inputs, **spec.param_defaults)
            ours = bench.ms(lambda: fn(*inputs, **spec.param_defaults))
            advised = _advised(bench, spec, r0, case, dtype, remembered, facts.name, family, space, inputs, expected)
            eager = bench.ms(lambda: reference(*inputs, **spec.param_defaults))
            todo.append((len(todo), case, dtype))
            mine.append((f"{spec.name} {'x'.join(map(str, next(iter(case.values()))))} {dtype}", ours, advised, eager))
            del inputs, expected
    peers = peers_ms(spec, todo)  # after ours: nothing else on the GPU while either is timed
    rows = []
    for (i, _, dtype), (label, ours, advised, eager) in zip(todo, mine):
        peer = {"eager": eager, **peers.get((i, dtype), {})}
        best = min(peer, key=peer.get)
        rows.append((label, ours, advised, peer, best))
        print(f"  {label}: round 0 {1e3 * ours:.1f} us, best peer {best} {1e3 * peer[best]:.1f} us", flush=True)
    return rows


def sweep_rows(bench: _Bench, specs: Path) -> list[tuple]:
    """(label, best ms, its knobs, {eager, peers: ms}) for each SWEEP case x dtype."""
    import torch

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import draw_inputs, load_reference, load_spec

    sweeps = []
    for name, case in SWEEP.items():
        spec = load_spec(specs / f"{name}.yaml")
        reference = load_reference(spec)
        peers = peers_ms(spec, [(i, case, dtype) for i, dtype in enumerate(spec.effective_perf_dtypes)])
        for i, dtype in enumerate(spec.effective_perf_dtypes):
            inputs = draw_inputs(spec, case, dtype, 0, "cuda", on_device=True)
            expected = reference(*inputs)
            peer = {"eager": bench.ms(lambda: reference(*inputs)), **peers.get((i, dtype), {})}
            timed = []
            for values in itertools.product(*SWEEP_GRID.values()):
                knobs = dict(zip(SWEEP_GRID, values))
                if knobs["algorithm"] == "looped" and knobs["persistent"]:
                    continue
                try:
                    kfn = bench.load(name, generate_kernel(spec, knobs).source)
                    torch.testing.assert_close(kfn(*inputs), expected, atol=0.05, rtol=0.05)
                    timed.append((bench.ms(lambda: kfn(*inputs)), knobs))
                except Exception as e:  # noqa: BLE001 - a setting that does not compile or is wrong: skipped
                    print(f"  sweep {name} {dtype} {knobs}: {type(e).__name__}: {str(e)[:80]}", flush=True)
            best_ms, best_knobs = min(timed, key=lambda t: t[0])
            sweeps.append((f"{name} {'x'.join(map(str, case['x']))} {dtype}", best_ms, best_knobs, peer))
            del inputs, expected
    return sweeps


def host_rows(bench: _Bench, specs: Path, facts) -> tuple[float, list[tuple]]:  # noqa: ANN001
    """The empty launch's host µs, and (label, ours, eager) µs per call for each spec's first test case
    and the DECODE shapes."""
    import torch

    from kernelgen.offline import first_kernel
    from kernelgen.spec import draw_inputs, load_reference, load_spec
    from kernelgen.verify.timing import host_overhead_us

    x = torch.empty(1024, device="cuda")
    best_host = lambda f: min(host_overhead_us(f, "cuda") for _ in range(20))  # noqa: E731
    empty = best_host(lambda: _empty[(1,)](x, 1024, BLOCK=128))
    hosts = []
    for path in sorted(specs.glob("*.yaml")):
        spec = load_spec(path)
        fn = bench.load(spec.name, first_kernel(spec, facts.sm_count).source)
        reference = load_reference(spec)
        for case in [spec.test_cases[0], *([DECODE[spec.name]] if spec.name in DECODE else [])]:
            dtype = spec.dtypes[0]
            inputs = draw_inputs(spec, case, dtype, 0, "cuda", on_device=True)
            label = f"{spec.name} {'x'.join(map(str, next(iter(case.values()))))} {dtype}"
            hosts.append((label, best_host(lambda: fn(*inputs, **spec.param_defaults)),
                          best_host(lambda: reference(*inputs, **spec.param_defaults))))
    return empty, hosts


def print_tables(rows: list[tuple], sweeps: list[tuple], empty: float, hosts: list[tuple]) -> None:
    print("\n| case | round 0 µs | + memory µs | eager µs | Liger µs | FlagGems µs | best peer | round 0 x best | + memory x best |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    fmt = lambda v: "—" if v is None else f"{1e3 * v:.1f}"  # noqa: E731
    for label, ours, advised, peer, best in rows:
        kept = min(ours, advised) if advised is not None else ours
        print(f"| {label} | {fmt(ours)} | {'=' if advised is None else fmt(advised)} | {fmt(peer['eager'])} | "
              f"{fmt(peer.get('Liger-Kernel'))} | {fmt(peer.get('FlagGems'))} | {best} | x{peer[best] / ours:.2f} | "
              f"x{peer[best] / kept:.2f} |")
    if sweeps:
        print("\n| searched case | best setting | µs | eager µs | x eager | x best peer |\n|---|---|---:|---:|---:|---:|")
        for label, best_ms, knobs, peer in sweeps:
            best = min(peer.values())
            print(f"| {label} | {', '.join(f'{k}={v}' for k, v in knobs.items())} | {fmt(best_ms)} | {fmt(peer['eager'])} | "
                  f"x{peer['eager'] / best_ms:.2f} | x{best / best_ms:.2f} |")
    print(f"\n| call (host time, no sync) | µs/call | over the empty launch ({empty:.1f}) | eager µs/call |\n|---|---:|---:|---:|")
    for label, us, eager in hosts:
        print(f"| {label} | {us:.1f} | {us - empty:+.1f} | {eager:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
