"""The operator spec: the YAML a user writes, validated at the edge into typed objects.

`load_spec(path)` either returns an `OperatorSpec` every other module can trust, or raises
`SpecError` with one `Problem` per mistake (file, field path such as `test_cases[1].bias`, what is
wrong). Nothing here writes files.
"""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernelgen.errors import Problem, SpecError

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Names a spec may use for dtypes, mapped to torch attribute names (resolved lazily: importing
# torch costs ~1 s and `kernelgen validate` should not pay it before reporting a typo).
DTYPES: dict[str, str] = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")

CATEGORIES = ("pointwise", "broadcast", "reduction", "softmax", "normalization", "matmul", "other")

# Value generators an input's `init` may name: name -> number of numeric arguments.
INIT_GENERATORS: dict[str, int] = {
    "randn": 0,  # standard normal
    "rand": 0,  # uniform [0, 1)
    "uniform": 2,  # uniform [lo, hi)
    "normal": 2,  # normal(mean, std)
    "randint": 2,  # integers in [lo, hi)
    "bernoulli": 1,  # 0/1 (or bool) with probability p
    "ones": 0,
}
_INIT_RE = re.compile(r"^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$")


def parse_init(text: str) -> tuple[str, tuple[float, ...]]:
    """Parse an input's `init` ("randn", "randint(0, 100)") into (generator, args); ValueError if bad."""
    match = _INIT_RE.match(text)
    if not match:
        raise ValueError(f"cannot parse init {text!r}; expected e.g. 'randn' or 'randint(0, 100)'")
    gen, arg_text = match.group(1), match.group(2)
    if gen not in INIT_GENERATORS:
        known = ", ".join(INIT_GENERATORS)
        raise ValueError(f"unknown init generator {gen!r}; known: {known}")
    args: tuple[float, ...] = ()
    if arg_text is not None and arg_text.strip():
        try:
            args = tuple(float(a) for a in arg_text.split(","))
        except ValueError:
            raise ValueError(f"init {text!r}: arguments must be numbers") from None
    want = INIT_GENERATORS[gen]
    if len(args) != want:
        raise ValueError(f"init {gen!r} takes {want} argument(s), got {len(args)}")
    if gen in ("uniform", "randint") and not args[0] < args[1]:
        raise ValueError(f"init {text!r}: the lower bound must be below the upper bound")
    if gen == "normal" and args[1] <= 0:
        raise ValueError(f"init {text!r}: std must be positive")
    if gen == "bernoulli" and not 0.0 <= args[0] <= 1.0:
        raise ValueError(f"init {text!r}: p must be in [0, 1]")
    return gen, args


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_identifier(v: str) -> str:
    if not IDENT_RE.match(v) or keyword.iskeyword(v):
        raise ValueError(f"{v!r} is not a Python identifier")
    return v


def _check_dtype(v: str) -> str:
    if v not in DTYPES:
        raise ValueError(f"unknown dtype {v!r}; known: {', '.join(DTYPES)}")
    return v


Identifier = Annotated[str, AfterValidator(_check_identifier)]
KnownDtype = Annotated[str, AfterValidator(_check_dtype)]


class InputSpec(_Strict):
    name: Identifier
    dtype: KnownDtype | None = None  # fixed dtype; None: the case dtype
    init: str = "randn"

    @field_validator("init")
    @classmethod
    def _init(cls, v: str) -> str:
        parse_init(v)
        return v


class ParamSpec(_Strict):
    name: Identifier
    type: Literal["float", "int", "bool"]
    default: float | int | bool

    @model_validator(mode="after")
    def _default_matches_type(self) -> "ParamSpec":
        ok = {
            "float": isinstance(self.default, (int, float)) and not isinstance(self.default, bool),
            "int": isinstance(self.default, int) and not isinstance(self.default, bool),
            "bool": isinstance(self.default, bool),
        }[self.type]
        if not ok:
            raise ValueError(f"default {self.default!r} is not a {self.type}")
        return self


class OutputSpec(_Strict):
    name: Identifier
    dtype: KnownDtype | None = None  # None: the reference decides


class ToleranceSpec(_Strict):
    atol: float = Field(gt=0)
    rtol: float = Field(gt=0)


# Defaults when a spec gives none. Offline kernels compute in float32 and round once, PyTorch may
# round intermediates, so a 1-ulp difference must pass: fp16 ulp at 1.0 is 9.8e-4, bf16 7.8e-3.
DEFAULT_TOLERANCES: dict[str, ToleranceSpec] = {
    "float64": ToleranceSpec(atol=1e-7, rtol=1e-7),
    "float32": ToleranceSpec(atol=1e-4, rtol=1e-4),
    "float16": ToleranceSpec(atol=1e-3, rtol=2e-3),
    "bfloat16": ToleranceSpec(atol=1e-2, rtol=1.6e-2),
}
_INT_TOLERANCE = ToleranceSpec(atol=1e-12, rtol=1e-12)

Shape = list[int]
Case = dict[str, Shape]


class OperatorSpec(_Strict):
    name: str
    description: str = ""
    category: Literal[
        "pointwise", "broadcast", "reduction", "softmax", "normalization", "matmul", "other"
    ] = "other"
    inputs: list[InputSpec] = Field(min_length=1)
    params: list[ParamSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(min_length=1)
    reference: str | None = None
    dtypes: list[str] = Field(min_length=1)
    test_cases: list[Case] = Field(min_length=1)
    perf_cases: list[Case] = Field(default_factory=list)
    perf_dtypes: list[str] = Field(default_factory=list)  # dtypes to time; empty: all of `dtypes`
    tolerance: dict[str, ToleranceSpec] = Field(default_factory=dict)
    flops: str | None = None  # expression over input shapes, e.g. "2 * a[0] * a[1] * b[1]"
    target_speedup: float | None = Field(default=None, gt=0)
    max_rounds: int = Field(default=5, ge=0, le=50)
    hints: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v) or keyword.iskeyword(v):
            raise ValueError(f"{v!r} must match [a-z][a-z0-9_]* (it becomes a file prefix and a function name)")
        return v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        bad = [d for d in v if d not in DTYPES]
        if bad:
            raise ValueError(f"unknown dtype(s) {', '.join(map(repr, bad))}; known: {', '.join(DTYPES)}")
        if len(set(v)) != len(v):
            raise ValueError("dtypes are listed more than once")
        return v

    @model_validator(mode="after")
    def _perf_dtypes_subset(self) -> "OperatorSpec":
        extra = [d for d in self.perf_dtypes if d not in self.dtypes]
        if extra:
            raise ValueError(f"perf_dtypes {extra} are not in dtypes {self.dtypes}")
        return self

    # --- derived views the rest of KernelGen uses -------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def param_defaults(self) -> dict[str, float | int | bool]:
        return {p.name: p.default for p in self.params}

    @property
    def signature(self) -> str:
        """The entry function's parameter list, shared by the kernel and the baseline."""
        parts = self.input_names + [f"{p.name}={p.default!r}" for p in self.params]
        return ", ".join(parts)

    def tolerance_for(self, dtype: str) -> ToleranceSpec:
        if dtype in self.tolerance:
            return self.tolerance[dtype]
        return DEFAULT_TOLERANCES.get(dtype, _INT_TOLERANCE)

    def input_dtype(self, inp: InputSpec, case_dtype: str) -> str:
        return inp.dtype or case_dtype

    def flop_count(self, case: Case) -> int | None:
        if not self.flops:
            return None
        return int(eval_shape_expr(self.flops, case))

    @property
    def effective_perf_cases(self) -> list[Case]:
        return self.perf_cases or self.test_cases

    @property
    def effective_perf_dtypes(self) -> list[str]:
        return self.perf_dtypes or self.dtypes


# --- restricted arithmetic over shapes (for `flops`) ---------------------------------------
_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


def eval_shape_expr(expr: str, case: Case) -> float:
    """Evaluate e.g. `2 * a[0] * a[1] * b[1]` or `numel(x)`; inputs name their shapes."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in case:
                raise ValueError(f"unknown name {node.id!r} (inputs: {', '.join(case)})")
            return case[node.id]
        if isinstance(node, ast.Subscript):
            seq = ev(node.value)
            idx = ev(node.slice)
            return seq[idx]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
            left, right = ev(node.left), ev(node.right)
            return {
                ast.Add: lambda: left + right,
                ast.Sub: lambda: left - right,
                ast.Mult: lambda: left * right,
                ast.Div: lambda: left / right,
                ast.FloorDiv: lambda: left // right,
                ast.Pow: lambda: left**right,
                ast.Mod: lambda: left % right,
            }[type(node.op)]()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "numel"
            and len(node.args) == 1
        ):
            n = 1
            for d in ev(node.args[0]):
                n *= d
            return n
        raise ValueError(f"unsupported syntax in expression: {ast.unparse(node)!r}")

    return ev(ast.parse(expr, mode="eval"))


# --- loading ---------------------------------------------------------------------------------
def _loc(parts: tuple[Any, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _pydantic_problems(err: ValidationError, data: dict[str, Any]) -> list[Problem]:
    problems = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-after")))
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}; check its spelling (DESIGN.md lists the fields)"
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


def _check_reference_runs(spec: OperatorSpec) -> list[Problem]:
    """Run the reference on shape-only ('meta') tensors: catches shapes that do not broadcast and
    output counts that disagree with `outputs`, without touching real memory."""
    if spec.reference is None:
        return []
    import torch  # deferred: costs ~1 s

    from kernelgen.reference import load_reference

    try:
        fn = load_reference(spec)
    except Exception as e:  # noqa: BLE001 - any failure of user code is a spec problem
        return [Problem("reference", f"fails when defined: {type(e).__name__}: {e}")]
    problems = []
    for field in ("test_cases", "perf_cases"):
        for i, case in enumerate(getattr(spec, field)):
            dtype = spec.dtypes[0]
            args = [
                torch.empty(case[inp.name], dtype=getattr(torch, DTYPES[spec.input_dtype(inp, dtype)]), device="meta")
                for inp in spec.inputs
            ]
            try:
                out = fn(*args, **spec.param_defaults)
            except NotImplementedError:
                continue  # an op with no meta kernel: checked for real by the harness instead
            except Exception as e:  # noqa: BLE001
                problems.append(Problem(f"{field}[{i}]", f"the reference fails on these shapes: {e}"))
                continue
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not all(isinstance(o, torch.Tensor) for o in outs):
                problems.append(Problem("reference", "must return a tensor or a tuple of tensors"))
                break
            if len(outs) != len(spec.outputs):
                problems.append(
                    Problem("outputs", f"the reference returns {len(outs)} tensor(s) but `outputs` lists {len(spec.outputs)}")
                )
                break
    return problems


def validate_spec_data(data: Any, path: str = "<spec>", *, run_reference: bool = True) -> OperatorSpec:
    """Validate already-parsed YAML data; raise SpecError listing every problem found."""
    if not isinstance(data, dict):
        raise SpecError(path, [Problem("", "the spec must be a YAML mapping (key: value lines)")])
    try:
        spec = OperatorSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(path, _pydantic_problems(err, data)) from None
    problems = _check_reference(spec) + _check_cases(spec) + _check_misc(spec)
    if not problems and run_reference:
        problems = _check_reference_runs(spec)
    if problems:
        raise SpecError(path, problems)
    return spec


def load_spec(path: str | Path, *, run_reference: bool = True) -> OperatorSpec:
    """Read and validate an operator spec file."""
    p = Path(path)
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
