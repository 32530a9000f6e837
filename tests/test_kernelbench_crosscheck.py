"""`benchmarks/kernelbench.py --cross-check KB_CHECKOUT OUT_DIR` on the CPU, against a tiny fake of
KernelBench's package: its `__init__` imports `utils`, which imports python-dotenv, tqdm, litellm and
openai and calls `load_dotenv()`, as KernelBench's does; its `eval_kernel_against_ref` loads ModelNew
from the custom source through a temporary file (as KernelBench does for Triton) and compares it with
Model on random inputs in the Triton interpreter. The real one runs on a GPU (docs/kernelbench.md)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from tests.support.kernelbench_problems import RELU

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "kernelbench.py"

FAKE_UTILS = '''
from dotenv import load_dotenv
load_dotenv()
from tqdm import tqdm
from openai import OpenAI
from litellm import completion
'''
FAKE_EVAL = '''
import importlib.util, tempfile
import torch
from pydantic import BaseModel
from . import utils

class KernelExecResult(BaseModel):
    compiled: bool = False
    correctness: bool = False
    metadata: dict = {}
    runtime: float = -1.0
    ref_runtime: float = -1.0

def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42, num_correct_trials=1, num_perf_trials=10,
                            measure_performance=False, backend="cuda", precision=torch.float32, device=None, **kwargs):
    context = {}
    exec(original_model_src, context)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(custom_model_src)
    spec = importlib.util.spec_from_file_location("temp_module", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed_num)
    model = context["Model"](*context["get_init_inputs"]())
    torch.manual_seed(seed_num)
    new = module.ModelNew(*context["get_init_inputs"]())
    passed = 0
    for trial in range(num_correct_trials):
        inputs = [x.to(precision) for x in context["get_inputs"]()]
        passed += bool(torch.allclose(model(*inputs), new(*inputs), atol=1e-4, rtol=1e-4))
    return KernelExecResult(compiled=True, correctness=passed == num_correct_trials, runtime=10.0, ref_runtime=15.0,
                            metadata={"hardware": "fake", "correctness_trials": f"({passed} / {num_correct_trials})",
                                      "backend": backend})
'''


def fake_checkout(root: Path) -> Path:
    pkg = root / "KernelBench" / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import utils  # as KernelBench's: the LLM helpers come with the package\n")
    (pkg / "utils.py").write_text(FAKE_UTILS)
    (pkg / "eval.py").write_text(FAKE_EVAL)
    return root / "KernelBench"


def _script():  # noqa: ANN202 - the benchmark script as a module
    spec = importlib.util.spec_from_file_location("kb_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_llm_helpers_are_stubbed_and_kernelbench_eval_imports(tmp_path, monkeypatch):
    kb = _script()
    for name in ("dotenv", "tqdm", "litellm", "openai"):
        monkeypatch.setitem(sys.modules, name, None)  # not installed, as far as an import can tell
    for name in [m for m in sys.modules if m == "kernelbench" or m.startswith("kernelbench.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    module, stubbed = kb.load_kernelbench_eval(fake_checkout(tmp_path))
    assert callable(module.eval_kernel_against_ref) and sorted(stubbed) == ["dotenv", "litellm", "openai", "tqdm"]
    assert sys.modules["dotenv"].load_dotenv() is False and sys.modules["tqdm"].tqdm([1, 2]) == [1, 2]
    with pytest.raises(RuntimeError, match="litellm.completion is not installed here"):
        sys.modules["litellm"].completion(model="x")
    with pytest.raises(SystemExit, match="not a KernelBench checkout"):
        kb.load_kernelbench_eval(tmp_path / "nowhere")


def test_agreement_is_correctness_and_speedups_within_ten_percent():
    agreement = _script().agreement
    assert agreement({"kg_correct": True, "kb_correct": True, "kg_speedup": 1.55, "kb_speedup": 1.45}) == "yes"
    assert agreement({"kg_correct": True, "kb_correct": True, "kg_speedup": 1.55, "kb_speedup": 1.2}) == \
        "NO: speedups differ by 23%"
    assert agreement({"kg_correct": True, "kb_correct": False, "kg_speedup": 1.55}) == "NO: correctness differs"
    assert agreement({"kg_correct": False, "note": "KernelGen has no correct kernel to export"}) == "—"


@pytest.mark.slow
def test_cross_check_of_a_built_problem_prints_both_verdicts(tmp_path):
    problem = tmp_path / "relu_problem.py"
    problem.write_text(RELU)
    out = tmp_path / "out"
    built = CliRunner().invoke(app, ["new", str(problem), "--backend", "offline", "--device", "cpu", "--out", str(out)])
    assert built.exit_code == 0, built.output
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, str(SCRIPT), "--cross-check", str(fake_checkout(tmp_path)), str(out)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(ln for ln in run.stdout.splitlines() if ln.startswith("| kb_relu_problem |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "yes" and cells[3] == "yes" and cells[4] == "x1.5", row  # KernelBench's verdict: 15 us / 10 us
    assert "correctness_trials: (5 / 5)" in cells[6] and "backend: triton" in cells[6]
    assert (out / "kb_relu_problem" / "kb_relu_problem_kernelbench.py").is_file()  # exported as `kernelgen export --kernelbench`
    assert "compared problems agree" in run.stdout


def test_match_narrows_the_batch_s_problems_and_combines_with_only(tmp_path):
    """`--match conv` chooses the problems of a batch run, not only of --validate-only: a 4x H100 run with it
    went through level 2's GEMM problems too (2026-11-27)."""
    found = importlib.util.spec_from_file_location("kb_tables_under_test", REPO / "benchmarks" / "kb_tables.py")
    tables = importlib.util.module_from_spec(found)
    found.loader.exec_module(tables)  # a file of benchmarks/, which is no package
    subset = tables.subset
    level = tmp_path / "level2"
    level.mkdir()
    for name in ("1_Conv2d_ReLU_BiasAdd", "2_ConvTranspose2d_BiasAdd", "12_Gemm_Multiply_LeakyReLU"):
        (level / f"{name}.py").write_text("")
    assert [p.stem for p in subset([level], "", "conv")] == ["1_Conv2d_ReLU_BiasAdd", "2_ConvTranspose2d_BiasAdd"]
    assert [p.stem for p in subset([level], "2,12", "conv")] == ["2_ConvTranspose2d_BiasAdd"]
    with pytest.raises(SystemExit, match="--only 12 and --match conv"):
        subset([level], "12", "conv")


def test_a_stopped_script_returns_only_after_the_command_it_runs(tmp_path):
    """Under `timeout -s TERM`, benchmarks/kernelbench.py used to die at once while its `kernelgen batch`
    was still stopping its workers: processes were seen starting after "the batch returned". The
    scripts' runner passes SIGTERM on and waits for its child first."""
    import signal
    import time

    done = tmp_path / "child-done"
    child = (f"import signal, sys, time, pathlib\n"
             f"def stop(s, f):\n    time.sleep(1.5)\n    pathlib.Path({str(done)!r}).write_text('x')\n    sys.exit(3)\n"
             f"signal.signal(signal.SIGTERM, stop)\nprint('up', flush=True)\ntime.sleep(60)\n")
    script = (f"import sys\nsys.path.insert(0, {str(REPO / 'benchmarks')!r})\nfrom common import run_python\n"
              f"run_python(['-c', {child!r}], echo=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    assert proc.wait(timeout=30) == -signal.SIGTERM  # it still ends as told to, by the same signal
    assert done.is_file() and time.monotonic() - t0 >= 1.4  # after its child's own stop, not before


def test_ctrl_c_reaches_the_command_once_and_the_script_ends_after_it_without_a_traceback(tmp_path):
    """Ctrl-C (or `timeout -s INT`) signals the script's whole process group. On an H100 (2026-12-07)
    benchmarks/kernelbench.py then died of a KeyboardInterrupt traceback while its batch was still
    saying what it had saved. Its child now runs in a session of its own and gets the signal once,
    from the script, which waits for it and then ends by the same signal."""
    import signal
    import time

    done = tmp_path / "child-done"
    child = (f"import signal, sys, time, pathlib\nseen = []\n"
             f"def stop(s, f):\n    seen.append(s)\n    if len(seen) > 1: return\n    time.sleep(1.5)\n"
             f"    pathlib.Path({str(done)!r}).write_text(str(len(seen)))\n    sys.exit(3)\n"
             f"signal.signal(signal.SIGINT, stop)\nprint('up', flush=True)\ntime.sleep(60)\n")
    script = (f"import sys\nsys.path.insert(0, {str(REPO / 'benchmarks')!r})\nfrom common import run_python\n"
              f"run_python(['-c', {child!r}], echo=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "up"
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
    t0 = time.monotonic()
    assert proc.wait(timeout=30) == -signal.SIGINT
    assert time.monotonic() - t0 >= 1.4 and done.read_text() == "1"  # after the child's stop, told once
    assert "Traceback" not in proc.stderr.read()
