"""Unit tests of the judge's pieces: comparison messages, NaN/Inf rules, unwritten-element patterns and
output layouts; the poison fills; the device-ceiling judgment (read vs copy vs matmul, counted FLOPs);
the worker's guard; the static rules; the code table; secret scrubbing; the integrity record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kernelgen.spec import ToleranceSpec
from kernelgen.verify.worker import guard
from kernelgen.verify.judge import integrity, staticcheck
from kernelgen.verify.judge.codes import VIOLATION_CODES
from kernelgen.verify.judge.compare import compare, unwritten_pattern
from kernelgen.verify.judge.performance import counted_flops, judge_against_peaks
from kernelgen.verify.poison import draw_fills, poison, poisoned_mask
from kernelgen.verify.results import DevicePeaks, KernelTiming, PerfCase
from kernelgen.verify.judge.scrub import register_secret, scrub
from kernelgen.verify.judge.staticcheck import check_source

TOL = ToleranceSpec(atol=1e-4, rtol=1e-4)
KERNELGEN = Path(staticcheck.__file__).parent.parent.parent
FILL, FILL_B = draw_fills()


# --- compare --------------------------------------------------------------------------------------
def test_compare_reports_count_worst_index_and_values():
    e = torch.zeros(3, 4)
    g = e.clone()
    g[1, 2] = 0.5
    g[2, 3] = 0.01
    c = compare(g, e, TOL)
    assert not c.passed and c.mismatches == 2 and c.total == 12
    assert c.worst_index == [1, 2] and c.got == 0.5 and c.expected == 0.0
    assert c.max_abs_err == pytest.approx(0.5)
    assert "2 of 12 elements differ" in c.message and "[1, 2]" in c.message and "0.5" in c.message


def test_all_nan_mismatch_says_nan_not_max_err_zero():
    e = torch.ones(5)
    g = e.clone()
    g[3] = float("nan")
    c = compare(g, e, TOL)
    assert not c.passed and c.mismatches == 1 and c.nonfinite == 1
    assert "NaN/Inf where the baseline is finite" in c.message and "max abs err 0" not in c.message
    assert c.worst_index == [3] and c.got is None and c.expected == 1.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_where_baseline_is_finite_never_passes_even_with_huge_tolerance(bad):
    e = torch.randn(16)
    g = e.clone()
    g[0] = bad
    assert not compare(g, e, ToleranceSpec(atol=1e30, rtol=1e30)).passed


def test_infinite_baseline_needs_the_same_infinity():
    e = torch.tensor([float("inf"), -float("inf"), 1.0])
    assert compare(e.clone(), e, TOL).passed
    for g in ([1e30, -float("inf"), 1.0], [-float("inf"), -float("inf"), 1.0], [float("nan"), -float("inf"), 1.0]):
        assert not compare(torch.tensor(g), e, TOL).passed, g


def test_nan_where_baseline_is_nan_passes():
    e = torch.tensor([float("nan"), 2.0])
    assert compare(e.clone(), e, TOL).passed


def test_integers_compare_exactly_beyond_float64_precision():
    e = torch.tensor([2**62 + 1], dtype=torch.int64)
    c = compare(torch.tensor([2**62], dtype=torch.int64), e, TOL)
    assert not c.passed and "exact match required" in c.message


def test_shape_and_dtype_mismatches_say_so():
    e = torch.zeros(4)
    assert "shape" in compare(torch.zeros(5), e, TOL).message
    assert "dtype" in compare(torch.zeros(4, dtype=torch.float64), e, TOL).message


@pytest.mark.parametrize("where, pattern", [
    ((slice(1, 3), slice(None)), "whole rows: 2 of 4 rows (1-2, contiguous)"),
    ((slice(None), slice(1024, None)), "whole columns 1024-1499 of every row"),
    ((slice(3, None), slice(500, None)), "the tail: flat elements 5000-5999"),
])
def test_unwritten_elements_and_the_pattern_they_form(where, pattern):
    e = torch.randn(4, 1500)
    g = e.clone()
    poison(g[where], FILL)
    c = compare(g, e, TOL, FILL)
    assert not c.passed and c.unwritten == g[where].numel()
    assert pattern in c.unwritten_pattern, c.unwritten_pattern
    assert c.unwritten_first is not None and c.unwritten_last is not None and "never written" in c.message


def test_scattered_unwritten_elements():
    mask = torch.zeros(64, dtype=torch.bool)
    mask[[3, 17, 40]] = True
    assert unwritten_pattern(mask).startswith("scattered: 3 elements")


def test_a_column_major_output_fails_where_eager_is_row_major():
    e = torch.randn(8, 6)
    g = e.t().contiguous().t()  # same values, column-major
    c = compare(g, e, TOL)
    assert not c.passed and "contiguous" in c.message


def test_any_dense_layout_passes_where_eager_follows_a_non_contiguous_input():
    e = torch.randn(6, 8).t()  # eager's output of a transposed input keeps its layout
    assert compare(e.contiguous(), e, TOL).passed
    gappy = torch.empty(8, 12)[:, :6].copy_(e)
    assert "gaps" in compare(gappy, e, TOL).message


# --- poison ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_poison_is_a_nan_with_a_payload_of_this_run(dtype):
    t = torch.empty(4, dtype=dtype)
    poison(t, FILL)
    assert torch.isnan(t).all() and poisoned_mask(t, FILL).all() and not poisoned_mask(t, FILL_B).any()
    computed = torch.zeros(4, dtype=dtype) / torch.zeros(4, dtype=dtype)  # an arithmetic NaN
    assert not poisoned_mask(computed, FILL).any()


def test_fills_are_drawn_per_run_and_differ_everywhere():
    a, b = draw_fills()
    c, _ = draw_fills()
    assert all(a.floats[k] != b.floats[k] for k in a.floats) and a.integer != b.integer and a.boolean != b.boolean
    assert a.floats != c.floats  # a candidate cannot learn the poison from an earlier run


# --- the device ceiling ---------------------------------------------------------------------------
PEAKS = DevicePeaks(device_name="H200", copy_gbps=4250.0, read_gbps=4440.0, matmul_tflops=716.0,
                    measured_at="2026-11-22", torch_version="t")


def _case(gbps: float, *, tflops: float | None = None, read: int = 1000, write: int = 1000) -> PerfCase:
    t = KernelTiming(ms=1.0, ms_min=1.0, ms_max=1.0, spread=0.0)
    return PerfCase(case=0, shapes={"x": [1]}, dtype="float32", bytes=read + write,
                    flops=int(tflops * 1e12 * 1e-3) if tflops else None, kernel=t, gbps=gbps, tflops=tflops)


def test_a_copy_like_kernel_above_the_copy_ceiling_is_invalid():
    pc = _case(4500.0)
    judge_against_peaks(pc, PEAKS, 1000, 1000)
    assert pc.ceiling == "copy" and not pc.valid and "copy bandwidth" in pc.invalid_reason


def test_a_read_only_reduction_is_judged_against_the_read_ceiling():
    # row_sum 65536x4096 fp32 on an H200 read at 105% of copy: honest, and valid against the read ceiling
    pc = _case(4460.0, read=1 << 30, write=1 << 18)
    judge_against_peaks(pc, PEAKS, 1 << 30, 1 << 18)
    assert pc.ceiling == "read" and pc.valid and pc.frac_peak == pytest.approx(4460 / 4440)


def test_flops_above_the_measured_matmul_rate_are_invalid():
    pc = _case(100.0, tflops=900.0, read=10, write=10)
    judge_against_peaks(pc, PEAKS, 10, 10)
    assert pc.bound == "compute" and pc.ceiling == "matmul" and not pc.valid and "matmul rate" in pc.invalid_reason


def test_no_peaks_no_judgment():
    pc = _case(1e9)
    judge_against_peaks(pc, None, 1, 1)
    assert pc.valid  # interpreter runs have no ceiling: their numbers are marked as not measurements


def test_a_matmul_without_flops_in_the_spec_has_them_counted():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    assert counted_flops(lambda x, y: torch.relu(x @ y), [a, b], {}) == 2 * 64 * 32 * 16
    assert counted_flops(lambda x, y: x + y, [a, a], {}) is None  # pointwise: nothing counted


# --- the worker's guard ---------------------------------------------------------------------------
def test_guard_flags_compute_and_records_fresh_allocations():
    x = torch.randn(8)
    with guard.guarded(FILL) as report:
        out = torch.empty_like(x)
        y = x + 1
    codes_seen = {c for c, _ in report.violations}
    assert {"torch-compute-in-wrapper", "no-triton-launch"} <= codes_seen
    assert report.is_fresh(out) and report.is_fresh(out[2:]) and not report.is_fresh(x)
    assert poisoned_mask(out, FILL).all()
    del y


def test_guard_flags_a_dtype_cast():
    x = torch.randn(8, dtype=torch.float16)
    with guard.guarded(FILL) as report:
        x.float()
    assert any(c == "torch-compute-in-wrapper" and "converts" in m for c, m in report.violations)


# --- static rules ---------------------------------------------------------------------------------
HONEST = (Path(__file__).parent / "adversarial" / "honest.py").read_text()



def _codes(src: str) -> set[str]:
    return {v.code for v in check_source(src, "broadcast", baseline_module="broadcast_baseline")}


def test_honest_source_passes_static_checks():
    assert _codes(HONEST) == set()


@pytest.mark.parametrize("snippet, code", [
    ("x = torch.sys.modules", "forbidden-api"),
    ("from torch import sys as s", "forbidden-api"),
    ("e = torch.os.getenv('OPENAI_API_KEY')", "reads-environment"),
    ("t = torch\nt.allclose = None", "monkeypatch"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "monkeypatch"),
    ("del torch.equal", "monkeypatch"),
    ("g = getattr(torch, 'sy' + 's')", "forbidden-call"),
    ("g = getattr(torch, '_C')", "private-attribute"),
    ("f = __file__", "introspection"),
    ("def __getattr__(name):\n    return None", "introspection"),
    ("c = torch._dynamo", "private-attribute"),
    ("torch.set_default_dtype(torch.float64)", "forbidden-api"),
    ("g = torch.cuda.CUDAGraph()", "forbidden-api"),
    ("torch.save({}, 'x.pt')", "forbidden-api"),
    ("K = type('K', (), {})", "forbidden-call"),
    ("exit(0)", "forbidden-call"),
])
def test_static_rules(snippet, code):
    assert code in _codes(HONEST + "\n\n" + snippet + "\n")


EVENT_PATCH = ("import functools\nclass Faster:\n    def elapsed_time(self, end):\n        return 0.0\n"
               "functools.update_wrapper(torch.cuda.Event, Faster, assigned=('elapsed_time',), updated=())")


@pytest.mark.parametrize("snippet", [
    EVENT_PATCH,
    "from functools import update_wrapper as uw\nuw(torch.cuda.Event, torch.cuda.Event)",
    "import functools\ng = getattr(functools, 'update_wrapper')(torch.cuda.Event, torch)",
    "import functools\nfunctools.wraps(broadcast)(torch.cuda.Event)",
    "import dataclasses\ndataclasses.dataclass(torch.cuda.Event)",
    "import dataclasses\ndataclasses.dataclass(eq=False)(torch.Tensor)",
    "import functools\nfunctools.total_ordering(torch.cuda.Event)",
    "import typing\ntyping.no_type_check(torch.cuda.Event)",
    "import functools\nf = functools.update_wrapper",
    "x = list(map(setattr, [torch.cuda.Event], ['elapsed_time'], [None]))",
])
def test_setattr_through_library_functions_is_a_monkeypatch(snippet):
    assert "monkeypatch" in _codes(HONEST + "\n\n" + snippet + "\n")


def test_library_setters_on_the_files_own_functions_and_classes_pass():
    own = ("import dataclasses\nimport functools\n\n\n@dataclasses.dataclass\nclass Cfg:\n    block: int = 4\n\n\n"
           "def deco(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n\n"
           "    def other(*a):\n        return fn(*a)\n    functools.update_wrapper(other, fn)\n    return inner\n\n\n"
           "CFG = dataclasses.replace(Cfg(), block=8)\n")
    assert _codes(HONEST + "\n\n" + own) == set()


def test_what_the_recording_sees_is_no_longer_a_static_rule():
    """A cache in front of the entry, a try/except fallback, a host read: since issue 40 the recording sees
    what a call does and names it (tests/verify/adversarial/cached_entry.py, try_fallback.py, host_item.py);
    the static check no longer guesses from the text."""
    assert _codes(HONEST + "\n\nbroadcast = lambda x, bias: x + bias\n") == set()
    src = HONEST.replace("    x = x.contiguous()", "    try:\n        pass\n    except* ValueError:\n        pass\n    x = x.contiguous()")
    assert _codes(src) == set()
    assert _codes(HONEST.replace("    return out", "    n_cols = x.sum().item()\n    return out")) == set()


def test_every_emitted_code_is_documented_in_one_table():
    emitted: set[str] = set()
    for path in (KERNELGEN / "verify").rglob("*.py"):
        text = path.read_text()
        emitted |= set(re.findall(r'(?:add|violate)\(\s*"([a-z-]+)"', text))
        emitted |= set(re.findall(r'code="([a-z-]+)"', text))
        emitted |= set(re.findall(r'\(\s*"([a-z]+(?:-[a-z]+)+)",\s*f?"', text))  # (code, message) pairs
    emitted -= {"second-fill", "stale-probe", "random-shape", "site-packages"}  # call kinds, variants, folder names
    assert len(emitted) > 20, emitted
    missing = emitted - set(VIOLATION_CODES)
    assert not missing, f"undocumented violation codes: {missing}"
    doc = (KERNELGEN.parent / "docs" / "trust.md").read_text()
    assert all(f"`{code}`" in doc for code in VIOLATION_CODES), [c for c in VIOLATION_CODES if f"`{c}`" not in doc]


# --- secrets --------------------------------------------------------------------------------------
def test_known_and_key_shaped_secrets_are_scrubbed(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890abcdef")
    register_secret("cfg-secret-from-a-config-file")
    text = ("env tok-1234567890abcdef, config cfg-secret-from-a-config-file, openai sk-proj-abcdefghijklmnopqrstuv, "
            "github ghp_abcdefghijklmnopqrstuvwxyz0123456789, header Bearer abcdefghijklmnop, api_key='hunter2hunter2'")
    out = scrub(text)
    for secret in ("tok-1234567890abcdef", "cfg-secret-from-a-config-file", "sk-proj-abcdefghijklmnopqrstuv",
                   "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnop", "hunter2hunter2"):
        assert secret not in out, secret
    assert out.count("[REDACTED]") >= 6 and scrub("plain words stay") == "plain words stay"


# --- integrity across runs ------------------------------------------------------------------------
def _folder(tmp_path: Path) -> Path:
    for name in ("spec.yaml", "op_baseline.py", "op_accuracy.py", "op_performance.py", "conftest.py"):
        (tmp_path / name).write_text(f"# {name}\n")
    integrity.record(tmp_path, "op")
    return tmp_path


def test_integrity_names_what_changed_and_what_to_do(tmp_path):
    op = _folder(tmp_path)
    assert integrity.check(op, "op") == []
    (op / "spec.yaml").write_text("# edited\n")
    (op / "op_baseline.py").write_text("def op(x):\n    return x - 1\n")
    problems = integrity.check(op, "op")
    assert any("spec.yaml changed" in p and "kernelgen refresh" in p for p in problems)
    assert any("op_baseline.py changed" in p and "decides correctness" in p for p in problems)
    with pytest.raises(integrity.IntegrityError):
        integrity.require_intact(op, "op")


def test_a_changed_tool_is_named(tmp_path, monkeypatch):
    op = _folder(tmp_path)
    tool = dict(integrity.tool_files())
    tool["kernelgen/verify/judge/compare.py"] = "0" * 64  # as if someone edited the installed judge
    monkeypatch.setattr(integrity, "tool_files", lambda: tool)
    [problem] = integrity.check(op, "op")
    assert "kernelgen/verify/judge/compare.py" in problem and "installed files changed" in problem


def test_folder_snapshot_sees_every_change(tmp_path):
    (tmp_path / "a.py").write_text("a")
    (tmp_path / "gone.py").write_text("b")
    before = integrity.snapshot(tmp_path)
    (tmp_path / "a.py").write_text("aa")
    (tmp_path / "gone.py").unlink()
    (tmp_path / "new.pth").write_text("import os")
    assert integrity.diff(before, integrity.snapshot(tmp_path)) == ["new.pth appeared", "gone.py vanished", "a.py changed"]


def test_device_lock_in_a_folder_that_does_not_exist_yet_is_created(tmp_path: Path):
    import fcntl
    import os

    from kernelgen.verify.judge.devicelock import device_lock

    path = tmp_path / "_batch" / "locks" / "cuda0.lock"  # a batch names it before any worker ran
    with device_lock(True, str(path)):
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # held exclusively: another taker would wait
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with device_lock(False, str(path)):
        pass


def test_a_check_shares_the_device_lock_case_by_case_so_a_timing_gets_in_between(tmp_path: Path, monkeypatch):
    """Each case of a check takes the device lock shared; between two the check holds none, so a process
    waiting to time (exclusively) gets the device there, not after the whole check (13-24 s a KernelBench
    problem; three on one H100 kept timings waiting 10-13 s, 2026-12-07)."""
    import contextlib
    import fcntl
    import os

    import kernelgen.verify.judge.accuracy as accuracy
    from kernelgen.devices import resolve_device
    from kernelgen.opdir import open_operator
    from kernelgen.verify.judge.devicelock import device_lock
    from kernelgen.verify.judge.runner import run_accuracy
    from tests.support.broadcast import make_op_dir
    from tests.support.judging import HONEST

    path = tmp_path / "locks" / "dev.lock"
    monkeypatch.setenv("KERNELGEN_DEVICE_LOCK", str(path))
    taken: list[bool] = []
    warmups: list[bool] = []  # the first case compiles the kernel: a warm-up, checks of others go on beside it

    @contextlib.contextmanager
    def spy(exclusive: bool, path: str | None = None, *, warmup: bool = False):
        if taken:  # between two of the check's holds: nothing of it holds the lock, a timing may take it now
            fd = os.open(path or os.environ["KERNELGEN_DEVICE_LOCK"], os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if the check still held it
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        with device_lock(exclusive, path, warmup=warmup):
            taken.append(exclusive)
            warmups.append(warmup)
            yield

    monkeypatch.setattr(accuracy, "device_lock", spy)
    record = run_accuracy(open_operator(make_op_dir(tmp_path / "op", HONEST)), resolve_device("cpu"), seeds=1)
    assert record.status == "ok" and record.accuracy is not None and record.accuracy.correct
    assert len(taken) >= 3 and not any(taken), taken  # the load, then one shared hold per case and probe
    assert warmups[:3] == [False, True, False] and not any(warmups[2:]), warmups  # the load, the first case, ...


def test_inputs_scaled_up_widen_only_the_absolute_tolerance():
    from kernelgen.spec import validate_spec_data
    from kernelgen.verify.judge.inputs import CheckCase, tolerance_of

    spec = validate_spec_data({"name": "mm", "description": "x @ w", "category": "matmul",
                               "inputs": [{"name": "x"}, {"name": "w"}], "outputs": [{"name": "out"}],
                               "reference": "def mm(x, w):\n    return x @ w\n", "dtypes": ["float32"],
                               "test_cases": [{"x": [4, 8], "w": [8, 4]}]}, run_reference=False)
    base = spec.tolerance_for("float32")
    up = tolerance_of(spec, CheckCase(0, {"x": [4, 8], "w": [8, 4]}, "float32", variant="scaled x16", scale=16.0))
    down = tolerance_of(spec, CheckCase(0, {"x": [4, 8], "w": [8, 4]}, "float32", variant="scaled x1/16", scale=1 / 16))
    plain = tolerance_of(spec, CheckCase(0, {"x": [4, 8], "w": [8, 4]}, "float32"))
    assert up.atol == base.atol * 256 and up.rtol == base.rtol  # products of two x16 inputs
    assert down == base == plain
    # fp32 sums of ~2000 that cancel to ~2.5 round by ~1e-3: within the widened bound, not the spec's
    x = torch.randn(64, 80, dtype=torch.float64) * 16
    w = torch.randn(80, 96, dtype=torch.float64) * 16
    exact = x @ w
    fp32 = (x.float() @ w.float()).double()
    err = (fp32 - exact).abs()
    assert (err <= up.atol + up.rtol * exact.abs()).all()
    wrong = fp32.clone()
    wrong[exact.abs() > 8 * 16] += 1.0  # a value-triggered branch, off by one
    assert not ((wrong - exact).abs() <= up.atol + up.rtol * exact.abs()).all()


def test_the_judge_computes_its_oracle_without_reduced_precision_split_k():
    from kernelgen.devices import DeviceInfo
    from kernelgen.spec import validate_spec_data
    from kernelgen.verify.judge.judge import Judge

    # torch's cuBLAS flags are properties of a module object (no plain attributes): saved and restored
    # by hand, since pytest's monkeypatch would try to delete them on the way out
    matmul = torch.backends.cuda.matmul
    saved = (matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction)
    try:
        matmul.allow_bf16_reduced_precision_reduction = True
        matmul.allow_fp16_reduced_precision_reduction = True
        spec = validate_spec_data({"name": "mm", "description": "x @ w", "category": "matmul",
                                   "inputs": [{"name": "x"}, {"name": "w"}], "outputs": [{"name": "out"}],
                                   "reference": "def mm(x, w):\n    return x @ w\n", "dtypes": ["bfloat16"],
                                   "test_cases": [{"x": [3, 1071], "w": [1071, 4]}]}, run_reference=False)
        Judge(spec, DeviceInfo("cpu", "cpu", True), lambda x, w: x @ w).close()
        assert not matmul.allow_bf16_reduced_precision_reduction
        assert not matmul.allow_fp16_reduced_precision_reduction
    finally:
        matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction = saved


def test_a_huge_output_is_compared_slab_by_slab_and_reported_in_full_when_it_differs(monkeypatch):
    """KernelBench's Frobenius output (1.9 G elements) has no room for float64 copies on the GPU
    that holds it: the comparison goes slab by slab, and only a failing one is copied to the host."""
    import torch

    import kernelgen.verify.judge.compare as compare_mod
    from kernelgen.spec import ToleranceSpec

    monkeypatch.setattr(compare_mod, "CHUNK", 1000)
    tol = ToleranceSpec(atol=1e-4, rtol=1e-4)
    a = torch.randn(100, 37)
    same = compare_mod.compare(a, a.clone(), tol)
    assert same.passed and same.total == 3700 and same.max_abs_err == 0
    b = a.clone()
    b[57, 3] += 1
    off = compare_mod.compare(a, b, tol)
    assert not off.passed and off.mismatches == 1 and off.worst_index == [57, 3]


def test_a_peer_warming_up_keeps_timings_waiting_but_not_checks(tmp_path: Path):
    """A peer's first call (FlagGems compiling and autotuning: up to a minute) holds the device shared as a
    warm-up. A timing waits for it -- but not at the turnstile, where it would hold every check of the GPU
    behind it (58-96 s checks on an H100, 2026-12-08): a check still gets in. A plain shared holder keeps
    the old rule: a waiting timing goes first."""
    import threading
    import time

    from kernelgen.verify.judge.devicelock import device_lock

    path = str(tmp_path / "cuda0.lock")

    def scenario(warmup: bool) -> tuple[float, list[str]]:
        order: list[str] = []
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            with device_lock(False, path, warmup=warmup):
                held.set()
                release.wait(10)
                order.append("holder out")  # still holding: whatever it kept waiting comes after

        def timing() -> None:
            with device_lock(True, path):
                order.append("timing")

        threads = [threading.Thread(target=holder)]
        threads[0].start()
        assert held.wait(10)
        threads.append(threading.Thread(target=timing))
        threads[1].start()
        time.sleep(0.3)  # the timing is queued now
        t0 = time.monotonic()
        checked = threading.Event()

        def check() -> None:
            with device_lock(False, path):
                order.append("check")
            checked.set()

        threads.append(threading.Thread(target=check))
        threads[2].start()
        got_in = checked.wait(1.0)
        waited = time.monotonic() - t0 if got_in else float("inf")
        assert "timing" not in order  # never beside the holder
        release.set()
        for t in threads:
            t.join(10)
        assert order.index("holder out") < order.index("timing")
        return waited, order

    waited, order = scenario(warmup=True)
    assert waited < 0.5 and order.index("check") < order.index("holder out"), (waited, order)
    waited, order = scenario(warmup=False)  # a check behind a queued timing: after it
    assert waited == float("inf") and order.index("timing") < order.index("check"), (waited, order)
