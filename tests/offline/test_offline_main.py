"""A generated kernel file runs alone: `python <name>_triton.py` checks itself against the spec's
reference, on the CPU through Triton's interpreter when no GPU driver is active, and exits 0 or 1.
The static checker skips that `__main__` block (KernelGen never runs it) and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.offline import generate_kernel
from kernelgen.verify.judge.staticcheck import check_source
from tests.support.offline_check import example


def _run_alone(path: Path) -> subprocess.CompletedProcess:
    # As a user would run it on this machine: no TRITON_INTERPRET, no KernelGen settings.
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "KERNELGEN_DEVICE")}
    return subprocess.run([sys.executable, path.name], cwd=path.parent, env=env, capture_output=True,
                          text=True, timeout=300)


def test_generated_file_checks_itself_without_triton_interpret(tmp_path: Path) -> None:
    path = tmp_path / "broadcast_triton.py"
    path.write_text(generate_kernel(example("broadcast")).source)
    run = _run_alone(path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("broadcast: ok on ") and "x [4, 32, 64], bias [64]" in run.stdout


def test_a_wrong_kernel_fails_its_self_check(tmp_path: Path) -> None:
    source = generate_kernel(example("broadcast")).source
    assert "v2 = (x + bias)" in source
    path = tmp_path / "broadcast_triton.py"
    path.write_text(source.replace("v2 = (x + bias)", "v2 = (x - bias)"))
    run = _run_alone(path)
    assert run.returncode == 1 and "broadcast: MISMATCH on " in run.stdout, run.stdout + run.stderr


def test_matmul_file_checks_itself(tmp_path: Path) -> None:
    path = tmp_path / "linear_bias_gelu_triton.py"
    path.write_text(generate_kernel(example("linear_bias_gelu")).source)
    run = _run_alone(path)
    assert run.returncode == 0 and "linear_bias_gelu: ok" in run.stdout, run.stdout + run.stderr


def test_the_self_check_imports_for_its_reference_only_what_the_reference_names() -> None:
    # A reference may use math and F (kernelgen.spec.reference gives it both); the file's __main__ block
    # imports them only where the reference names them, so a reader sees no unused imports.
    plain, with_f = generate_kernel(example("broadcast")).source, generate_kernel(example("gelu")).source
    assert "import torch.nn.functional as F" not in plain and "import math" not in plain
    assert "    import torch.nn.functional as F" in with_f and "return F.gelu(x)" in with_f
    spec = example("gelu").model_copy(update={"reference": "def gelu(x):\n    return x * (1 + math.erf(1.0)) / 2 - x * math.erf(1.0) / 2\n"})
    assert "    import math" in generate_kernel(spec).source


# --- the static checker and the __main__ block ------------------------------------------------
KERNEL = '''import torch
import triton
import triton.language as tl
{top}

@triton.jit
def _k(x_ptr):
    pass


def op(x):
    _k[(1,)](x)
    return x
{main}'''
MAIN = '''

if __name__ == "__main__":
    import os
    import sys

    print(os.environ.get("HOME"), torch.ones(1).item())
    sys.exit(0)
'''


def _codes(top: str = "", main: str = MAIN) -> list[str]:
    return [v.code for v in check_source(KERNEL.format(top=top, main=main), "op")]


def test_generated_files_pass_the_static_checker() -> None:
    for name in ("broadcast", "softmax", "linear_bias_gelu"):
        assert check_source(generate_kernel(example(name)).source, name) == []


def test_the_main_block_body_is_not_checked() -> None:
    assert _codes() == []


@pytest.mark.parametrize(
    "top,main,code",
    [
        ("import os", MAIN, "forbidden-import"),  # outside the block: still refused
        ("import sys as system", MAIN, "forbidden-import"),
        ('__name__ = "__main__"', MAIN, "introspection"),  # would enter the block on import
        ("from math import pi as __name__", MAIN, "introspection"),
        ("", MAIN.replace('__name__ == "__main__"', '"__main__" == __name__'), "forbidden-import"),  # not the exact guard
        ("", "\n\ndef later():" + MAIN.replace("\n", "\n    "), "forbidden-import"),  # not at the top level
        ("", MAIN + "else:\n    import subprocess\n", "forbidden-import"),  # the else branch is checked
    ],
    ids=["import-outside", "alias-outside", "rebind-name", "import-as-name", "reversed-guard", "nested-guard", "else-branch"],
)
def test_everything_else_is_still_checked(top: str, main: str, code: str) -> None:
    assert code in _codes(top, main)
