"""`kernelgen refresh`: editing the operator folder's spec.yaml is supported — the tests are re-rendered
from it, the best kernel re-verified, the rounds kept, the refresh recorded; mistakes exit 2."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.record.state import load_state
from kernelgen.refresh import spec_changes
from kernelgen.spec import load_spec

pytestmark = pytest.mark.slow

NEW_CASE = "  - {x: [5, 129], bias: [129]}\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory, repo):
    out = tmp_path_factory.mktemp("refresh")
    r = CliRunner().invoke(app, ["new", str(repo / "operator_specs" / "broadcast.yaml"), "--out", str(out),
                                 "--backend", "offline", "--no-bench"])
    assert r.exit_code == 0, r.output
    return out / "broadcast"


@pytest.fixture
def op(made, tmp_path):
    d = tmp_path / "broadcast"
    shutil.copytree(made, d)
    return d


def _edit(op, old, new):
    spec = op / "spec.yaml"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))


def test_an_added_test_case_is_checked_and_the_rounds_are_kept(op):
    before = load_state(op)
    _edit(op, "test_cases:\n", "test_cases:\n" + NEW_CASE)
    r = CliRunner().invoke(app, ["refresh", str(op), "--no-bench"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, text
    assert "test cases added: `x[5, 129] bias[129]`" in text and "PASS" in text
    assert "\"x\": [5, 129]" in (op / "broadcast_accuracy.py").read_text()
    state = load_state(op)
    assert [x.round for x in state.rounds] == [x.round for x in before.rounds] and state.best_round == 0
    f = state.refreshes[0]
    assert f.passed and f.round == 0 and f.after_round == 0
    assert any(c.shapes == {"x": [5, 129], "bias": [129]} for c in f.accuracy.accuracy.checks)
    assert (op / f.kept_dir / "spec.before.yaml").read_text() == before.rendered_spec
    assert json.loads((op / "refreshes" / "refresh_1" / "accuracy.json").read_text())["status"] == "ok"
    log = (op / "optimization_log.md").read_text()
    assert log.index("## Round 0") < log.index("## Spec refresh 1") and "test cases added" in log
    # a second refresh with nothing edited runs nothing
    again = CliRunner().invoke(app, ["refresh", str(op)])
    assert again.exit_code == 0 and "nothing to refresh" in again.output


def test_a_hand_edited_accuracy_script_is_restored_and_kept(op):
    script = op / "broadcast_accuracy.py"
    script.write_text(script.read_text() + "\n# my note\n")
    r = CliRunner().invoke(app, ["refresh", str(op), "--no-bench"])
    assert r.exit_code == 0, r.output
    assert "edited by hand" in " ".join(r.output.split())
    assert "# my note" not in script.read_text()
    assert (op / "refreshes" / "refresh_1" / "broadcast_accuracy.py").read_text().endswith("# my note\n")


def test_an_edit_the_best_kernel_fails_says_so_and_reverting_it_restores_the_best(op):
    original = (op / "spec.yaml").read_text()
    _edit(op, "return x + bias", "return x + 2 * bias")
    r = CliRunner().invoke(app, ["refresh", str(op), "--no-bench"])
    text = " ".join(r.output.split())
    assert r.exit_code == 1, text
    assert "reference changed" in text and "fails the edited spec" in text
    assert load_state(op).best_round is None
    (op / "spec.yaml").write_text(original)
    r = CliRunner().invoke(app, ["refresh", str(op), "--no-bench"])
    assert r.exit_code == 0, r.output
    state = load_state(op)
    assert state.best_round == 0 and len(state.refreshes) == 2 and "reference changed" in " ".join(state.refreshes[1].changes)


def test_mistakes_exit_2_and_change_nothing(op, tmp_path):
    accuracy = (op / "broadcast_accuracy.py").read_text()
    _edit(op, "test_cases:\n", "test_cases:\n  - {x: [5, 129], bias: [7]}\n")
    r = CliRunner().invoke(app, ["refresh", str(op)])
    assert r.exit_code == 2 and "spec.yaml" in r.output and "test_cases[0]" in r.output and "Traceback" not in r.output
    assert (op / "broadcast_accuracy.py").read_text() == accuracy and not (op / "refreshes").exists()
    _edit(op, "  - {x: [5, 129], bias: [7]}\n", "")  # back to a valid spec
    _edit(op, "name: broadcast", "name: bias_add")
    _edit(op, "def broadcast(", "def bias_add(")
    r = CliRunner().invoke(app, ["refresh", str(op)])
    assert r.exit_code == 2 and "renames the operator" in " ".join(r.output.split())  # rich folds long lines
    r = CliRunner().invoke(app, ["refresh", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and "no such directory" in r.output


def test_a_half_made_folder_is_refused(op):
    state = (op / "state.json").read_text()
    (op / "state.json").write_text(state.replace(json.loads(state)["rounds"][0]["finished_at"], "X").replace('"X"', "null"))
    r = CliRunner().invoke(app, ["refresh", str(op)])
    assert r.exit_code == 2 and "round 0 never finished" in r.output


def test_spec_changes_in_words(repo):
    old = load_spec(repo / "operator_specs" / "broadcast.yaml")
    new = old.model_copy(update={"dtypes": ["float32", "float16"], "perf_dtypes": ["float32"],
                                 "perf_cases": old.perf_cases[:1], "tolerance": {}})
    lines = spec_changes(old, new)
    assert "dtypes removed: `bfloat16`" in lines
    assert any(line.startswith("perf cases removed: `x[16384, 4096] bias[4096]`") for line in lines)
    assert "tolerance float16: atol 0.001 -> 0.001, rtol 0.001 -> 0.002" in lines
    assert spec_changes(old, old) == []
    assert "was not recorded" in spec_changes(None, old)[0]
