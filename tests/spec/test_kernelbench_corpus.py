"""KernelBench-format problems of our own, each built in full by `kernelgen new --no-bench` on the CPU
interpreter (issue 28): sizes the module fixes stay fixed in every test and generated case, the
draws' couplings hold in the generated cases (a target indexes the class dim it was drawn for, a
square input stays square), a case too large for the worker's arena is never generated, and every
kernel accepts its perf case's shapes (the accuracy verdict's perf-shape check)."""

import json
import math
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.spec import load_spec
from kernelgen.verify.judge.inputs import INTERPRETER_FLOOR, INTERPRETER_GROWTH
from tests.support.kernelbench_problems import BATCHNORM, CROSS_ENTROPY, GEMM_GROUPNORM, GROUPNORM, SQUARE_INPUT

CORPUS = {
    "kb1_35_groupnorm": ("level1/35_GroupNorm.py", GROUPNORM),
    "kb1_33_batchnorm": ("level1/33_BatchNorm.py", BATCHNORM),
    "kb2_62_gemm_groupnorm_relu": ("level2/62_Gemm_GroupNorm_ReLU.py", GEMM_GROUPNORM),
    "kb1_95_crossentropy": ("level1/95_CrossEntropy.py", CROSS_ENTROPY),
    "kb1_26_gelu_square": ("level1/26_GELU_square.py", SQUARE_INPUT),
}


def _group(name: str) -> pytest.MarkDecorator:
    """The xdist group of one problem's tests: under `--dist loadgroup` (pyproject's addopts) they run on one
    worker, so each problem is built once per run; under `--dist load` the whole module's fixture (five builds,
    ~190 s on two busy cores) could run once per worker."""
    return pytest.mark.xdist_group(f"kb-corpus-{name}")


def _on(name: str, *rest):
    """A parameter set of `name`'s tests, in `name`'s group."""
    return pytest.param(name, *rest, marks=_group(name))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (CLI result, operator folder), each problem built the first time a test asks for it."""
    root = tmp_path_factory.mktemp("corpus")
    out = {}

    def build(name: str) -> tuple:
        if name not in out:
            rel, text = CORPUS[name]
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
            result = CliRunner().invoke(app, ["new", str(path), "--out", str(root / "gen"), "--backend", "offline",
                                              "--no-bench"])
            out[name] = (result, root / "gen" / name)
        return out[name]

    return build


def _accuracy(folder: Path) -> dict:
    state = json.loads((folder / "state.json").read_text())
    return state["rounds"][0]["accuracy"]["accuracy"]


@pytest.mark.parametrize("name", [_on(n) for n in CORPUS])
def test_built_in_full_and_accepting_its_perf_shapes(built, name):
    result, folder = built(name)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    spec = load_spec(folder / "spec.yaml")
    acc = _accuracy(folder)
    probed = [c for c in acc["checks"] if c["call"] == "perf-shape"]
    assert [c["shapes"] for c in probed] == spec.perf_cases and all(c["passed"] for c in probed)
    assert acc["correct"] and acc["deciding_dtypes"] == ["float32"]


@pytest.mark.parametrize("name,dims", [_on("kb1_35_groupnorm", {"x": [1], "gn_weight": [0], "gn_bias": [0]}),
                                       _on("kb2_62_gemm_groupnorm_relu", {"x": [1], "fc_weight": [0, 1], "gn_weight": [0]}),
                                       _on("kb1_95_crossentropy", {"predictions": [1]})])
def test_sizes_the_module_fixes_stay_in_every_case_checked(built, name, dims):
    _, folder = built(name)
    spec = load_spec(folder / "spec.yaml")
    fixed = {i.name: i.fixed_dims for i in spec.inputs}
    perf = spec.perf_cases[0]
    for inp, want in dims.items():
        assert set(want) <= set(fixed[inp])
        for check in _accuracy(folder)["checks"]:  # the spec's cases and every generated one
            assert [check["shapes"][inp][d] for d in want] == [perf[inp][d] for d in want], check["variant"]


@_group("kb1_95_crossentropy")
def test_free_sizes_vary_and_the_generated_cases_keep_the_draws_couplings(built):
    _, folder = built("kb1_95_crossentropy")
    checks = _accuracy(folder)["checks"]
    shaped = next(c for c in checks if c["variant"] == "random-shape")
    test = next(c for c in checks if not c["variant"])
    assert shaped["shapes"]["predictions"][0] != test["shapes"]["predictions"][0]  # the batch varies
    assert shaped["shapes"]["targets"] == [shaped["shapes"]["predictions"][0]]  # a target per row, of 1000 classes
    assert shaped["passed"]


@_group("kb1_26_gelu_square")
def test_a_square_input_is_renamed_square_and_within_the_size_budget(built):
    _, folder = built("kb1_26_gelu_square")
    shaped = next(c for c in _accuracy(folder)["checks"] if c["variant"] == "random-shape")
    x = shaped["shapes"]["x"]
    assert x[2] == x[3] and x[2] > 8  # still square, and past a tile of 8
    first = math.prod(load_spec(folder / "spec.yaml").test_cases[0]["x"])
    assert math.prod(x) <= max(INTERPRETER_GROWTH * first, INTERPRETER_FLOOR)
