"""The tuning memory read back: the offline planner's first hypothesis and the LLM's optimize prompt
come from what earlier operators' rounds measured on alike cases of the same device and family."""

from __future__ import annotations

from kernelgen.llm.prompts import optimization_messages
from kernelgen.memory import MemoryEntry
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.planner import OfflinePlanner
from kernelgen.optimize.proposal import RoundContext
from kernelgen.record.state import OpState, RoundRecord
from kernelgen.spec import load_spec, validate_spec_data

SPEC = {"name": "softmax2", "description": "softmax", "category": "softmax", "inputs": [{"name": "x"}],
        "outputs": [{"name": "out"}], "reference": "def softmax2(x):\n    return torch.softmax(x, dim=-1)\n",
        "dtypes": ["bfloat16"], "test_cases": [{"x": [4, 8]}], "perf_cases": [{"x": [2048, 32768]}]}
SPACE = {"algorithm": [None, "looped", "online", "split"], "num_warps": [None, 4, 8, 16], "LOOP_BLOCK": [None, 4096, 8192]}


def won(**kw) -> MemoryEntry:
    base = dict(device="H100", family="softmax", shape_class="rows~2^12 cols~2^16", dtype="bfloat16", knob="LOOP_BLOCK",
                value=8192, speedup=1.31, noise=0.02, verdict="win", operator="log_softmax", round=2,
                shapes={"x": [4096, 50257]})
    return MemoryEntry(**{**base, **kw})


class _Kern:
    family = "softmax"

    def __init__(self, knobs):  # noqa: ANN001
        self.knobs, self.source = dict(knobs), f"# {sorted(dict(knobs).items())}\n"


def _generate(spec, knobs=None, dispatch=None):  # noqa: ANN001, ANN202, ARG001
    return _Kern({k: v[0] for k, v in SPACE.items()} | dict(knobs or {}))


def _ctx(spec) -> RoundContext:  # noqa: ANN001
    r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="r0.py", kept=True)
    state = OpState(name=spec.name, created_at="t", backend="offline", device="cuda", rounds=[r0], best_round=0)
    return RoundContext(op=None, state=state, round=1, best=r0, best_source=_generate(spec).source,  # type: ignore[arg-type]
                        diagnosis=diagnose(None, 0, None))


def test_the_planner_first_retimes_what_the_memory_remembers_winning_on_alike_cases():
    spec = validate_spec_data(SPEC, run_reference=False)
    remembered = [won(), won(value=4096, speedup=1.05, verdict="loss"), won(device="A100"), won(knob="num_warps", value=16, speedup=1.1),
                  won(knob="algorithm", value="split", shapes={"x": [32, 32000]})]  # 32 rows: not alike
    planner = OfflinePlanner(spec, sm_count=132, generate=_generate, space_fn=lambda s: SPACE, remembered=remembered,
                             family="softmax", device_name="H100")
    proposals = planner.propose(_ctx(spec))
    assert [(p.knob, p.knob_to) for p in proposals] == [("LOOP_BLOCK", 8192)]  # only the remembered value, not every one
    h = proposals[0].hypothesis
    assert "tuning memory" in h.problem and "x1.310" in h.problem and "log_softmax" in h.problem
    assert "re-timed against the best" in h.expected
    # without a memory the same round takes the diagnosis's hypothesis, every value of its knob
    plain = OfflinePlanner(spec, sm_count=132, generate=_generate, space_fn=lambda s: SPACE).propose(_ctx(spec))
    assert plain[0].knob == "algorithm" and len(plain) == 3


def test_the_optimize_prompt_quotes_alike_entries_with_their_numbers(repo):
    spec = load_spec(repo / "operator_specs" / "softmax.yaml")
    remembered = [won(), won(knob="change", value="one pass with a running max", speedup=1.5, origin="imported"),
                  won(operator="tiny", shapes={"x": [4, 16]})]  # far from every perf case: left out
    text = optimization_messages(spec, "def softmax(x): ...", remembered=remembered)[1]["content"]
    assert "## What this device taught earlier operators (the tuning memory)" in text and "this H100" in text
    assert "change='one pass with a running max': x1.500" in text and "imported, not re-timed here" in text
    assert "LOOP_BLOCK=8192: x1.310 (noise +-2.0%, win) on log_softmax 4096x50257 bfloat16 round 2" in text
    assert "tiny" not in text
    assert "tuning memory" not in optimization_messages(spec, "def softmax(x): ...")[1]["content"]
