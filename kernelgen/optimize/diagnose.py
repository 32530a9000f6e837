"""The bottleneck analysis of a round's starting point, from its measurements only: the bytes and
FLOPs the op must move, what the kernel achieved, where that stands against the device's measured
ceilings (kernelgen.verify.judge.peaks), and how far the target is. No guesses: a number that was not measured
is reported as missing, and the CPU interpreter, which has no ceilings, says so."""

from __future__ import annotations

from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.record.state import Diagnosis
from kernelgen.record.text import si
from kernelgen.verify.results import PerformanceResult

# Within 5% of the measured ceiling there is nothing left to win that the noise would not hide.
CEILING_FRACTION = 0.95



def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def diagnose(perf: PerformanceResult | None, round_: int, target: float | None) -> Diagnosis:
    if perf is None or not perf.cases:
        why = perf.error.splitlines()[-1] if perf is not None and perf.error else "no performance result"
        return Diagnosis(round=round_, measured=False, target=target, lines=[f"Round {round_} has no timings to analyse ({why})."])
    g_eager, g_comp = perf.geomean("speedup_eager"), perf.geomean("speedup_compile")
    fracs = [c.frac_peak for c in perf.cases if c.frac_peak is not None]
    worst = min((c for c in perf.cases if c.frac_peak is not None), key=lambda c: c.frac_peak or 0.0, default=None)
    d = Diagnosis(round=round_, measured=perf.measured, speedup_eager=g_eager, speedup_compile=g_comp,
                  min_frac_peak=min(fracs) if fracs else None, bound=worst.bound if worst else "unknown", target=target)
    label = "" if perf.measured else f" [{DRY_RUN_LABEL}]"
    d.lines.append(f"Starting point: round {round_} on {perf.device_name}{label}.")
    for c in perf.cases:
        parts = [f"`{c.label}`: moves at least {_human_bytes(c.bytes)}"]
        if c.flops:
            parts.append(si(c.flops, "FLOP"))  # 806400 FLOP is "806 kFLOP", not "0.00 GFLOP"
        parts += c.facts()
        d.lines.append(", ".join(parts) + ".")
    if perf.peaks is not None:
        p = perf.peaks
        tf = f", matmul {p.matmul_tflops:.0f} TFLOP/s" if p.matmul_tflops else ""
        d.lines.append(f"Device ceilings (measured {p.measured_at}): copy {p.copy_gbps:.0f} GB/s{tf}.")
    elif not perf.measured:
        d.lines.append("No device ceilings on the CPU interpreter: the fraction of peak and memory- vs "
                       "compute-bound cannot be judged here; measure on a GPU.")
    else:
        d.lines.append("No measured device ceilings for this device: fraction of peak unknown.")
    if d.min_frac_peak is not None:
        room = 1 / d.min_frac_peak if d.min_frac_peak > 0 else float("inf")
        d.lines.append(f"Gap: the worst case reaches {100 * d.min_frac_peak:.0f}% of the {d.bound}-bound ceiling, "
                       f"so at most x{room:.2f} is left there" + (" — at the ceiling." if d.min_frac_peak >= CEILING_FRACTION else "."))
    if target is not None and g_eager is not None:
        if d.target_met:
            d.lines.append(f"Target x{target:g} vs eager is met (geomean x{g_eager:.3g}).")
        else:
            d.lines.append(f"Target x{target:g} vs eager: geomean now x{g_eager:.3g}, x{target / g_eager:.2f} to go.")
    elif g_eager is not None:
        d.lines.append(f"No target speedup set; geomean x{g_eager:.3g} vs eager; optimizing toward the ceiling.")
    return d
