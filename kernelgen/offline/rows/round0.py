"""Round 0 from the analysis: the row algorithm, tile and warps of every perf case x dtype, chosen
from what the trace and the spec already say (row length against the register budget, rows against
the SMs, element size), and written into round 0's dispatch table with the reason of each entry.

    single   rows whose register tile fits: next_pow2(cols) elements over the warps of a program,
             LIVE_VALUES fp32 values each (the row and its exp), within the registers a thread may
             hold while the program is resident (64K per SM / threads, at most 255): 16384 at 16 warps
    split    fewer rows than 2 programs per SM, and enough bytes (SPLIT_MIN_BYTES) that the second
             launch is paid back: each row over several programs (32 x 32000: 8 per row)
    online   longer rows, many of them: one read for every statistic, the write pass re-reading from
             L2, on a persistent grid whose rows in flight fit half the L2 (launch.rows_launch)
    looped   what is left (statistics that need a pass each): the file's own heuristic

Shapes that are not perf cases go to the nearest entry of their dtype (the file's _route); every
setting is correct at every shape (_launch_config falls back where one cannot serve a shape).
"""

from __future__ import annotations

from kernelgen.offline.budgets import REGS_OVERHEAD, REGS_PER_THREAD
from kernelgen.offline.dispatch import FirstChoice, frame_key
from kernelgen.offline.frame.launch import DEFAULT_L2_BYTES
from kernelgen.offline.launch import next_pow2
from kernelgen.offline.frame.plan import FramePlan
from kernelgen.offline.frame.pruning import frame_case
from kernelgen.offline.knobs import resolve_knobs
from kernelgen.offline.rows import knobs as defaults
from kernelgen.offline.rows.knobs import RowKnobs
from kernelgen.offline.rows.launch import rows_launch
from kernelgen.offline.rows.pruning import prune_rows
from kernelgen.spec import OperatorSpec

LIVE_VALUES = 2  # full-row fp32 values a single-pass program holds at once: the row and exp(row - max)
SINGLE_WARPS = (4, 8, 16)  # Liger-Kernel's calculate_settings: 4 up to 2048 columns, 8 up to 8192, then 16
SPLIT_MIN_BYTES = 1 << 20  # below ~1 MB a second launch (~2-3 us) costs more than idle SMs do
ONLINE_TILE_BYTES = 16384  # per loop step and program: 4096 fp32 or 8192 bf16, 16 bytes per thread at 16 warps
ONLINE_WARPS = 16
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def _single_warps(block_c: int) -> int | None:
    """The warps that hold a row of block_c in registers, or None when no count does."""
    warps = 4 if block_c <= 2048 else (8 if block_c <= 8192 else 16)
    per_thread = block_c // (32 * warps)
    budget = min(REGS_PER_THREAD, 65536 // (32 * warps))  # one resident program of this many threads
    return warps if LIVE_VALUES * per_thread + REGS_OVERHEAD <= budget else None


def _largest_single() -> int:
    """The longest row (a power of two) some warp count keeps in registers: 16384."""
    width = defaults.ROW_MAX_SINGLE
    while _single_warps(width * 2) is not None:
        width *= 2
    return width


def _kept(spec: OperatorSpec, plan: FramePlan, algorithm: str, shapes: dict[str, list[int]], dtype: str, sms: int) -> str | None:
    """None when the pruning rules would time `algorithm` at this case, else their reason."""
    case = frame_case(spec, plan.view, RowKnobs(), shapes, dtype, sms)
    label = plan.kind.family
    (verdict,) = prune_rows(case, label, lambda k: resolve_knobs(RowKnobs, label, k), "algorithm", [algorithm])
    return None if verdict.kept else verdict.reason


def _rows_choice(spec: OperatorSpec, plan: FramePlan, dtype: str, shapes: dict[str, list[int]], sms: int) -> tuple[dict, str]:
    rows, cols = frame_key([shapes[n] for n in spec.input_names])
    itemsize = ITEMSIZE.get(dtype, 4)
    block_c = next_pow2(cols)
    nbytes = rows * cols * itemsize
    if nbytes >= SPLIT_MIN_BYTES and _kept(spec, plan, "split", shapes, dtype, sms) is None:
        launch = rows_launch(RowKnobs(algorithm="split"), rows, cols, sms)
        return {"algorithm": "split"}, (f"{rows} rows < 2 x {sms} SMs: a program per row leaves SMs idle; split runs "
                                        f"{launch.programs} programs ({launch.chunks} per row), {nbytes / 2**20:.1f} MB repays the second launch")
    warps = _single_warps(block_c)
    if block_c <= defaults.ROW_MAX_SINGLE:
        return {}, f"rows of {cols} fit a {block_c}-wide register tile at the file's warps: read once"
    if warps is not None:
        per_thread = block_c // (32 * warps)
        return ({"MAX_SINGLE_PASS": block_c, "num_warps": warps},
                f"rows of {cols}: a {block_c}-wide tile at {warps} warps is {LIVE_VALUES} x {per_thread} fp32 registers "
                f"(+{REGS_OVERHEAD}) per thread, within {min(REGS_PER_THREAD, 65536 // (32 * warps))}: read once")
    not_online = _kept(spec, plan, "online", shapes, dtype, sms)
    if not_online is not None:
        return {}, f"rows of {cols} exceed a register tile; looped, as online would not help: {not_online}"
    step = ONLINE_TILE_BYTES // itemsize
    knobs = {"algorithm": "online", "persistent": True, "LOOP_BLOCK": step, "num_warps": ONLINE_WARPS}
    launch = rows_launch(RowKnobs.model_validate(knobs), rows, cols, sms, itemsize)
    in_flight = launch.programs * cols * itemsize
    return knobs, (f"rows of {cols} exceed a {_largest_single()}-wide register tile ({LIVE_VALUES} fp32 values "
                   f"per element): online reads each row once, its write pass re-reading from L2; {launch.programs} "
                   f"persistent programs keep {in_flight / 2**20:.0f} MB of rows in flight, half a "
                   f"{DEFAULT_L2_BYTES // 2**20} MB L2; {step}-column steps of {ONLINE_TILE_BYTES // 1024} KB")


def first_choices(spec: OperatorSpec, plan: FramePlan, sms: int) -> list[FirstChoice]:
    """Every perf case x dtype of the spec (all its dtypes: fp16 takes bf16's reasoning), with the
    setting round 0 gives it."""
    out = []
    for case in spec.effective_perf_cases:
        for dtype in spec.dtypes:
            knobs, reason = _rows_choice(spec, plan, dtype, case, sms)
            out.append(FirstChoice(dtype, dict(case), knobs, reason))
    return out
