"""Reading and validating a spec file: `load_spec(path)` returns an `OperatorSpec` every other module
can trust, or raises `SpecError` with one `Problem` per mistake (file, field path such as
`test_cases[1].bias`, what is wrong). Nothing here writes files.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kernelgen.errors import Problem, SpecError
from kernelgen.spec.init import init_shape_problem, parse_init
from kernelgen.spec.rnnshapes import rnn_shapes
from kernelgen.spec.model import DTYPES, InputSpec, OperatorSpec, OutputSpec, ParamSpec, ToleranceSpec
from kernelgen.spec.shapes import eval_shape_expr

def _loc(parts: tuple[Any, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys a spec accepts at `loc`'s level (top level, an input, a param, an output, a tolerance)."""
    parent = loc[0] if len(loc) > 1 else None
    model = {"inputs": InputSpec, "params": ParamSpec, "outputs": OutputSpec, "tolerance": ToleranceSpec}.get(parent, OperatorSpec)
    return list(model.model_fields)


def _pydantic_problems(err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-after")))
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}; check its spelling (known here: {', '.join(_known_keys(loc))})"
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problems.append(Problem(_loc(loc), msg))
    return problems


def _check_reference(spec: OperatorSpec) -> list[Problem]:
    if spec.reference is None:
        return []
    try:
        tree = ast.parse(spec.reference)
    except SyntaxError as e:
        return [Problem("reference", f"does not parse: {e.msg} (line {e.lineno} of the reference)")]
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if spec.name not in funcs:
        found = ", ".join(funcs) or "none"
        return [Problem("reference", f"must define a function called {spec.name!r} (functions found: {found})")]
    fn = funcs[spec.name].args
    positional = [a.arg for a in fn.posonlyargs + fn.args]
    inputs = spec.input_names
    params = [p.name for p in spec.params]
    problems = []
    if positional[: len(inputs)] != inputs:
        problems.append(
            Problem(
                "reference",
                f"{spec.name}({', '.join(positional)}) must take the inputs {', '.join(inputs)} "
                "as its first positional parameters, in the order of `inputs`",
            )
        )
    keywords = positional[len(inputs):] + [a.arg for a in fn.kwonlyargs]
    if sorted(keywords) != sorted(params):
        problems.append(
            Problem(
                "reference",
                f"after the inputs, {spec.name} takes {keywords or 'nothing'} but `params` lists "
                f"{params or 'nothing'}; they must be the same names",
            )
        )
    if fn.vararg or fn.kwarg:
        problems.append(Problem("reference", "*args / **kwargs are not allowed: list every input and param"))
    return problems


def _check_cases(spec: OperatorSpec) -> list[Problem]:
    problems = []
    names = spec.input_names
    inits = {i.name: i.init for i in spec.inputs}
    for field in ("test_cases", "perf_cases"):
        for i, case in enumerate(getattr(spec, field)):
            for n in names:
                if n not in case:
                    problems.append(Problem(f"{field}[{i}].{n}", "no shape given for this input"))
            for k, shape in case.items():
                if k not in names:
                    problems.append(Problem(f"{field}[{i}].{k}", f"not an input (inputs: {', '.join(names)})"))
                elif any(d < 1 for d in shape):
                    problems.append(Problem(f"{field}[{i}].{k}", f"dimensions must be >= 1, got {shape}"))
                elif (why := init_shape_problem(parse_init(inits[k]), shape)) is not None:
                    problems.append(Problem(f"{field}[{i}].{k}", f"its init {inits[k]!r} cannot draw this shape: {why}"))
    return problems or _check_fixed_dims(spec)


def _check_fixed_dims(spec: OperatorSpec) -> list[Problem]:
    """A fixed dim exists in every case and has one size in all of them, test and perf alike: a kernel
    specialised to it must accept every case the judge and the timing give it."""
    problems = []
    cases = [(f"test_cases[{i}]", c) for i, c in enumerate(spec.test_cases)]
    cases += [(f"perf_cases[{i}]", c) for i, c in enumerate(spec.perf_cases)]
    for k, inp in enumerate(spec.inputs):
        for d in inp.fixed_dims:
            sizes = {where: c[inp.name][d] for where, c in cases if 0 <= d < len(c[inp.name])}
            if d < 0 or len(sizes) < len(cases):
                problems.append(Problem(f"inputs[{k}].fixed_dims", f"dim {d} is not a dim of {inp.name} in every case"))
            elif len(set(sizes.values())) > 1:
                seen = ", ".join(f"{w}: {v}" for w, v in sizes.items())
                problems.append(Problem(f"inputs[{k}].fixed_dims", f"dim {d} of {inp.name} is fixed but its size differs "
                                                                    f"between cases ({seen})"))
    return problems


def _check_misc(spec: OperatorSpec) -> list[Problem]:
    problems = []
    for d in spec.tolerance:
        if d not in DTYPES:
            problems.append(Problem(f"tolerance.{d}", f"unknown dtype; known: {', '.join(DTYPES)}"))
    names = [i.name for i in spec.inputs] + [p.name for p in spec.params]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        problems.append(Problem("inputs", f"names used more than once: {', '.join(dup)}"))
    if spec.flops:
        for i, case in enumerate(spec.test_cases):
            try:
                eval_shape_expr(spec.flops, case)
            except (ValueError, IndexError, TypeError, SyntaxError, ZeroDivisionError) as e:
                problems.append(Problem("flops", f"cannot evaluate on test_cases[{i}]: {e}"))
                break
    return problems


def where_in_reference(exc: BaseException, spec: OperatorSpec) -> str:
    """` (line 3 of the reference: `return x + y`)`: the innermost frame of the user's reference in
    the exception's traceback, or "" when the error was raised elsewhere."""
    from kernelgen.spec.reference import PRELUDE, reference_filename

    lineno = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == reference_filename(spec):
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if lineno is None:
        return ""
    n = lineno - PRELUDE.count("\n")
    lines = (spec.reference or "").splitlines()
    text = lines[n - 1].strip() if 1 <= n <= len(lines) else ""
    return f" (line {n} of the reference: `{text}`)" if text else f" (line {n} of the reference)"


def _check_reference_runs(spec: OperatorSpec) -> list[Problem]:
    """Run the reference on shape-only ('meta') tensors: catches shapes that do not broadcast and
    output counts that disagree with `outputs`, without touching real memory."""
    if spec.reference is None:
        return []
    from kernelgen.spec.reference import load_reference

    try:
        fn = load_reference(spec)
    except Exception as e:  # noqa: BLE001 - any failure of user code is a spec problem
        return [Problem("reference", f"fails when defined: {type(e).__name__}: {e}{where_in_reference(e, spec)}")]
    with rnn_shapes():  # a recurrent layer by its shapes, not step by step (seconds a call at KernelBench's sizes)
        return _meta_problems(spec, fn)


def _meta_problems(spec: OperatorSpec, fn: Any) -> list[Problem]:
    import torch  # deferred: costs ~1 s

    from kernelgen.nodynamo import without_dynamo

    problems = []
    for field in ("test_cases", "perf_cases"):
        for i, case in enumerate(getattr(spec, field)):
            dtype = spec.dtypes[0]
            args = [
                torch.empty(case[inp.name], dtype=getattr(torch, DTYPES[spec.input_dtype(inp, dtype)]), device="meta")
                for inp in spec.inputs
            ]
            try:
                out = without_dynamo(lambda: fn(*args, **spec.param_defaults))  # noqa: B023 - called at once
            except NotImplementedError:
                continue  # an op with no meta kernel: checked for real by the harness instead
            except (RuntimeError, ValueError, IndexError) as e:  # what torch raises for shapes that do not fit
                where = where_in_reference(e, spec)
                problems.append(Problem(f"{field}[{i}]", f"the reference fails on these shapes: {type(e).__name__}: {e}{where}"))
                continue
            except Exception as e:  # noqa: BLE001 - a bug in the reference itself, whatever the shapes
                return [Problem("reference", f"raises {type(e).__name__}: {e}{where_in_reference(e, spec)}")]
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not all(isinstance(o, torch.Tensor) for o in outs):
                problems.append(Problem("reference", "must return a tensor or a tuple of tensors"))
                return problems
            if len(outs) != len(spec.outputs):
                problems.append(
                    Problem("outputs", f"the reference returns {len(outs)} tensor(s) but `outputs` lists {len(spec.outputs)}")
                )
                return problems
    return problems


def validate_spec_data(data: Any, path: str = "<spec>", *, run_reference: bool = True) -> OperatorSpec:
    """Validate already-parsed YAML data; raise SpecError listing every problem found."""
    if not isinstance(data, dict):
        raise SpecError(path, [Problem("", "the spec must be a YAML mapping (key: value lines)")])
    try:
        spec = OperatorSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(path, _pydantic_problems(err)) from None
    problems = _check_reference(spec) + _check_cases(spec) + _check_misc(spec)
    if not problems and run_reference:
        problems = _check_reference_runs(spec)
    if problems:
        raise SpecError(path, problems)
    return spec


def load_spec(path: str | Path, *, run_reference: bool = True) -> OperatorSpec:
    """Read and validate an operator spec file."""
    p = Path(path)
    if p.is_dir():
        inside = p / "spec.yaml"
        found = sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
        if inside.is_file():
            fix = f"its spec is {inside}: give that file"
        elif found:
            fix = f"give one of its {len(found)} YAML file(s), e.g. {found[0]}"
        else:
            fix = "give a spec file, e.g. operator_specs/broadcast.yaml"
        raise SpecError(str(p), [Problem("", f"is a folder, not a spec file; {fix}")])
    if not p.is_file():
        raise SpecError(str(p), [Problem("", "no such file")])
    text = p.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise SpecError(str(p), [Problem(where, f"YAML syntax error: {e.problem or e}")]) from None
    except yaml.YAMLError as e:
        raise SpecError(str(p), [Problem("", f"YAML error: {e}")]) from None
    return validate_spec_data(data, str(p), run_reference=run_reference)
