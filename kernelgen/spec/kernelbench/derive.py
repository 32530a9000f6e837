"""A KernelBench-format problem file -> an operator spec (plain KernelGen YAML, written out readable).

    derived = derive_spec("KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py")
    derived.spec      # OperatorSpec, validated like any spec file
    derived.text      # the spec.yaml text `kernelgen new` writes into the operator folder

The reference is the problem's own source, then `Model(*get_init_inputs())` built once on the meta
device and an entry function calling it through `torch.func.functional_call` with every parameter
and buffer passed in. Inputs and their draws come from `get_inputs()` and the module's own
initialisation (lift.py), the small test cases from the problem's sizes shrunk (shrink.py).
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from kernelgen import __version__
from kernelgen.errors import ProblemFileError, SpecError
from kernelgen.render import render
from kernelgen.spec.kernelbench.checks import check_deterministic, runnable_dtypes
from kernelgen.spec.kernelbench.extents import CaseWork, case_work, roomy
from kernelgen.spec.kernelbench.lift import Observation, ScalarInput, TensorInput, mutated, observe
from kernelgen.spec.kernelbench.fixed import doubled, fixed_dims, held_names
from kernelgen.spec.kernelbench.shrink import HARD_CAP, fitting_cases, ints, small_cases
from kernelgen.spec.kernelbench.source import ProblemSource, problem_name, read_problem
from kernelgen.spec.load import validate_spec_data
from kernelgen.spec.model import DTYPES, OperatorSpec
from kernelgen.spec.reference import PRELUDE
from kernelgen.spec.rnnshapes import rnn_shapes

EXTRA_DTYPES = ("float16", "bfloat16")  # besides KernelBench's float32, where the reference runs in them


@dataclass(frozen=True)
class DerivedSpec:
    spec: OperatorSpec
    text: str


def _q(text: str) -> str:
    """A YAML scalar that reads as itself (JSON's double-quoted strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def _flow(case: dict[str, list[int]]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in case.items()) + "}"


def _description(src: ProblemSource, model: Any) -> str:
    doc = " ".join((model.__class__.__doc__ or "").strip().split("\n\n")[0].split())
    where = src.path.name if not src.path.parent.name.lower().startswith("level") else f"{src.path.parent.name}/{src.path.name}"
    return f"KernelBench {where}" + (f": {doc}" if doc else "")


def _lifted_shapes(obs: Observation) -> tuple:
    return tuple(tuple(t.shape) for t in obs.inputs if t.key)


SIZED_WHY = ("Model fixes sizes of its inputs (a LayerNorm's shape), and the test cases shrink them with "
             "get_init_inputs()'s sizes: one module per size")


def reference_source(src: ProblemSource, name: str, obs: Observation, cloned: set[str],
                     sized: list[Observation] | None = None) -> str:
    """The reference: the problem's source, then its Model built on the meta device at `obs`'s sizes, or
    (`sized`) at each of these observations' sizes, picked by the shapes of the tensors lifted into inputs."""
    def entry(t: TensorInput) -> str:
        return f"{_q(t.key)}: {t.name}" + (".clone()" if t.key in cloned else "")

    params = [entry(t) for t in obs.inputs if t.kind == "parameter"]
    buffers = [entry(t) for t in obs.inputs if t.kind in ("buffer", "attribute")]  # a plain tensor attribute: as a buffer
    state = "(parameters, buffers)" if params and buffers else ("parameters" if params else "buffers")
    for o in [obs, *(sized or [])]:
        if ast.literal_eval(repr(o.init)) != o.init:
            raise ProblemFileError(src.path, f"get_init_inputs() returns values that cannot be written as Python literals: {o.init!r}")
    table: dict[tuple, str] = {}
    for o in sized or []:
        table.setdefault(_lifted_shapes(o), repr(o.init))
    note = ("training mode updates these in place: the forward gets copies, so the inputs stay as drawn"
            if cloned else "")
    return render("spec/kernelbench_reference.py.j2", source=src.text.rstrip("\n"), init=repr(obs.init), name=name,
                  mode="training mode, as KernelBench evaluates it" if obs.training else "eval mode, as the problem sets it",
                  signature=", ".join([t.name for t in obs.inputs] + [f"{s.name}={s.value!r}" for s in obs.scalars]),
                  forward_args=", ".join(obs.forward), forward_count=len(obs.forward), parameters=params, buffers=buffers,
                  state=state, cloned=note, sized=[(repr(k), v) for k, v in table.items()], sized_why=SIZED_WHY,
                  lifted=", ".join(t.name for t in obs.inputs if t.key), schedules=obs.schedules)


def _entry(text: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"kernelgen_reference_{name}"}
    exec(compile(PRELUDE + text, f"<reference of {name}>", "exec"), namespace)  # noqa: S102 - the problem's own code
    return namespace[name]


def _meta_run(fn: Callable[..., Any], obs: Observation) -> Any:
    import torch

    return fn(*[torch.empty(t.shape, dtype=getattr(torch, t.dtype), device="meta") for t in obs.inputs])


def _fits(fn: Callable[..., Any], room: bool = False) -> Callable[[Observation], bool]:
    """Whether a case runs through the module built at KernelBench's sizes; with `room`, also whether it
    leaves every convolution room (extents.py: a 1-wide output makes the trace specialise the input)."""
    def fits(obs: Observation) -> bool:
        try:
            if room:
                return roomy(lambda: _meta_run(fn, obs))
            _meta_run(fn, obs)
        except NotImplementedError:
            return True  # an op without a meta kernel: the CPU run below checks for real
        except Exception:  # noqa: BLE001 - these sizes do not fit the module built at KernelBench's
            return False
        return True

    return fits


def _work(fn: Callable[..., Any]) -> Callable[[Observation], CaseWork]:
    """What a case asks of the interpreter (nothing counted where it cannot be run on meta tensors:
    `fits` decides those)."""
    def work(obs: Observation) -> CaseWork:
        try:
            return case_work(lambda: _meta_run(fn, obs))
        except Exception:  # noqa: BLE001 - an op without a meta kernel
            return CaseWork(0, 0)

    return work


def _outputs(src: ProblemSource, fn: Callable[..., Any], perf: Observation) -> list[str]:
    import torch

    try:
        out = _meta_run(fn, perf)
    except NotImplementedError:
        out = None
    except Exception as e:  # noqa: BLE001 - the user's module failing at its own sizes
        raise ProblemFileError(src.path, f"Model's forward fails on get_inputs(): {type(e).__name__}: {str(e).splitlines()[0]}") from None
    if out is None:
        return ["out"]
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise ProblemFileError(src.path, "Model's forward must return a tensor or a tuple of tensors")
    return ["out"] if len(outs) == 1 else [f"out{i}" for i in range(len(outs))]


def _input_line(t: TensorInput, fixed: list[int]) -> dict[str, str]:
    note = f"{t.kind} `{t.key}` of Model" if t.key else ""
    return {"name": t.name, "dtype": "" if t.dtype == "float32" else t.dtype, "init": _q(t.init.text), "note": note,
            "fixed": f"[{', '.join(map(str, fixed))}]" if fixed else ""}


def _param_line(s: ScalarInput) -> dict[str, str]:
    return {"name": s.name, "type": s.type, "default": repr(s.value), "note": s.how}


def _render(src: ProblemSource, name: str, perf: Observation, cases: list[Observation], reference: str,
            outputs: list[str], dtypes: list[str], fixed: dict[str, list[int]]) -> str:
    for t in perf.inputs:
        if t.dtype not in DTYPES:
            raise ProblemFileError(src.path, f"`{t.name}` is a {t.dtype} tensor; a spec's dtypes are {', '.join(DTYPES)}")
    return render("spec/kernelbench.yaml.j2", version=__version__, source=_q(str(src.path)), name=name,
                  description=_q(_description(src, perf.model)), inputs=[_input_line(t, fixed.get(t.name, [])) for t in perf.inputs],
                  params=[_param_line(s) for s in perf.scalars],
                  outputs=outputs, reference=reference.rstrip("\n") + "\n", dtypes=dtypes, test_cases=[_flow(c.case) for c in cases],
                  perf_case=_flow(perf.case))


def _validate(src: ProblemSource, text: str) -> OperatorSpec:
    try:
        return validate_spec_data(yaml.safe_load(text), str(src.path))
    except SpecError as e:
        raise ProblemFileError(src.path, "the derived spec does not validate: " + "; ".join(map(str, e.problems))) from None


def _own_module_fits(obs: Observation, room: bool = False) -> bool:
    """Whether `obs`'s inputs run through the module built at `obs`'s own sizes (on meta tensors); with
    `room`, also whether every convolution keeps room (as _fits)."""
    import torch

    tensors = {t.name: torch.empty(t.shape, dtype=getattr(torch, t.dtype), device="meta") for t in obs.inputs}
    given = tensors | {s.name: s.value for s in obs.scalars}

    def run() -> Any:
        return torch.func.functional_call(obs.model, {t.key: tensors[t.name] for t in obs.inputs if t.key},
                                          tuple(given[n] for n in obs.forward))

    try:
        if room:
            return roomy(run)
        run()
    except NotImplementedError:
        return True
    except Exception:  # noqa: BLE001 - these sizes do not fit the problem's own module
        return False
    return True


def _fixed_largest(src: ProblemSource, perf: Observation) -> TensorInput | None:
    """The largest input that keeps its shape when every size the problem file names is doubled: one whose
    size Model's code writes itself (AlexNet's `nn.Linear(256 * 6 * 6, 4096)`); None where none does."""
    try:
        moved = observe(src, {n: doubled(v) for n, v in src.sizes.items() if max(ints(v), default=0) > 1})
    except ProblemFileError:
        return None
    same = [t for t, m in zip(perf.inputs, moved.inputs) if t.shape == m.shape]
    return max(same, key=lambda t: math.prod(t.shape)) if same else None


def _sized_reference(src: ProblemSource, name: str, perf: Observation) -> tuple[str, list[Observation]]:
    """Where the dims the module fixes are too many to keep (LayerNorm over 64x256x256: 4.2M elements in
    one row, above shrink.HARD_CAP's 2M, and an interpreter check of it takes minutes), the test cases
    shrink get_init_inputs()'s sizes with the dims (LayerNorm over 7x9x11), and the reference builds
    Model once per size, picked by the shapes of its lifted parameters: KernelBench's own at the perf case."""
    lifted = any(t.key for t in perf.inputs)
    cases = (small_cases(src, perf, lambda o: _own_module_fits(o, room=True), set())
             or small_cases(src, perf, _own_module_fits, set())) if lifted else []
    shapes = {_lifted_shapes(o): o.init for o in [perf, *cases]}
    if not cases or any(shapes[_lifted_shapes(o)] != o.init for o in [perf, *cases]):
        big = _fixed_largest(src, perf)
        if big is not None and math.prod(big.shape) > HARD_CAP:  # a size written into Model's code, not one the file names
            what = f"Model's {big.kind} `{big.key}`" if big.key else f"input `{big.name}`"
            raise ProblemFileError(src.path, f"no test case small enough to check: {what} is {big.shape} "
                                             f"({math.prod(big.shape) / 1e6:.1f}M elements) in every case the problem's sizes "
                                             f"make (its size is written in Model's code), above the {HARD_CAP / 1e6:.0f}M-element "
                                             "cap of a test case")
        raise ProblemFileError(src.path, "no small test case runs on the module built at KernelBench's sizes "
                                         "(its forward depends on sizes given to Model, e.g. a LayerNorm's shape"
                                         + ("" if lifted else ", and it has no parameters whose shapes could tell "
                                            "modules built at other sizes apart") + ")")
    return reference_source(src, name, perf, mutated(perf), sized=[perf, *cases]), cases


def derive_spec(path: str | Path, *, extra_dtypes: bool = True) -> DerivedSpec:
    """The spec of a KernelBench-format problem file, or ProblemFileError saying why there is none.
    Every meta run of it takes a recurrent layer by its shapes (kernelgen.spec.rnnshapes).
    `extra_dtypes` False: float32 only, KernelBench's own dtype (no float16/bfloat16 checks beside it)."""
    with rnn_shapes():
        return _derive(read_problem(path), extra_dtypes)


def _derive(src: ProblemSource, extra_dtypes: bool = True) -> DerivedSpec:
    name = problem_name(src.path)
    perf = observe(src)
    reference = reference_source(src, name, perf, mutated(perf))
    fn = _entry(reference, name)
    outputs = _outputs(src, fn, perf)
    held = held_names(src, perf, _fits(fn))
    # cases leaving every convolution room first; only where none does, any case that runs (a module
    # whose own sizes leave a convolution 1 wide)
    cases = fitting_cases(src, perf, _fits(fn, room=True), held, _work(fn)) or fitting_cases(src, perf, _fits(fn), held, _work(fn))
    fixed: dict[str, list[int]] = {}
    if cases:
        fixed = fixed_dims(src, perf, cases, held)
    else:  # the module built again at each case's sizes: none of its sizes is fixed across cases
        reference, cases = _sized_reference(src, name, perf)
        fn = _entry(reference, name)
    draft = _validate(src, _render(src, name, perf, cases, reference, outputs, ["float32"], fixed))
    check_deterministic(src, draft)
    dtypes = ["float32"] + (runnable_dtypes(draft, EXTRA_DTYPES) if extra_dtypes else [])
    text = _render(src, name, perf, cases, reference, outputs, dtypes, fixed)
    return DerivedSpec(_validate(src, text), text)
