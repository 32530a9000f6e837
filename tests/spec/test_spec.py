"""Spec validation through the public entry points: `load_spec` and `kernelgen validate` / `new`."""

import textwrap

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.errors import SpecError
from kernelgen.spec import load_spec

GOOD = """\
name: scale_add
description: out = x * 2 + y
category: pointwise
inputs:
  - {name: x}
  - {name: y}
params:
  - {name: alpha, type: float, default: 2.0}
outputs:
  - {name: out}
reference: |
  def scale_add(x, y, alpha=2.0):
      return x * alpha + y
dtypes: [float32, float16]
test_cases:
  - {x: [4, 8], y: [4, 8]}
perf_cases:
  - {x: [4096, 4096], y: [4096, 4096]}
"""


def write(tmp_path, text, name="spec.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_good_spec_loads(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.name == "scale_add"
    assert spec.signature == "x, y, alpha=2.0"
    assert spec.tolerance_for("float16").atol > 0
    assert spec.effective_perf_cases == [{"x": [4096, 4096], "y": [4096, 4096]}]


def test_example_specs_validate(repo):
    specs = sorted((repo / "operator_specs").glob("*.yaml"))
    assert specs, "operator_specs/ is empty"
    for p in specs:
        load_spec(p)


# Each bad spec: (what to change, the field path the message must name, words it must contain).
BAD = [
    ("missing name", lambda s: s.replace("name: scale_add\n", ""), "name", "required field is missing"),
    ("unknown key", lambda s: s + "colour: blue\n", "colour", "unknown key"),
    ("bad name", lambda s: s.replace("name: scale_add", "name: Scale-Add"), "name", "[a-z][a-z0-9_]*"),
    ("signature disagrees", lambda s: s.replace("def scale_add(x, y, alpha=2.0)", "def scale_add(y, x, alpha=2.0)"), "reference", "first positional"),
    ("wrong function name", lambda s: s.replace("def scale_add(", "def other("), "reference", "must define a function called 'scale_add'"),
    ("reference syntax error", lambda s: s.replace("return x * alpha + y", "return x * (alpha + y"), "reference", "does not parse"),
    ("case misses an input", lambda s: s.replace("- {x: [4, 8], y: [4, 8]}", "- {x: [4, 8]}"), "test_cases[0].y", "no shape given"),
    ("case names a non-input", lambda s: s.replace("- {x: [4, 8], y: [4, 8]}", "- {x: [4, 8], y: [4, 8], z: [3]}"), "test_cases[0].z", "not an input"),
    ("unknown dtype", lambda s: s.replace("dtypes: [float32, float16]", "dtypes: [float32, float17]"), "dtypes", "unknown dtype"),
    ("negative tolerance", lambda s: s + "tolerance:\n  float16: {atol: -1.0, rtol: 1.0e-3}\n", "tolerance.float16.atol", "greater than 0"),
    ("param not in reference", lambda s: s.replace("  - {name: alpha, type: float, default: 2.0}", "  - {name: beta, type: float, default: 2.0}"), "reference", "params"),
    ("param default of wrong type", lambda s: s.replace("default: 2.0}", "default: yes}"), "params[0]", "not a float"),
    ("shapes do not broadcast", lambda s: s.replace("- {x: [4, 8], y: [4, 8]}", "- {x: [4, 8], y: [5, 8]}"), "test_cases[0]", "reference fails on these shapes"),
    ("bad init", lambda s: s.replace("  - {name: x}", "  - {name: x, init: 'randint(5)'}"), "inputs[0].init", "takes 2 argument"),
    ("empty dims", lambda s: s.replace("- {x: [4, 8], y: [4, 8]}", "- {x: [4, 0], y: [4, 0]}"), "test_cases[0].x", ">= 1"),
]


@pytest.mark.parametrize("what,edit,location,words", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_names_field_and_problem(tmp_path, what, edit, location, words):
    p = write(tmp_path, edit(GOOD))
    with pytest.raises(SpecError) as info:
        load_spec(p)
    text = str(info.value.message)
    assert str(p) in text
    assert any(pr.location == location for pr in info.value.problems), text
    assert words in text, text


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    p = write(tmp_path, GOOD.replace("category: pointwise", "category: [pointwise"))
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert "line " in info.value.problems[0].location and "column " in info.value.problems[0].location


def test_several_problems_each_reported(tmp_path):
    text = GOOD.replace("dtypes: [float32, float16]", "dtypes: [float99]") + "colour: blue\n"
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    assert {p.location for p in info.value.problems} >= {"dtypes", "colour"}


@pytest.mark.parametrize("edit,field", [
    (lambda s: s.replace("name: scale_add\n", ""), "name"),
    (lambda s: s + "colour: blue\n", "colour"),
    (lambda s: s.replace("def scale_add(x, y, alpha=2.0)", "def scale_add(a, b, alpha=2.0)"), "reference"),
])
def test_new_with_bad_spec_exits_2_writes_nothing(tmp_path, edit, field):
    p = write(tmp_path, edit(GOOD))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["new", str(p), "--out", str(out), "--backend", "offline"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert field in result.output
    assert not out.exists()


def test_validate_command(tmp_path):
    ok = CliRunner().invoke(app, ["validate", str(write(tmp_path, GOOD))])
    assert ok.exit_code == 0 and "ok" in ok.output
    bad = CliRunner().invoke(app, ["validate", str(write(tmp_path, GOOD + "colour: 1\n", "bad.yaml"))])
    assert bad.exit_code == 2 and "colour" in bad.output and "Traceback" not in bad.output
