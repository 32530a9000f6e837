"""KernelBench-format problems through `kernelgen new` on the CPU interpreter, the spec.yaml the operator
folder keeps, and `kernelgen export --kernelbench` held to KernelBench's contract: ModelNew(*get_init_inputs())
with Model's state dict loaded matches Model on fresh inputs."""

import importlib.util
import textwrap

import pytest
import torch
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.spec import load_spec
from kernelgen.spec.kernelbench import derive_spec
from tests.support.groups import on_shared_fixture
from tests.support.kernelbench_problems import LINEAR, RELU, SCALAR


def _new(tmp_path_factory, text, rel):
    root = tmp_path_factory.mktemp("kb")
    path = root / rel
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(text).lstrip())
    out = root / "gen"
    result = CliRunner().invoke(app, ["new", str(path), "--out", str(out), "--backend", "offline", "--no-bench"])
    return path, out, result


@pytest.fixture(scope="module")
def relu(tmp_path_factory):
    return _new(tmp_path_factory, RELU, "level1/19_ReLU.py")


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    return _new(tmp_path_factory, LINEAR, "level2/12_Gemm_Multiply_LeakyReLU.py")


@pytest.fixture(scope="module")
def scalar(tmp_path_factory):
    return _new(tmp_path_factory, SCALAR, "level1/5_Matrix_scalar_multiplication.py")


@pytest.mark.parametrize("which,name", [on_shared_fixture(__name__, "relu", "relu", "kb1_19_relu"),
                                        on_shared_fixture(__name__, "linear", "linear", "kb2_12_gemm_multiply_leakyrelu"),
                                        on_shared_fixture(__name__, "scalar", "scalar", "kb1_5_matrix_scalar_multiplication")])
def test_new_builds_a_correct_kernel_and_keeps_the_derived_spec(which, name, request):
    path, out, result = request.getfixturevalue(which)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    folder = out / name
    kept = (folder / "spec.yaml").read_text()
    assert kept == derive_spec(path).text  # the derived YAML, readable and editable, not the .py
    assert load_spec(folder / "spec.yaml").name == name
    assert f"def {name}(" in (folder / f"{name}_baseline.py").read_text()


def test_validate_says_offline_yes(relu):
    path, _, _ = relu
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 0, r.output
    assert "kb1_19_relu(x)" in r.output and "offline: yes" in r.output


def test_a_float_input_reaches_the_kernel_as_a_param(scalar):
    _, out, result = scalar
    assert result.exit_code == 0, result.output
    kernel = (out / "kb1_5_matrix_scalar_multiplication" / "kb1_5_matrix_scalar_multiplication_triton.py").read_text()
    assert "def kb1_5_matrix_scalar_multiplication(A, s=3.14):" in kernel
    r = CliRunner().invoke(app, ["export", str(out / "kb1_5_matrix_scalar_multiplication"), "--kernelbench"])
    assert r.exit_code == 0, r.output
    module = _load(out / "kb1_5_matrix_scalar_multiplication" / "kb1_5_matrix_scalar_multiplication_kernelbench.py")
    a = torch.rand(33, 17)
    torch.testing.assert_close(module.ModelNew()(a, -1.5), a * -1.5)  # ModelNew passes forward's s to the kernel


def _load(path):
    spec = importlib.util.spec_from_file_location(f"kb_export_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_kernelbench_model_new_matches_model(linear):
    _, out, result = linear
    assert result.exit_code == 0, result.output
    folder = out / "kb2_12_gemm_multiply_leakyrelu"
    r = CliRunner().invoke(app, ["export", str(folder), "--kernelbench"])
    assert r.exit_code == 0, r.output
    path = folder / "kb2_12_gemm_multiply_leakyrelu_kernelbench.py"
    text = path.read_text()
    assert "class ModelNew(Model):" in text and 'if __name__ == "__main__"' not in text
    module = _load(path)
    init = module.get_init_inputs()
    torch.manual_seed(0)
    model = module.Model(*init)
    new = module.ModelNew(*init)
    assert [k for k, _ in new.named_parameters()] == [k for k, _ in model.named_parameters()]
    new.load_state_dict(model.state_dict())
    for seed in (1, 2):
        torch.manual_seed(seed)
        inputs = module.get_inputs()
        with torch.no_grad():
            torch.testing.assert_close(new(*inputs), model(*inputs), atol=1e-4, rtol=1e-4)


def test_export_kernelbench_refuses_a_spec_not_derived_from_a_problem(repo):
    from kernelgen.errors import UsageError
    from kernelgen.export import kernelbench_parts

    with pytest.raises(UsageError, match="not derived from a KernelBench-format problem"):
        kernelbench_parts(load_spec(repo / "operator_specs" / "broadcast.yaml"))


# --- with an LLM: the prompt shows the problem and names the lifted inputs -------------------------------
RELU_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def kb1_19_relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
'''


def test_openai_backend_prompt_shows_the_problem(llm_env, relu, tmp_path, monkeypatch):
    from tests.support.fake_llm_server import FakeLLMServer, fenced, ok

    path, _, _ = relu
    with FakeLLMServer([ok(fenced(RELU_KERNEL))]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
        result = CliRunner().invoke(app, ["new", str(path), "--backend", "openai", "--model", "fake-model",
                                          "--out", str(tmp_path / "out"), "--no-bench"])
    assert result.exit_code == 0, result.output
    user = " ".join(server.messages(0)[1]["content"].split())
    for needle in ("The problem (KernelBench format)", "class Model(nn.Module):", "batch_size = 64", "def get_inputs():",
                   "Its forward takes `x`; the module holds no parameters or buffers", "_MODEL = Model(*_INIT)"):
        assert needle in user, needle


def test_prompt_names_the_lifted_parameters(linear):
    from kernelgen.llm.prompts import generation_messages

    path, _, _ = linear
    user = " ".join(generation_messages(derive_spec(path).spec)[1]["content"].split())
    for needle in ("`gemm_weight`: dtype the case dtype; rank 2; values drawn as `uniform(", "Model's parameter `gemm.weight`",
                   "Model's parameter `gemm.bias`", "Its forward takes `x`; the entry function's inputs after those",
                   "self.gemm = nn.Linear(in_features, out_features)", "a **matmul** operator, from the operators the reference calls"):
        assert needle in user, needle
