"""`kernelgen validate`'s "offline: yes" is a promise: the kernel the offline generator writes runs once on
the spec's smallest test case in float32, in a sandboxed interpreter worker, and matches the reference
before validate says yes; a kernel that does not gets "no", with the reason."""

import dataclasses

import pytest
from typer.testing import CliRunner

import kernelgen.offline as offline
from kernelgen.cli import app


def _broken(edit):
    """The offline generator's first kernel with `edit` applied: patched here, in the validating process;
    the kernel itself runs in the worker, a child process, which imports the source it is sent."""
    real = offline.first_kernel

    def first_kernel(spec, sm_count=None):
        kern = real(spec, sm_count)
        return dataclasses.replace(kern, source=edit(kern.source))

    return first_kernel


def test_yes_after_the_kernel_ran_and_matched(repo):
    r = CliRunner().invoke(app, ["validate", str(repo / "operator_specs" / "row_sum.yaml")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "offline: yes (row_reduction" in text
    assert "its kernel matched the reference on case 3 {x: [500]} float32 in the CPU interpreter" in text


@pytest.mark.parametrize("what,edit,words", [
    ("wrong numbers", lambda s: s.replace("tl.sum(", "0.5 * tl.sum(", 1), "`out`: 1 of 1 elements differ"),
    ("fails to import", lambda s: s + "\nraise RuntimeError('no such device')\n", "import failed: RuntimeError: no such device"),
])
def test_no_when_the_generated_kernel_fails_its_own_check(repo, monkeypatch, what, edit, words):
    monkeypatch.setattr(offline, "first_kernel", _broken(edit))
    r = CliRunner().invoke(app, ["validate", str(repo / "operator_specs" / "row_sum.yaml")])
    assert r.exit_code == 0, r.output  # the spec is fine; the offline generator cannot build it
    text = " ".join(r.output.split())
    assert "offline: no (the generated kernel failed its own check: " in text and words in text, text
    assert "(run on case 3 {x: [500]} float32)" in text and "needs an LLM backend" in text


def test_no_run_keeps_the_instant_answer_and_says_so(repo, monkeypatch):
    monkeypatch.setattr(offline, "first_kernel", _broken(lambda s: s.replace("tl.sum(", "0.5 * tl.sum(", 1)))
    r = CliRunner().invoke(app, ["validate", str(repo / "operator_specs" / "row_sum.yaml"), "--no-run"])
    assert r.exit_code == 0, r.output
    assert "offline: yes (row_reduction" in r.output and "generated, not run (--no-run)" in " ".join(r.output.split())


def test_a_bfloat16_only_spec_is_generated_and_says_it_was_not_run(repo):
    from kernelgen.backends import offline_verdict
    from kernelgen.spec import load_spec

    spec = load_spec(repo / "operator_specs" / "row_sum.yaml").model_copy(update={"dtypes": ["bfloat16"], "perf_dtypes": []})
    verdict = offline_verdict(spec)
    assert verdict.ok and "not run: the CPU interpreter has no bfloat16 arithmetic" in verdict.describe()


def test_a_kernel_that_hangs_is_a_no_within_the_time_limit(repo, monkeypatch):
    import kernelgen.verify.judge.firstrun as firstrun

    monkeypatch.setattr(firstrun, "REQUEST_TIMEOUT_S", 4.0)
    monkeypatch.setattr(offline, "first_kernel", _broken(lambda s: s + "\nimport time\ntime.sleep(60)\n"))
    r = CliRunner().invoke(app, ["validate", str(repo / "operator_specs" / "row_sum.yaml")])
    assert r.exit_code == 0, r.output
    assert "failed its own check: the worker timed out: the worker did not answer 'load' within 4 s" in " ".join(r.output.split())
