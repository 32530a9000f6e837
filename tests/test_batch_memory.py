"""Memory that fits: an operator waits for room on a GPU its batch shares (`--per-gpu`) instead of
failing out of memory, and a smaller one that fits goes first. The GPU's memory is simulated here."""

from __future__ import annotations

import threading
import time

from kernelgen.batch.job import JobRequest
from kernelgen.batch.memory import GiB, JobQueue, perf_memory_need
from kernelgen.batch.targets import Target
from kernelgen.spec import validate_spec_data

SHARE0, SHARE1 = Target("cuda", "0", 0, share=0), Target("cuda", "0", 1, share=1)


def _spec(reference: str, shape: list[int]):  # noqa: ANN202
    return validate_spec_data({"name": "op", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}],
                               "dtypes": ["float32"], "test_cases": [{"x": [4, 4]}], "perf_cases": [{"x": shape}],
                               "reference": reference})


def test_the_need_is_eagers_peak_plus_the_workers_copies_of_inputs_and_outputs():
    mib = 1 << 20  # a [512, 512] float32 tensor
    simple = _spec("def op(x):\n    return x + 1\n", [512, 512])
    assert perf_memory_need(simple) == (mib + mib) + mib + mib  # x and out alive at once, then the worker's copies
    chain = _spec("def op(x):\n    return (x + 1) * 2 + 3\n", [512, 512])
    assert perf_memory_need(chain) == 3 * mib + mib + mib  # x, a temporary, out: the earlier temporary is freed
    view = _spec("def op(x):\n    return x.view(-1).sum()\n", [512, 512])
    assert perf_memory_need(view) == mib + 4 + mib + 4  # a view holds no memory of its own


class Gpu:
    """A simulated 80 GiB GPU whose free memory the test sets."""

    def __init__(self, free_gib: float):
        self.free = int(free_gib * GiB)
        self.asked = 0

    def __call__(self, device_id: str) -> tuple[int, int]:
        assert device_id == "0"
        self.asked += 1
        return self.free, 80 * GiB


def _job(name: str) -> JobRequest:
    return JobRequest(name=name, spec_file=f"{name}.yaml", spec_label=name, out_root="out", log_file="log")


def test_an_operator_waits_for_room_while_a_smaller_one_goes_first():
    needs = {"a": 40 * GiB, "b": 60 * GiB, "c": 10 * GiB}
    gpu = Gpu(free_gib=30)
    waits: list[str] = []
    queue = JobQueue([_job("a"), _job("b"), _job("c")], need_of=lambda j: needs[j.name], probe=gpu, poll_s=0.02,
                     on_wait=lambda job, target, msg: waits.append(f"{job.name}: {msg}"))
    a = queue.take(SHARE0)
    assert a.name == "a"  # alone on the GPU: it starts, whatever the free memory says
    c = queue.take(SHARE1)
    assert c.name == "c"  # b (60 GiB) does not fit beside a (30 GiB free, 40 reserved): c (10 GiB) goes first

    taken: list[str] = []
    waiter = threading.Thread(target=lambda: taken.append(queue.take(SHARE1).name))
    waiter.start()
    time.sleep(0.2)
    assert taken == [] and waits == ["b: waiting for room on cuda:0#1: its perf case needs about 60.0 GiB, 30.0 GiB free "
                                     "and 2 operator(s) of the batch running there"]
    gpu.free = 70 * GiB
    queue.done(SHARE0, a)  # a ended: its 40 GiB are free again
    waiter.join(timeout=5)
    assert taken == ["b"]  # 60 <= min(70 free, 80 - 10 reserved by c)
    assert queue.take(SHARE0) is None  # empty: the worker is done


def test_an_operator_larger_than_the_gpu_starts_when_it_is_alone():
    queue = JobQueue([_job("huge")], need_of=lambda j: 500 * GiB, probe=Gpu(free_gib=79), poll_s=0.01)
    assert queue.take(SHARE0).name == "huge"


def test_no_probe_no_gate():
    queue = JobQueue([_job("a"), _job("b")], need_of=lambda j: 500 * GiB, probe=None)
    assert [queue.take(SHARE0).name, queue.take(SHARE1).name] == ["a", "b"]
