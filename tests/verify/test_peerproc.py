"""The peer libraries run in a child process: one that kills its process loses that case, not the run."""

from __future__ import annotations

import time

from kernelgen.spec import validate_spec_data
from kernelgen.verify.judge.peerproc import PeerJob, peer_timings

SPEC = {
    "name": "twice", "description": "out = 2 x", "category": "pointwise",
    "inputs": [{"name": "x"}], "outputs": [{"name": "out"}],
    # A stand-in for a peer library that crashes its process on one shape (an illegal memory access
    # does that to a CUDA context): the reference runs in the child, like FlagGems' ops do.
    "reference": "def twice(x):\n    if x.shape[0] == 7:\n        import os\n        os._exit(3)\n    return x * 2\n",
    "dtypes": ["float32"], "test_cases": [{"x": [4, 8]}],
}


def test_a_child_that_dies_loses_its_case_and_the_rest_are_timed():
    spec = validate_spec_data(SPEC, run_reference=False)
    cases = [(0, {"x": [4, 8]}, "float32"), (1, {"x": [7, 8]}, "float32"), (2, {"x": [5, 8]}, "float32")]
    run = peer_timings(spec, "cpu", cases, None)
    assert set(run.timings) == {(0, "float32"), (1, "float32"), (2, "float32")}  # the case after the crash ran in a new child
    assert run.timings[(1, "float32")] == {}  # retried with each peer alone: both crash there (the reference does)
    assert [n.split(" crashed")[0] for n in run.notes if "crashed" in n] == ["FlagGems", "Liger-Kernel"]  # case 1 only



def test_a_job_started_early_and_no_longer_wanted_is_stopped():
    slow = {**SPEC, "reference": "def twice(x):\n    import time\n    time.sleep(600)\n    return x * 2\n"}
    job = PeerJob(validate_spec_data(slow, run_reference=False), "cpu", [(0, {"x": [4, 8]}, "float32")], None)
    t0 = time.monotonic()
    job.cancel()  # the judge's own run failed: nothing waits ten minutes for the peers
    run = job.result()
    assert run.timings == {} and time.monotonic() - t0 < 10


def test_benchmark_scripts_time_the_peers_only_in_a_child():
    """No script under benchmarks/ runs FlagGems or Liger-Kernel in its own process (round0.py did, and
    died of FlagGems' illegal memory access): they go through peerproc, as `bench` does."""
    import ast
    from pathlib import Path

    in_process = {"kernelgen.verify.judge.peers", "flag_gems", "liger_kernel"}
    scripts = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))
    assert scripts
    for path in scripts:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in in_process or n in in_process], (path.name, names)


def test_a_child_that_does_not_answer_in_time_leaves_its_cases_untimed_without_a_retry_per_peer(monkeypatch):
    """A slow peer (FlagGems autotuning a depthwise convolution at a 512x512 image) is not a crashed one:
    retried per peer it would hold the kernel's measurement three times as long."""
    import kernelgen.verify.judge.peerproc as peerproc

    monkeypatch.setattr(peerproc, "PEER_TIMEOUT_S", 8.0)
    slow = {**SPEC, "reference": "def twice(x):\n    import time\n    time.sleep(600)\n    return x * 2\n"}
    cases = [(0, {"x": [4, 8]}, "float32"), (1, {"x": [5, 8]}, "float32")]
    t0 = time.monotonic()
    run = peer_timings(validate_spec_data(slow, run_reference=False), "cpu", cases, None)
    assert time.monotonic() - t0 < 16  # one wait of 8 s, not one per peer after it
    assert run.timings == {}
    assert [n for n in run.notes if n.startswith("peers not timed on case(s) 0 float32, 1 float32: no answer within 8 s")]
