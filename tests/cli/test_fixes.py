"""The small things a new user tripped on: usage lines, `validate` naming the backend that can build
a spec, a reference's own bug reported with its line, a folder given as a spec, and perf cells that
keep their significant digits."""

import textwrap

from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.verify.results import KernelTiming, PerfCase

CUMMAX = """\
name: running_max
description: running maximum, which no offline family serves
inputs:
  - {name: x}
outputs:
  - {name: out}
reference: |
  def running_max(x):
      return torch.cummax(x, dim=-1).values
dtypes: [float32]
test_cases:
  - {x: [4, 33]}
"""


def _spec(tmp_path, text, name="spec.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_usage_lines_name_arguments_plainly():
    runner = CliRunner()
    for args, usage in ((["new", "--help"], "kernelgen new [OPTIONS] SPEC"),
                        (["optimize", "--help"], "kernelgen optimize [OPTIONS] [OP_DIR]..."),
                        (["test", "--help"], "kernelgen test [OPTIONS] OP_DIR")):
        r = runner.invoke(app, args, prog_name="kernelgen")
        assert r.exit_code == 0
        assert usage in r.output, r.output
        assert "{" not in r.output.splitlines()[0] and "list[Path]" not in r.output


def test_validate_says_the_offline_generator_cannot_build_cummax(tmp_path):
    r = CliRunner().invoke(app, ["validate", str(_spec(tmp_path, CUMMAX))])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "ok" in text and "offline: no (" in text and "cummax" in text and "needs an LLM backend" in text


def test_validate_says_the_offline_generator_builds_broadcast(repo):
    r = CliRunner().invoke(app, ["validate", str(repo / "operator_specs" / "broadcast.yaml")])
    assert r.exit_code == 0 and "offline: yes (pointwise" in r.output, r.output


def test_a_bug_in_the_reference_is_reported_with_its_line(tmp_path):
    bad = CUMMAX.replace("      return torch.cummax(x, dim=-1).values", "      y = x * 2\n      return x + z")
    r = CliRunner().invoke(app, ["validate", str(_spec(tmp_path, bad))])
    assert r.exit_code == 2 and "Traceback" not in r.output
    text = " ".join(r.output.split())
    assert "reference: raises NameError: name 'z' is not defined (line 3 of the reference: `return x + z`)" in text
    assert "on these shapes" not in text  # the shapes are not what is wrong


def test_shapes_that_do_not_fit_still_name_the_case_and_the_line(tmp_path):
    bad = CUMMAX.replace("return torch.cummax(x, dim=-1).values", "return x @ x")
    r = CliRunner().invoke(app, ["validate", str(_spec(tmp_path, bad))])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "test_cases[0]: the reference fails on these shapes: RuntimeError" in text
    assert "(line 2 of the reference: `return x @ x`)" in text


def test_a_folder_given_as_the_spec_points_at_its_spec_yaml(tmp_path):
    _spec(tmp_path, CUMMAX)
    r = CliRunner().invoke(app, ["new", str(tmp_path), "--out", str(tmp_path / "out")])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "is a folder, not a spec file" in text and f"{tmp_path / 'spec.yaml'}" in text
    assert not (tmp_path / "out").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(app, ["validate", str(empty)])
    assert r.exit_code == 2 and "is a folder" in r.output and "no such file" not in r.output


def test_perf_cells_keep_significant_digits():
    def t(ms):
        return KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=0.0)

    c = PerfCase(case=0, shapes={"x": [4]}, dtype="float32", bytes=1, kernel=t(20.7012), eager=t(0.0025),
                 speedup_eager=0.000377, gbps=3456.7, tflops=0.0123, frac_peak=0.815)
    kernel_ms, eager_ms, compile_ms, x_eager, x_compile, gbps, tflops, pct = c.cells()
    assert (kernel_ms, eager_ms, compile_ms) == ("20.70", "0.002500", "—")
    assert x_eager == "0.000377" and x_compile == "—"
    assert (gbps, tflops, pct) == ("3457", "0.0123", "82%")
