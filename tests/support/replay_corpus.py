"""Every kernel the offline families write records and replays unchanged (issue 40): for each kernel, its
wrapper is recorded on the spec's first test case (a warm-up call, two recorded calls that must agree),
the judge's extraction of the file defines only its @triton.jit functions, the plan is checked, and its
replay — every launch through Triton's front end first — must give exactly what calling the wrapper
gives. In one process, on the CPU interpreter, like a recording worker and a replay worker in one.

    python -m tests.support.replay_corpus           # a sample: one kernel of every family and kind
    python -m tests.support.replay_corpus --all     # every example, nd, conv and KernelBench spec

(from the repository's root, which `-m` puts first on the import path).

Prints one JSON line per kernel ({"label", "ok", "why", "steps"}); exits 1 if any is not ok.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

from tests.support.paths import SPECS

os.environ["TRITON_INTERPRET"] = "1"

SAMPLE_ND = ("sum_dim0", "mean12", "rms_channels", "mse", "cumsum_reverse", "bmm", "linear_leaky_sum", "max_pool1d", "sdpa")
SAMPLE_CONV = ("conv2d_bias_relu", "depthwise2d", "conv_transpose2d_groups", "conv1d_dilated_strided")
SAMPLE_KB = ("RELU", "LAYERNORM", "GEMM_GROUPNORM", "CROSS_ENTROPY")


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _Worker:
    """What RecordOps needs of a worker, in this process."""

    device = "cpu"

    def __init__(self, fn, inputs):
        import time

        self.slots, self.store = {"k": fn}, {"in": inputs}
        self.stopwatch = type("S", (), {"clock": type("C", (), {"now": staticmethod(time.perf_counter)})})

    def _sync(self) -> None:
        return None


def check(label: str, source: str, spec, folder: Path) -> dict:
    import torch

    from kernelgen.spec import draw_inputs
    from kernelgen.verify.plan import check_plan, parse_plan
    from kernelgen.verify.protocol import storage_span
    from kernelgen.verify.record.ops import RecordOps
    from kernelgen.verify.replay.executor import Replay
    from kernelgen.verify.replay.extract import ExtractError, extract
    from kernelgen.verify.replay.frontend import check as frontend, compiled_twin

    stem = f"k{abs(hash(label)) % 10**8}"
    path = folder / f"{stem}.py"
    path.write_text(source)
    fn = getattr(_import(path, f"cand_{stem}"), spec.name)
    dtype = "float32" if "float32" in spec.dtypes else spec.dtypes[0]
    inputs = draw_inputs(spec, spec.test_cases[0], dtype, 7, "cpu")
    reply = RecordOps(_Worker(fn, inputs)).op_record({"slot": "k", "key": "in", "params": spec.param_defaults})
    if "refused" in reply["info"]:
        return {"label": label, "ok": False, "why": f"refused: {reply['info']['refused']}"}
    try:
        extracted = extract(source)
    except ExtractError as e:
        return {"label": label, "ok": False, "why": f"extract: {e.message}"}
    plan = parse_plan(reply["info"]["plan"])
    check_plan(plan, set(extracted.kernels), [storage_span(t) * t.element_size() for t in inputs])
    replay_path = folder / f"{stem}_replay.py"
    replay_path.write_text(extracted.source)
    module, twin = _import(replay_path, f"replay_{stem}"), compiled_twin(replay_path, f"twin_{stem}")
    replay = Replay(plan, {n: getattr(module, n) for n in extracted.kernels}, "cpu")
    replay.check = lambda step, args: frontend(twin, step.kernel, args, step.options)
    got = replay.run([t.clone() for t in inputs])
    want = fn(*[t.clone() for t in inputs], **spec.param_defaults)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    same = len(got) == len(want) and all(g.shape == w.shape and g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want))
    return {"label": label, "ok": same, "why": "" if same else "the replay's outputs differ from the wrapper's",
            "steps": [s.op for s in plan.steps], "notes": reply["info"].get("notes", [])}


def kernels(everything: bool):
    """(label, source, spec) for the sample, or for every spec the offline families serve."""
    import tests.support.kernelbench_problems as kb
    from kernelgen.offline import generate_kernel
    from kernelgen.spec import load_spec
    from kernelgen.spec.kernelbench import derive_spec
    from tests.support.conv_specs import ALL as CONV
    from tests.support.nd_specs import ALL as ND

    for path in sorted(SPECS.glob("*.yaml")):
        spec = load_spec(path)
        yield f"example {spec.name}", generate_kernel(spec).source, spec
    for table, sample in ((ND, SAMPLE_ND), (CONV, SAMPLE_CONV)):
        for name in sorted(table) if everything else sample:
            yield f"offline {name}", generate_kernel(table[name]).source, table[name]
    folder = Path(tempfile.mkdtemp(prefix="kb-"))
    for name in [n for n in dir(kb) if n.isupper()] if everything else SAMPLE_KB:
        problem = folder / f"level1/1_{name.title()}.py"
        problem.parent.mkdir(exist_ok=True)
        problem.write_text(getattr(kb, name))
        try:
            spec = derive_spec(problem).spec
            source = generate_kernel(spec).source
        except Exception as e:  # noqa: BLE001 - a problem no family serves is not a kernel to replay
            yield f"kernelbench {name}", None, str(e)
            continue
        yield f"kernelbench {name}", source, spec


def main(argv: list[str]) -> int:
    from kernelgen.verify.record import launches
    from kernelgen.verify.replay import frontend, order
    from kernelgen.verify.worker import interpreter

    interpreter.install()
    launches.install()
    order.install()
    frontend.snapshot_language()
    folder = Path(tempfile.mkdtemp(prefix="replay-corpus-"))
    bad = 0
    for label, source, spec in kernels("--all" in argv):
        if source is None:
            print(json.dumps({"label": label, "ok": None, "why": f"not served offline: {str(spec)[:200]}"}), flush=True)
            continue
        try:
            row = check(label, source, spec, folder)
        except Exception as e:  # noqa: BLE001 - reported per kernel
            row = {"label": label, "ok": False, "why": f"{type(e).__name__}: {str(e)[:400]}"}
        bad += not row["ok"]
        print(json.dumps(row), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
