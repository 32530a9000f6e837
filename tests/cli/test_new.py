"""`kernelgen new` end to end on the CPU interpreter, and the no-overwrite rule."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app

FILES = ["broadcast_triton.py", "broadcast_baseline.py", "broadcast_accuracy.py", "broadcast_performance.py",
         "optimization_log.md", "spec.yaml", "state.json"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, repo):
    out = tmp_path_factory.mktemp("gen")
    result = CliRunner().invoke(app, ["new", str(repo / "operator_specs" / "broadcast.yaml"), "--out", str(out), "--backend", "offline"])
    return out, result


def test_new_broadcast_writes_four_files_and_passes(generated):
    out, result = generated
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    assert "NOT a measurement" in " ".join(result.output.split())  # the CPU perf step says so loudly
    op = out / "broadcast"
    for f in FILES:
        assert (op / f).is_file(), f
    assert (op / "rounds" / "round_0" / "broadcast_triton.py").is_file()
    state = json.loads((op / "state.json").read_text())
    assert state["best_round"] == 0
    assert state["rounds"][0]["accuracy"]["accuracy"]["correct"] is True
    log = (op / "optimization_log.md").read_text()
    assert "## Round 0" in log and "PASS" in log and "not a measurement" in log.lower()


def test_generated_files_share_the_signature(generated):
    out, _ = generated
    op = out / "broadcast"
    for kind in ("triton", "baseline"):
        assert "def broadcast(x, bias)" in (op / f"broadcast_{kind}.py").read_text()


def test_generated_scripts_run_standalone_with_json(generated, tmp_path):
    out, _ = generated
    op = out / "broadcast"
    res = tmp_path / "acc.json"
    proc = subprocess.run([sys.executable, str(op / "broadcast_accuracy.py"), "--device", "cpu", "--json", str(res)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS broadcast" in proc.stdout
    record = json.loads(res.read_text())
    assert record["status"] == "ok" and record["accuracy"]["correct"] is True
    assert record["accuracy"]["kernel_sha256"] and record["accuracy"]["checks_expected"] == len(record["accuracy"]["checks"])
    assert [r.split()[0] for r in record["accuracy"]["runtime"]] == ["kernelgen.runtime.script_v1", "kernelgen.runtime.v1"]


def test_pytest_collects_and_runs_the_operator_folder(generated):
    out, _ = generated
    op = out / "broadcast"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(op)],
                          capture_output=True, text=True, timeout=900, cwd=op)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    # every test case x float32/float16, the generated cases, and the performance dry run; bf16 is skipped
    # on the interpreter, with the reason
    assert passed >= 4 and "failed" not in summary and "skipped" in summary, proc.stdout
    assert "bfloat16 not checked here" in proc.stdout


def test_existing_output_is_not_overwritten(generated, repo):
    out, _ = generated
    op = out / "broadcast"
    marker = op / "broadcast_triton.py"
    marker.write_text(marker.read_text() + "\n# my edit\n")
    result = CliRunner().invoke(app, ["new", str(repo / "operator_specs" / "broadcast.yaml"), "--out", str(out), "--backend", "offline"])
    assert result.exit_code == 2
    assert "--force" in result.output
    assert marker.read_text().endswith("# my edit\n")


def test_force_moves_the_old_folder_aside(generated, repo):
    out, _ = generated
    (out / "broadcast" / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["new", str(repo / "operator_specs" / "broadcast.yaml"), "--out", str(out),
                                      "--backend", "offline", "--force", "--no-bench"])
    assert result.exit_code == 0, result.output
    kept = [p for p in out.iterdir() if p.name.startswith("broadcast.previous-")]
    assert len(kept) == 1 and (kept[0] / "notes.txt").read_text() == "mine"
    assert (out / "broadcast" / "broadcast_triton.py").is_file()


def test_test_and_bench_and_log_commands(generated):
    out, _ = generated
    op = str(out / "broadcast")
    runner = CliRunner()
    t = runner.invoke(app, ["test", op, "--seeds", "1"])
    assert t.exit_code == 0 and "PASS" in t.output, t.output
    b = runner.invoke(app, ["bench", op])
    assert b.exit_code == 0 and "NOT a measurement" in " ".join(b.output.split()), b.output
    lg = runner.invoke(app, ["log", op])
    assert lg.exit_code == 0 and "Round 0" in lg.output


def test_not_an_operator_dir(tmp_path):
    r = CliRunner().invoke(app, ["test", str(tmp_path)])
    assert r.exit_code == 2 and "not an operator directory" in r.output and "Traceback" not in r.output


def test_tampered_accuracy_script_is_refused(generated):
    out, _ = generated
    op = out / "broadcast"
    script = op / "broadcast_accuracy.py"
    original = script.read_text()
    tampered = original.replace('"float32": (', '"float32": (1e9 + ')
    assert tampered != original
    script.write_text(tampered)
    try:
        r = CliRunner().invoke(app, ["test", str(op)])
        text = " ".join(r.output.split())
        assert r.exit_code == 2 and "differs from what KernelGen rendered" in text and "kernelgen refresh" in text, text
    finally:
        script.write_text(original)


def test_operator_outside_offline_families_is_refused_before_writing(tmp_path):
    spec = tmp_path / "running_max.yaml"
    spec.write_text(
        "name: running_max\ndescription: running maximum, which no offline family serves\ninputs:\n  - {name: x}\noutputs:\n  - {name: out}\n"
        "reference: |\n  def running_max(x):\n      return torch.cummax(x, dim=-1).values\n"
        "dtypes: [float32]\ntest_cases:\n  - {x: [4, 33]}\n"
    )
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["new", str(spec), "--out", str(out), "--backend", "offline"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "needs an LLM" in text and "OPENAI_API_KEY" in text and "Traceback" not in text
    assert not out.exists()


def test_moved_aside_copies_are_not_operators_to_report_or_optimize(generated):
    from kernelgen.optimize.loop import select_operators
    from kernelgen.record.report import operator_dirs

    out, _ = generated
    (out / "broadcast.previous-20260101-000000").mkdir(exist_ok=True)
    (out / "broadcast.previous-20260101-000000" / "spec.yaml").write_text((out / "broadcast" / "spec.yaml").read_text())
    assert [d.name for d in operator_dirs(out)] == ["broadcast"]
    # broadcast's round 0 was timed only under the interpreter: no target is reached, so it is selected
    assert [op.path.name for op in select_operators([], cwd=out / "nowhere", root=out)] == ["broadcast"]
