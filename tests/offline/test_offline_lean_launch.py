"""The lean launch of the generated wrappers (templates/offline/_runtime.py.j2: _lean, _keep),
in every family's file, and the guard that must still see it (kernelgen.verify.worker.guard.hook_launcher). No GPU here, so Triton's
driver is a fake: a launcher class that records its calls, and a JIT function whose launch returns a
compiled kernel holding that launcher, as Triton 3.x's JITFunction.run does."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime import driver  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from kernelgen.offline import generate_kernel  # noqa: E402
from kernelgen.verify.worker import guard  # noqa: E402
from kernelgen.verify.poison import draw_fills  # noqa: E402
from tests.support.conv_specs import ALL as CONV  # noqa: E402
from tests.support.nd_specs import ALL as ND  # noqa: E402
from tests.support.offline_check import example, import_source  # noqa: E402


class FakeLauncher:
    calls: list[tuple] = []

    def __call__(self, gx, gy, gz, stream, function, packed, metadata, enter, exit_, *args):  # noqa: ANN001
        FakeLauncher.calls.append(((gx, gy, gz), stream, function, args))


def _kernel(x_ptr, out_ptr, n_rows, n_inner, n_cols, sx0, sx1, sx2, BLOCK_R: tl.constexpr,  # noqa: ARG001, ANN001
            BLOCK_C: tl.constexpr, SINGLE_PASS: tl.constexpr):  # the generated softmax kernel's signature
    pass


class FakeJIT(JITFunction):
    """A JIT function whose launch records itself and returns a compiled kernel (no compiler here)."""

    def __init__(self, fn, signature_of_launcher):  # noqa: ANN001
        super().__init__(fn)
        self.slow: list[dict] = []
        self.compiled = SimpleNamespace(run=FakeLauncher(), function=4242, packed_metadata=(16, 1, 0),
                                        src=SimpleNamespace(signature=signature_of_launcher))

    def run(self, *args, grid, warmup, **kwargs):  # noqa: ANN001, ANN202, ARG002
        self.slow.append({"grid": grid, **kwargs})
        return self.compiled


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    backend = SimpleNamespace(launcher_cls=FakeLauncher, get_current_device=lambda: 0, get_current_stream=lambda d: 77)
    monkeypatch.setattr(driver, "_active", backend)
    FakeLauncher.calls = []
    module = import_source("softmax", generate_kernel(example("softmax")).source, tmp_path)
    names = JITFunction(_kernel).arg_names
    kernel = FakeJIT(_kernel, {n: "constexpr" if n.isupper() else "i32" for n in names})  # Triton 3.3+: every argument
    monkeypatch.setattr(module, "_softmax_kernel", kernel)
    return module, kernel


def test_after_the_first_call_the_compiled_kernel_goes_straight_to_the_launcher(fake_gpu):
    module, kernel = fake_gpu
    x = torch.randn(8, 1000)
    module.softmax(x)  # compiles (here: records) through kernel[grid](...)
    assert len(kernel.slow) == 1 and FakeLauncher.calls == []
    module.softmax(x)
    module.softmax(x)
    assert len(kernel.slow) == 1 and len(FakeLauncher.calls) == 2
    grid, stream, function, args = FakeLauncher.calls[-1]
    meta = kernel.slow[0]
    assert grid == (meta["grid"][0], 1, 1) and stream == 77 and function == 4242
    (plan,) = module._PLANS.values()
    assert args[0] is x and args[1].shape == x.shape  # the call's tensors, then the plan's sizes and the constexprs
    assert args[2:] == (*plan.sizes, meta["BLOCK_R"], meta["BLOCK_C"], meta["SINGLE_PASS"]) and plan.sizes[2] == 1000


def test_a_misaligned_input_or_new_scalars_take_triton_s_own_launch(fake_gpu):
    module, kernel = fake_gpu
    x = torch.randn(8, 1001)
    module.softmax(x[:, 1:])  # same plan as below; a 4-byte offset: Triton specialised on 16-byte alignment
    module.softmax(x[:, 1:])
    assert len(kernel.slow) == 2 and FakeLauncher.calls == []
    y = torch.randn(8, 1001)[:, :1000]
    module.softmax(y)
    module.softmax(y)
    assert len(kernel.slow) == 3 and len(FakeLauncher.calls) == 1


def test_the_generated_file_passes_the_static_check(tmp_path):
    from kernelgen.verify.judge.staticcheck import check_source

    for name, knobs in (("softmax", {"algorithm": "split"}), ("matmul_leakyrelu", {"autotune": True})):
        assert check_source(generate_kernel(example(name), knobs).source, name) == []


def test_a_launcher_layout_the_file_does_not_know_keeps_the_plain_launch(fake_gpu):
    module, kernel = fake_gpu
    kernel.compiled.src.signature = {"x_ptr": "*fp32", "n_rows": "i32"}  # not the kernel's argument order
    x = torch.randn(4, 64)
    for _ in range(3):
        module.softmax(x)
    assert len(kernel.slow) == 3 and FakeLauncher.calls == []


def test_the_guard_counts_describes_and_ablates_launches_that_skip_jitfunction_run():
    class Launcher:
        ran = 0

        def __call__(self, gx, gy, gz, stream, function, *rest):  # noqa: ANN001
            Launcher.ran += 1

    guard.hook_launcher(Launcher)
    fill, _ = draw_fills()
    with guard.guarded(fill) as report:
        Launcher()(64, 1, 1, 0, 99, (4,), None, None, None, "x")
    assert report.launches == 1 and Launcher.ran == 1 and report.configs == ["an unregistered compiled kernel 99 grid=(64, 1, 1)"]
    assert not [v for v in report.violations if v[0] == "no-triton-launch"]
    with guard.guarded(fill) as report, guard.ablated():
        Launcher()(64, 1, 1, 0, 99, (4,), None, None, None, "x")
    assert report.launches == 1 and Launcher.ran == 1  # counted, and did nothing
    with guard.counting_launches() as counted:
        Launcher()(64, 1, 1, 0, 99)
    assert counted[0] == 1 and Launcher.ran == 2


def test_a_launcher_without_constexpr_slots_gets_the_sizes_only(fake_gpu):
    module, kernel = fake_gpu
    kernel.compiled.src.signature = {n: "i32" for n in kernel.arg_names if not n.isupper()}  # Triton 3.0-3.2
    x = torch.randn(4, 64)
    module.softmax(x)
    module.softmax(x)
    (plan,) = module._PLANS.values()
    assert len(kernel.slow) == 1 and FakeLauncher.calls[-1][3][2:] == plan.sizes


def _fake_stages(module, tmp_path: Path) -> dict[str, FakeJIT]:
    """Every stage kernel of a generated program replaced by a FakeJIT with its own argument names."""
    fakes = {}
    for name in [n for n in dir(module) if n.endswith("_kernel") and not n.endswith("_split_kernel")]:
        names = getattr(module, name).arg_names
        src = import_source(f"fake{len(fakes)}", f"def {name}({', '.join(names)}):  # noqa\n    pass\n", tmp_path)
        fakes[name] = FakeJIT(getattr(src, name), {n: "i32" for n in names})  # Triton 3.3+: every argument
        setattr(module, name, fakes[name])
    return fakes


@pytest.mark.parametrize("spec", [ND["sum_dim0"], ND["linear_leaky_sum"], CONV["conv2d_bias_relu"]], ids=lambda s: s.name)
def test_a_program_s_stages_go_straight_to_the_launcher_after_the_first_call(spec, fake_gpu, tmp_path: Path) -> None:
    module = import_source(spec.name, generate_kernel(spec).source, tmp_path)
    fakes = _fake_stages(module, tmp_path)
    inputs = [torch.randn(s) for s in spec.test_cases[0].values()]
    FakeLauncher.calls = []
    getattr(module, spec.name)(*inputs)  # compiles (here: records) each stage through kernel[grid](...)
    assert all(len(f.slow) == 1 for f in fakes.values()) and FakeLauncher.calls == []
    getattr(module, spec.name)(*inputs)
    assert all(len(f.slow) == 1 for f in fakes.values()) and len(FakeLauncher.calls) == len(fakes)
    (plan,) = module._PLANS.values()
    for stage, (grid, _, _, args) in enumerate(FakeLauncher.calls):  # one launch per stage, in order
        n = next(i for i, a in enumerate(args) if not isinstance(a, torch.Tensor))  # the call's tensors, then the sizes
        assert grid == (*plan.grids[stage], 1, 1)[:3] and args[n:n + len(plan.args[stage])] == tuple(plan.args[stage])
