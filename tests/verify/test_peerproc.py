"""The peer libraries run in a child process: one that kills its process loses that case, not the run."""

from __future__ import annotations

from kernelgen.spec import validate_spec_data
from kernelgen.verify.peerproc import peer_timings

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

