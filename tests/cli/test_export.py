"""`kernelgen export`: the best kernel as a torch.library custom op, usable under
torch.compile(fullgraph=True) and in a model; only verified code is exported; mistakes exit 2."""

import os
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.export import module_source
from kernelgen.fsutil import now
from kernelgen.new import write_trusted_files
from kernelgen.offline import generate_kernel
from kernelgen.opdir import OperatorDir
from kernelgen.verify.judge.trusted import render_baseline
from kernelgen.record.state import OpState, RoundRecord, load_state, save_state
from kernelgen.spec import load_spec, validate_spec_data


def _finished_op(root, repo) -> OperatorDir:
    """An operator folder as `kernelgen new` leaves it, round 0 correct (the offline kernel, whose
    checks the `new` tests run; not re-run here)."""
    spec_path = repo / "operator_specs" / "broadcast.yaml"
    spec = load_spec(spec_path)
    op = OperatorDir(root / "broadcast", spec)
    write_trusted_files(op.path, spec, spec_path.read_text(), render_baseline(spec))
    source = generate_kernel(spec).source
    op.file("triton").write_text(source)
    op.round_dir(0).mkdir(parents=True)
    (op.round_dir(0) / op.file("triton").name).write_text(source)
    state = OpState(name="broadcast", created_at=now(), backend="offline", device="cpu", best_round=0)
    state.rounds.append(RoundRecord(round=0, started_at=now(), finished_at=now(), backend="offline", kept=True,
                                    kernel_file="rounds/round_0/broadcast_triton.py"))
    save_state(op.path, state)
    return op


@pytest.fixture
def op(tmp_path, repo):
    return _finished_op(tmp_path, repo)


# Run in a fresh process: the op registers itself in torch's global registry, and the interpreter
# must be switched on before the kernel module is imported. Dynamo's aot_eager backend checks what
# fullgraph=True is about — one graph, the custom op traced through its fake implementation —
# without inductor's C++ compile of the surrounding ops (about a minute on a CI core); the slow test
# below runs inductor too.
NO_KERNELGEN = """
class _NoKernelGen:  # as on a machine with torch and triton alone: any import of kernelgen fails
    def find_spec(self, name, path=None, target=None):
        if name == "kernelgen" or name.startswith("kernelgen."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: the export must run without KernelGen)")
sys.meta_path.insert(0, _NoKernelGen())
"""
CHECK = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
""" + NO_KERNELGEN + """
import importlib.util, torch
spec = importlib.util.spec_from_file_location("broadcast_op", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
backend = sys.argv[2]

def f(x, b):
    return torch.ops.kernelgen.broadcast(x, b) * 2 + 1

cf = torch.compile(f, fullgraph=True, backend=backend)
for shape in ((4, 8, 33), (3, 5, 33)):          # a second shape: traced again, with dynamic sizes
    x, b = torch.randn(*shape), torch.randn(33)
    torch.testing.assert_close(cf(x, b), (x + b) * 2 + 1)
# schema, fake implementation, aliasing and mutation declarations, all checked by PyTorch itself
torch.library.opcheck(torch.ops.kernelgen.broadcast.default, (torch.randn(4, 33), torch.randn(33)))

class BiasAdd(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.randn(n))
    def forward(self, x):
        return torch.relu(mod.broadcast(x, self.bias))

model = BiasAdd(33)
with torch.inference_mode():
    x = torch.randn(2, 33)
    torch.testing.assert_close(torch.compile(model, fullgraph=True, backend=backend)(x), torch.relu(x + model.bias))
assert not [m for m in sys.modules if m.startswith("kernelgen")]
print("EXPORT-OK", backend)
"""


def _check(module, tmp_path, backend):
    script = tmp_path / "check_export.py"
    script.write_text(CHECK)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the module needs torch and triton, not kernelgen
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    proc = subprocess.run([sys.executable, str(script), str(module), backend], capture_output=True, text=True,
                          timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and f"EXPORT-OK {backend}" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_exported_op_compiles_fullgraph_and_gives_the_reference_result(op, tmp_path):
    r = CliRunner().invoke(app, ["export", str(op.path)])
    assert r.exit_code == 0, r.output
    module = op.path / "broadcast_op.py"
    text = module.read_text()
    assert '@torch.library.custom_op("kernelgen::broadcast", mutates_args=())' in text and "register_fake" in text
    _check(module, tmp_path, "aot_eager")


@pytest.mark.slow
def test_exported_op_under_inductor(op, tmp_path):
    r = CliRunner().invoke(app, ["export", str(op.path), "--out", str(tmp_path)])  # outside the folder: imports by absolute path
    assert r.exit_code == 0, r.output
    _check(tmp_path / "broadcast_op.py", tmp_path, "inductor")


STANDALONE = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
""" + NO_KERNELGEN + """
import torch
space = {"__name__": "standalone"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), space)
exec(compile(open(sys.argv[2]).read(), sys.argv[2], "exec"), ref := {})
torch.manual_seed(0)
inputs = [torch.randn(s) for s in eval(sys.argv[3])]
torch.testing.assert_close(space[sys.argv[4]](*inputs), ref[sys.argv[4]](*inputs), atol=1e-4, rtol=1e-4)
assert not [m for m in sys.modules if m.startswith("kernelgen")]
print("STANDALONE-OK")
"""


@pytest.mark.parametrize("family", ["broadcast", "softmax", "linear_bias_gelu", "sum_dim0", "conv2d_bias_relu"])
def test_a_kernel_with_its_runtime_inlined_runs_without_kernelgen(family, repo, tmp_path):
    """What the KernelBench export writes for its kernel (the file, its self-check left out, its runtime
    import replaced by the runtime's own pieces): run where kernelgen cannot be imported, against the reference."""
    from kernelgen.export import _without_main
    from kernelgen.runtime.inline import inline_imports
    from tests.support.conv_specs import ALL as CONV
    from tests.support.nd_specs import ALL as ND

    spec = {**ND, **CONV}.get(family) or load_spec(repo / "operator_specs" / f"{family}.yaml")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(inline_imports(_without_main(generate_kernel(spec).source)))
    assert "kernelgen" not in kernel.read_text().split("# --- kernelgen.runtime.v1")[0]
    reference = tmp_path / "reference.py"
    reference.write_text("import math\nimport torch\nimport torch.nn.functional as F\n" + spec.reference)
    shapes = [list(spec.test_cases[0][i.name]) for i in spec.inputs]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", STANDALONE, str(kernel), str(reference), repr(shapes), spec.name],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "STANDALONE-OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_export_again_keeps_an_edited_module(op):
    runner = CliRunner()
    assert runner.invoke(app, ["export", str(op.path)]).exit_code == 0
    again = runner.invoke(app, ["export", str(op.path)])
    assert again.exit_code == 0 and "unchanged" in again.output
    module = op.path / "broadcast_op.py"
    module.write_text(module.read_text() + "\n# mine\n")
    r = runner.invoke(app, ["export", str(op.path)])
    assert r.exit_code == 0 and "kept as" in r.output
    kept = [p for p in op.path.iterdir() if p.name.startswith("broadcast_op.py.previous-")]
    assert len(kept) == 1 and kept[0].read_text().endswith("# mine\n")


def test_only_the_verified_kernel_is_exported(op):
    kernel = op.file("triton")
    kernel.write_text(kernel.read_text() + "\n# hand tuned\n")
    r = CliRunner().invoke(app, ["export", str(op.path)])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "not round 0's verified kernel" in text and "Traceback" not in text
    assert not (op.path / "broadcast_op.py").exists()


def test_no_correct_kernel_no_export(op, tmp_path):
    state = load_state(op.path)
    state.best_round = None
    save_state(op.path, state)
    r = CliRunner().invoke(app, ["export", str(op.path)])
    assert r.exit_code == 2 and "no correct kernel to export" in r.output
    r = CliRunner().invoke(app, ["export", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and "no such directory" in r.output
    r = CliRunner().invoke(app, ["export", str(op.path), "--out", str(tmp_path / "op.txt")])
    assert r.exit_code == 2


def test_params_and_several_outputs_make_a_valid_schema(tmp_path):
    import yaml

    spec = validate_spec_data(yaml.safe_load(textwrap.dedent("""\
        name: split_scale
        inputs: [{name: x}]
        params: [{name: alpha, type: float, default: 2.0}, {name: flip, type: bool, default: false}]
        outputs: [{name: a}, {name: b}]
        reference: |
          def split_scale(x, alpha=2.0, flip=False):
              return x * alpha, (-x if flip else x).sum(-1)
        dtypes: [float32]
        test_cases: [{x: [4, 8]}]
    """)))
    source = module_source(spec, round_k=3, op_dir_expr="Path(__file__).resolve().parent")
    assert "def split_scale(x: torch.Tensor, alpha: float = 2.0, flip: bool = False) -> tuple[torch.Tensor, torch.Tensor]:" in source
    # the op registered for real, with a stand-in kernel (plain torch): PyTorch accepts the schema
    (tmp_path / "split_scale_op.py").write_text(source)
    (tmp_path / "split_scale_baseline.py").write_text(render_baseline(spec))
    (tmp_path / "split_scale_triton.py").write_text("def split_scale(x, alpha=2.0, flip=False):\n"
                                                   "    return x * alpha, (-x if flip else x).sum(-1)\n")
    code = ("import importlib.util, torch, sys\n"
            "s = importlib.util.spec_from_file_location('m', sys.argv[1]); m = importlib.util.module_from_spec(s); "
            "s.loader.exec_module(m)\n"
            "print(torch.ops.kernelgen.split_scale.default._schema)\n"
            "x = torch.randn(3, 4)\n"
            "torch.library.opcheck(torch.ops.kernelgen.split_scale.default, (x,), {'alpha': 3.0, 'flip': True})\n"
            "a, b = torch.compile(lambda t: m.split_scale(t, alpha=3.0), fullgraph=True, backend='aot_eager')(x)\n"
            "torch.testing.assert_close(a, x * 3.0); print('SCHEMA-OK')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "split_scale_op.py")], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "SCHEMA-OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "float alpha=2., bool flip=False) -> (Tensor, Tensor)" in proc.stdout
