"""Issue 40 on the CPU interpreter: the judge checks and times what the device ran, recorded once in the
candidate's worker and replayed in a process that never imports it.

- The attacks of the issue, as kernel files of our own (tests/verify/replay_attacks/: frame walks through
  functools.update_wrapper, str.format attribute walks, rewriting the contents of the judge's lists,
  dicts and sets, PyTorch answering only in timed calls, outputs reused within a request, the judge's
  sample of kept calls cut, recorded times scaled): with the static checks off, each is refused with a
  reason that names it, or, for the timing attempts, timed at the honest speed, because a replay never
  runs the candidate's Python. With the static checks on, most never run at all.
- The honest kernels the old checks refused (tests/verify/honest/: a multi-config @triton.autotune, a
  libdevice call, config fields named tile/mode/offset/start/step) pass `kernelgen test`.
- The offline families' kernels record and replay unchanged (tests/support/replay_corpus.py).
- The plan's and the extraction's own rules, without a worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.devices import resolve_device
from kernelgen.opdir import open_operator
from kernelgen.verify.judge.runner import run_accuracy, run_performance
from kernelgen.verify.judge.staticcheck import check_source
from kernelgen.verify.plan import Alloc, Launch, Plan, PlanError, TensorArg, ValueArg, View, check_plan
from kernelgen.verify.replay.extract import ExtractError, extract
from tests.support.broadcast import make_op_dir
from tests.support.judging import HONEST, run_harness, run_test_cli
from tests.support.paths import REPO

HERE = Path(__file__).parent
ATTACKS = HERE / "replay_attacks"
HONEST_DIR = HERE / "honest"


def outcome(path: Path) -> tuple[str, str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# OUTCOME: "), f"{path.name} has no '# OUTCOME: ...' header"
    kind, _, code = first[len("# OUTCOME: "):].partition(" ")
    return kind, code


REFUSED = sorted(p.stem for p in ATTACKS.glob("*.py") if outcome(p)[0] == "refused")
TIMING = sorted(p.stem for p in ATTACKS.glob("*.py") if outcome(p)[0] == "honest-speed")


def test_every_class_of_the_issue_has_an_attack_file():
    assert set(REFUSED) | set(TIMING) == {"frame_walk_functools", "format_walk", "rewrite_containers", "timed_torch_only",
                                          "reuse_output", "kept_sampling_cut", "scaled_times"}


# --- the attacks, the static checks switched off ----------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("attack", REFUSED)
def test_an_attack_on_the_judge_is_refused_by_name_without_the_static_checks(attack, tmp_path):
    """What the attack rewrites lives in its own recording process; what is judged is the replay."""
    _, want = outcome(ATTACKS / f"{attack}.py")
    r = run_harness("accuracy", make_op_dir(tmp_path, ATTACKS / f"{attack}.py"), "--seeds", "1", bypass_static=True)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    if want == "wrong-in-program-order":  # right when its programs run in order, wrong otherwise
        assert "FAIL" in text and "second-fill" in text and "(guarded" not in text, text
    else:
        assert want in text, text


def _perf(op: Path) -> tuple[float, list[str]]:
    record = run_performance(open_operator(op), resolve_device("cpu"), no_compile=True)
    perf = record.performance
    assert record.status == "ok" and perf is not None and perf.ok, (record.stderr_tail, perf and perf.violations)
    return perf.cases[0].kernel.ms, [v.code for v in perf.violations]


@pytest.mark.slow
def test_timing_attacks_are_timed_at_the_honest_speed(tmp_path, monkeypatch):
    """Each answers faster (or not at all) only inside a timing loop, a loop a replay never calls it from:
    it passes, with no violation, at the honest kernel's speed (an interpreter call of PyTorch's answer
    takes microseconds, of the kernel milliseconds)."""
    import kernelgen.verify.judge.judge as judge_module

    monkeypatch.setattr(judge_module, "check_source", lambda *a, **k: [])
    honest_ms, _ = _perf(make_op_dir(tmp_path / "honest", HONEST))
    for attack in TIMING:
        op = make_op_dir(tmp_path / attack, ATTACKS / f"{attack}.py")
        accuracy = run_accuracy(open_operator(op), resolve_device("cpu"), seeds=1).accuracy
        assert accuracy is not None and accuracy.correct, (attack, accuracy and accuracy.violations)
        ms, codes = _perf(op)
        assert not codes and ms > 0.3 * honest_ms, (attack, ms, honest_ms, codes)


def test_with_the_static_checks_on_frame_walks_never_run():
    """The static check keeps what a replay cannot see: a walk to Python's frames is refused before the
    file runs; a walk inside a format string, or a cache, is left to the recording."""
    for path in sorted(ATTACKS.glob("*.py")):
        codes = {v.code for v in check_source(path.read_text(encoding="utf-8"), "broadcast")}
        walks = "holder.gi_frame" in path.read_text(encoding="utf-8")  # an attribute walk, not one inside a string
        assert ("forbidden-api" in codes) == walks, (path.name, codes)


# --- honest kernels -------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in HONEST_DIR.glob("*.py")))
def test_an_honest_kernel_the_old_checks_refused_passes(name, tmp_path, monkeypatch):
    assert check_source((HONEST_DIR / f"{name}.py").read_text(encoding="utf-8"), "broadcast") == []
    code, text = run_test_cli(make_op_dir(tmp_path, HONEST_DIR / f"{name}.py"), monkeypatch, seeds=1)
    assert code == 0 and "PASS" in text, text
    if name == "autotune_multi":
        assert "3 configs" in text and "first" in text, text  # said, not hidden


@pytest.mark.slow
def test_the_offline_families_kernels_record_and_replay_unchanged():
    """A sample of every family and kind (examples, nd, conv, KernelBench); `--all` for every spec."""
    r = subprocess.run([sys.executable, "-m", "tests.support.replay_corpus"], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) >= 25 and r.returncode == 0, [row for row in rows if not row["ok"]] or r.stderr[-3000:]


# --- the plan and the extraction, on their own ----------------------------------------------------------
def _plan(**changes) -> Plan:
    x = View(storage=0, dtype="float32", shape=[4, 8], stride=[8, 1])
    out = View(storage=1, dtype="float32", shape=[4, 8], stride=[8, 1])
    launch = Launch(kernel="_k", grid=[1, 1, 1], args=[TensorArg(view=x), TensorArg(view=out), ValueArg(value=32)])
    data = {"inputs": [x], "steps": [Alloc(storage=1, nbytes=128, dtype="float32", shape=[4, 8], stride=[8, 1]), launch],
            "outputs": [out]}
    data.update(changes)
    return Plan(**data)


def test_a_plan_is_checked_before_any_replay_sees_it():
    check_plan(_plan(), {"_k"}, [128])
    x = View(storage=0, dtype="float32", shape=[4, 8], stride=[8, 1])
    far = View(storage=0, dtype="float32", shape=[4, 8], stride=[9, 1])  # reaches past the input's 128 bytes
    cases = {
        "not a module-level @triton.jit": _plan(steps=[Launch(kernel="_other", grid=[1, 1, 1], args=[])]),
        "reaching byte": _plan(outputs=[], steps=[Launch(kernel="_k", grid=[1, 1, 1], args=[TensorArg(view=far)])]),
        "view of input 0": _plan(outputs=[x]),
        "launches no Triton kernel": _plan(steps=[Alloc(storage=1, nbytes=128, dtype="float32", shape=[32], stride=[1])]),
        "outside what a device launches": _plan(steps=[Launch(kernel="_k", grid=[1, 70000, 1], args=[])]),
        "does not exist at that point": _plan(steps=[Launch(kernel="_k", grid=[1, 1, 1], args=[TensorArg(view=View(
            storage=3, dtype="float32", shape=[1], stride=[1]))])]),
    }
    for says, plan in cases.items():
        with pytest.raises(PlanError, match=says):
            check_plan(plan, {"_k"}, [128])


def test_the_replay_module_keeps_kernels_and_literal_constants_on_their_lines():
    source = HONEST.read_text(encoding="utf-8").replace(
        "@triton.jit", "BLOCK = tl.constexpr(16)\nSCALE = 2.0 * 1.5\n\n\n@triton.autotune(configs=[], key=[])\n@triton.jit")
    source = source.replace("    pid_m = tl.program_id(0)", "    pid_m = tl.program_id(0) + 0 * BLOCK * SCALE")
    extracted = extract(source)
    assert extracted.kernels == ("_broadcast_kernel",)
    kept, original = extracted.source.splitlines(), source.splitlines()
    assert len(kept) == len(original)
    assert all(not line or line == original[i] for i, line in enumerate(kept))  # what it keeps, on its own line
    assert "autotune" not in extracted.source and "def broadcast" not in extracted.source
    assert "BLOCK = tl.constexpr(16)" in extracted.source and "SCALE = 2.0 * 1.5" in extracted.source


@pytest.mark.parametrize("binding, says", [
    ("def BLOCK():\n    return 16\n", "a Python function or class of the file"),
    ("BLOCK = len('abcd')\n", "is computed by Python"),
    ("import os\nBLOCK = os\n", "a module a replay does not import"),
])
def test_what_a_kernel_reads_from_the_module_is_a_literal_constant_or_refused(binding, says):
    source = HONEST.read_text(encoding="utf-8").replace("@triton.jit", binding + "\n\n@triton.jit")
    source = source.replace("    pid_m = tl.program_id(0)", "    pid_m = tl.program_id(0) + 0 * BLOCK")
    with pytest.raises(ExtractError, match=says):
        extract(source)
