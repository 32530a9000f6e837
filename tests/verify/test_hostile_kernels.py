"""Every hostile kernel in tests/verify/adversarial/ is rejected by `kernelgen test OP_DIR` with a non-zero
exit code and the named violation (or failure) its `# EXPECT:` header gives; the honest kernel is
accepted. Each runs through the real CLI, its real recording worker and the real replay worker (Triton
interpreter on CPU)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.broadcast import make_op_dir
from tests.support.judging import ADVERSARIAL, HONEST, expectation, run_harness, run_test_cli


def runtime_expectation(path: Path) -> tuple[str, str] | None:
    """(accuracy | performance, what the run-time defences say) with the static checks switched off
    (`# RUNTIME: [kind: ]text`, second line): for files the allowlist refuses whose run-time route is
    worth holding too."""
    second = path.read_text(encoding="utf-8").splitlines()[1]
    if not second.startswith("# RUNTIME: "):
        return None
    kind, _, text = second[len("# RUNTIME: "):].strip().partition(": ")
    return (kind, text) if kind in ("accuracy", "performance") and text else ("accuracy", f"{kind}: {text}".rstrip(": "))


HOSTILE = sorted(p for p in ADVERSARIAL.glob("*.py") if p.name != "honest.py")


def test_every_hostile_file_has_an_expectation():
    assert len(HOSTILE) >= 20
    for p in HOSTILE:
        assert expectation(p)


def test_honest_kernel_is_accepted(tmp_path, monkeypatch):
    code, text = run_test_cli(make_op_dir(tmp_path, HONEST), monkeypatch)
    assert code == 0, text
    assert "PASS" in text and "violation" not in text.lower()


@pytest.mark.parametrize("hostile", [p for p in HOSTILE if expectation(p) != "timeout"], ids=lambda p: p.stem)
def test_hostile_kernel_is_rejected_by_kernelgen_test(hostile, tmp_path, monkeypatch):
    want = expectation(hostile)
    # One seed keeps the suite fast; each cheat here is caught by the first seed or the probe.
    code, text = run_test_cli(make_op_dir(tmp_path, hostile), monkeypatch, seeds=1)
    assert code != 0, f"{hostile.name} was accepted:\n{text}"
    assert "PASS —" not in text
    assert want in text, f"{hostile.name}: expected {want!r} in the output:\n{text}"


def test_hanging_kernel_times_out_and_the_caller_carries_on(tmp_path, monkeypatch):
    hostile = ADVERSARIAL / "hang.py"
    assert expectation(hostile) == "timeout"
    op = make_op_dir(tmp_path, hostile)
    code, text = run_test_cli(op, monkeypatch, timeout_s=6)
    assert code != 0
    assert "timeout" in text and "timed out after" in text and "process group was killed" in text
    # No child of that run survives: nothing still runs the op's accuracy script.
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    alive = [ln for ln in ps.splitlines() if "broadcast_accuracy.py" in ln and str(tmp_path) in ln and " Z" not in ln]
    assert not alive, alive


def test_crash_in_the_kernel_is_reported_as_crash_with_status(tmp_path, monkeypatch):
    # segfault_oob.py passes every static check; the interpreter dies loading far out of bounds.
    code, text = run_test_cli(make_op_dir(tmp_path, ADVERSARIAL / "segfault_oob.py"), monkeypatch, seeds=1)
    assert code != 0
    assert "crash" in text and "exit status" in text


@pytest.mark.parametrize("hostile", ["patch_torch_equal", "patch_tensor_dunder", "patch_self_restoring"])
def test_monkeypatching_is_caught_at_run_time_even_without_static_checks(hostile, tmp_path):
    op = make_op_dir(tmp_path, ADVERSARIAL / f"{hostile}.py")
    r = run_harness("accuracy", op, bypass_static=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "VIOLATION harness-tampering" in r.stdout, r.stdout
    assert "PASS" not in r.stdout.splitlines()[-1]


@pytest.mark.parametrize("hostile", [p for p in HOSTILE if runtime_expectation(p)], ids=lambda p: p.stem)
def test_what_the_allowlist_refuses_still_fails_at_run_time(hostile, tmp_path):
    """The allowlist refuses these before they run; with it switched off, the worker's guard and the
    judge's checks still reject them, each with what its `# RUNTIME:` line says."""
    kind, want = runtime_expectation(hostile)
    extra = ("--no-compile",) if kind == "performance" else ()
    r = run_harness(kind, make_op_dir(tmp_path, hostile), *extra, bypass_static=True)
    text = r.stdout + r.stderr
    assert r.returncode != 0, text
    assert want in text, text


def test_side_channels_without_static_checks_still_fail(tmp_path):
    """The recording catches these on its own: compute in the wrapper, and an output kept from an earlier call."""
    for name, code in [("decoy_launch", "torch-compute-in-wrapper"), ("shape_cache", "outside-tensor")]:
        op = make_op_dir(tmp_path / name, ADVERSARIAL / f"{name}.py")
        r = run_harness("accuracy", op, bypass_static=True)
        assert r.returncode == 1 and f"VIOLATION {code}" in r.stdout, r.stdout


def test_calls_that_skip_the_launch_are_refused_before_they_are_timed(tmp_path):
    """Answering a repeated call from a cache made by an earlier one is refused where it is recorded: the
    output was not made by the call (timed calls are replays, which never reach the cache)."""
    op = make_op_dir(tmp_path, ADVERSARIAL / "perf_skip_repeat.py")
    r = run_harness("performance", op, "--no-compile")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "VIOLATION outside-tensor" in r.stdout, r.stdout


def test_honest_kernel_passes_performance_dry_run(tmp_path):
    op = make_op_dir(tmp_path, HONEST)
    r = run_harness("performance", op, "--no-compile")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VIOLATION" not in r.stdout
