"""What people read of the LLM path: the console's and the log's one-line verdicts keep their brackets
balanced and cut at a word, name the failing check; a model's apology is never quoted as its design."""

from __future__ import annotations

import pytest

from kernelgen.llm.repair import verdict
from kernelgen.llm.replies import parse_reply, substance
from kernelgen.record.oplog import summary_row
from kernelgen.record.state import RoundRecord
from kernelgen.record.text import clip
from kernelgen.spec import validate_spec_data
from kernelgen.verify.results import AccuracyResult, CaseCheck, RunRecord

SPEC = validate_spec_data({"name": "op", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}], "dtypes": ["float32"],
                           "test_cases": [{"x": [4, 33]}], "reference": "def op(x):\n    return x + 1\n"})


def balanced(text: str) -> bool:
    depth = {"(": 0, "[": 0}
    for ch in text:
        if ch in "([":
            depth[ch] += 1
        elif ch in ")]":
            key = "(" if ch == ")" else "["
            depth[key] -= 1
            if depth[key] < 0:
                return False
    return all(v == 0 for v in depth.values())


@pytest.mark.parametrize("n", [20, 40, 61, 90, 500])
def test_clip_cuts_at_a_word_and_closes_every_bracket_it_cut_open(n):
    text = ("37927 of 37944 elements differ (37927 finite but off: max abs err 1.15, max rel err 1.12e+04); "
            "worst at [2, 13, 0, 1]: got 0.9, expected -0.246 (atol 0.0001, rtol 0.0001)")
    out = clip(text, n)
    assert balanced(out), out
    assert len(out) <= n + 3  # the closers of what was cut open
    if n < len(text):
        assert "…" in out and text.startswith(out.split("…")[0])
        assert text[len(out.split("…")[0])] in " ,;:)"  # never mid-word
    else:
        assert out == text


def _wrong_run() -> RunRecord:
    message = ("37927 of 37944 elements differ (37927 finite but off: max abs err 1.15, max rel err 1.12e+04); "
               "worst at [2, 13, 0, 1]: got 0.9, expected -0.246 (atol 0.0001, rtol 0.0001)")
    checks = [CaseCheck(case=0, shapes={"x": [4, 33]}, dtype="float32", seed=7, passed=False, output="out",
                        mismatches=37927, total=37944, message=message),
              CaseCheck(case=0, shapes={"x": [4, 33]}, dtype="float32", seed=8, passed=True, output="out", total=37944)]
    acc = AccuracyResult(op="op", kernel="k.py", device="cpu", interpreter=True, compiled=True, correct=False, seeds=[7, 8],
                         checks=checks)
    return RunRecord(kind="accuracy", status="failed", exit_code=1, duration_s=1.0, accuracy=acc)


def test_the_wrong_answer_line_names_the_failing_check_with_its_brackets_balanced():
    kind, line = verdict(_wrong_run())
    assert kind == "wrong answer"
    assert line.startswith("1 of 2 checks failed; first: case 0 x[4, 33] float32 seed 7 (guarded), output 'out': "
                           "37927 of 37944 elements differ (37927 finite but off: max abs err 1.15"), line
    assert balanced(line), line
    assert all(balanced(clip(line, n)) for n in range(60, len(line) + 10, 7))
    assert clip(line, 150).endswith("…)"), clip(line, 150)  # cut inside "(37927 finite but off: ...)", closed


def test_the_log_summary_cuts_the_change_at_a_word():
    change = "Split each row over four programs with a second kernel combining the partial sums, so short rows fill the GPU"
    row = summary_row(RoundRecord(round=1, started_at="t", backend="openai", kernel_file="k.py", change=change))
    assert row["change"].endswith("…") and len(row["change"]) <= 81
    assert change.startswith(row["change"][:-1]) and change[len(row["change"]) - 1] == " "


def test_an_apology_is_not_a_design_note():
    reply = ("Sorry, my previous answer missed the mask. Here is the corrected kernel: one program per row, "
             "BLOCK = next power of two of the row.\n\n```python\nimport triton\n\ndef op(x):\n    return x\n```\n")
    parsed = parse_reply(reply, SPEC)
    assert parsed.note == "one program per row, BLOCK = next power of two of the row."
    assert substance("Sure! Here is the kernel.") == ""
    assert substance("I apologize for the confusion. Certainly.") == ""
    cause = parse_reply("My apologies. The grid missed the tail block.\n```python\ndef op(x):\n    return x\n```\n", SPEC)
    assert cause.cause == "The grid missed the tail block."


def test_numbers_take_the_unit_that_fits_them():
    from kernelgen.record.text import si

    assert si(806400, "FLOP") == "806 kFLOP" and si(1.37e11, "FLOP") == "137 GFLOP" and si(512, "B") == "512 B"
