"""The truth at any size (kernelgen.verify.judge.bigtruth), through compare_outputs as every check calls
it: whole where it fits, in batch slices or on a judge-chosen sample of rows where it does not (forced
here with KERNELGEN_TRUTH_MEMORY), and for an op that mixes rows neither: the same verdicts, the same
errors, and a wrong kernel refused whichever way the truth was computed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernelgen.spec import ToleranceSpec
from kernelgen.verify.judge.bigtruth import case_truth
from kernelgen.verify.judge.truthmemory import MEMORY_ENV
from kernelgen.verify.judge.compare import compare_outputs
from kernelgen.precision import PrecisionPolicy

TOL = ToleranceSpec(atol=1e-4, rtol=1e-4)
DEFAULTS = PrecisionPolicy()


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """Both operands cut to TF32's 10-bit mantissa: what cuDNN multiplies with under allow_tf32."""
    return (t.contiguous().view(torch.int32) & -8192).view(torch.float32)


def _conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float32 and torch.backends.cudnn.allow_tf32:
        x, w = _tf32(x), _tf32(w)
    return F.conv1d(x, w)


def _case(batch: int = 16, seed: int = 0) -> tuple[list[torch.Tensor], tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(batch, 16, 40, generator=g), torch.randn(8, 16, 5, generator=g)
    with torch.backends.cudnn.flags(allow_tf32=True):
        return [x, w], (_conv(x, w),)


def _kernels(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    """IEEE (better than eager), eager's own TF32 class, and 6-bit operands (worse than 2x eager)."""
    cut = lambda t, bits: (t.view(torch.int32) & -(1 << (23 - bits))).view(torch.float32)  # noqa: E731
    return {"ieee": F.conv1d(x.double(), w.double()).float(), "tf32": F.conv1d(_tf32(x), _tf32(w)),
            "coarse": F.conv1d(cut(x, 6), cut(w, 6))}


def _verdicts(inputs, eager, monkeypatch, memory: str | None, sample: bool = False):
    if memory is None:
        monkeypatch.delenv(MEMORY_ENV, raising=False)
    else:
        monkeypatch.setenv(MEMORY_ENV, memory)
    truth = case_truth(_conv, inputs, {}, eager, policy=DEFAULTS, sample=sample)
    return truth, {name: compare_outputs([k], eager, TOL, truth=truth)[0] for name, k in _kernels(*inputs).items()}


def test_a_truth_in_batch_slices_gives_the_verdicts_and_errors_of_the_whole_one(monkeypatch):
    inputs, eager = _case()
    whole, by_whole = _verdicts(inputs, eager, monkeypatch, None)
    sliced, by_slices = _verdicts(inputs, eager, monkeypatch, "1")  # one byte: a row at a time
    assert whole.how == "float64, whole" and sliced.how.startswith("float64 in 16 batch slice(s) of up to 1 of 16 rows")
    for name in ("ieee", "tf32", "coarse"):
        a, b = by_whole[name], by_slices[name]
        assert (a.passed, a.rule, a.mismatches, a.total) == (b.passed, b.rule, b.mismatches, b.total)
        assert a.truth_max_err == pytest.approx(b.truth_max_err) and a.eager_max_err == pytest.approx(b.eager_max_err)
        assert a.truth_rmse == pytest.approx(b.truth_rmse) and a.worst_index == b.worst_index
    assert by_slices["ieee"].rule == "tolerance" and by_slices["tf32"].rule == "eager-multiple"
    refused = by_slices["coarse"]
    assert not refused.passed and "eager's own" in refused.message and "over the bound 2x eager's" in refused.message
    assert "the truth: float64 in 16 batch slice(s)" in refused.message


def test_a_sampled_truth_covers_a_judge_chosen_eighth_of_the_rows_and_still_refuses(monkeypatch):
    inputs, eager = _case(batch=16)
    row = eager[0][0].numel()
    rows_seen = set()
    for _ in range(6):
        truth, verdicts = _verdicts(inputs, eager, monkeypatch, "1", sample=True)
        assert "judge-chosen sample of 2 of 16 batch rows" in truth.how
        assert verdicts["ieee"].passed and verdicts["tf32"].passed and verdicts["ieee"].total == 2 * row
        assert not verdicts["coarse"].passed
        rows_seen.add(tuple(r for group in truth.outputs[0].slices.groups for r in group))
    assert len(rows_seen) > 1  # drawn afresh: a kernel cannot know which rows are read


def test_an_op_that_mixes_rows_is_never_sliced_and_is_judged_against_ieee_float32_as_a_last_resort(monkeypatch):
    """Training-mode normalisation over the batch: a slice's statistics are not the batch's, so the
    slice's proof fails; too large for the device (forced) and no other host: the IEEE float32 run."""
    def centred(x):
        return x - x.mean(0, keepdim=True)

    x = torch.randn(16, 300, generator=torch.Generator().manual_seed(1)) + 3
    eager = (centred(x),)
    monkeypatch.setenv(MEMORY_ENV, "1")
    truth = case_truth(centred, [x], {}, eager, policy=DEFAULTS)
    assert truth.how.startswith("float32 (IEEE, TF32 off)") and truth.outputs[0].label == "float32"
    right = compare_outputs([centred(x.double()).float()], eager, TOL, truth=truth)[0]
    per_slice = compare_outputs([torch.cat([centred(x[i:i + 1]) for i in range(16)])], eager, TOL, truth=truth)[0]
    assert right.passed and not per_slice.passed and "float32 truth" in per_slice.message


def test_where_the_whole_truth_fits_nothing_is_sliced(monkeypatch):
    inputs, eager = _case(batch=4)
    truth, verdicts = _verdicts(inputs, eager, monkeypatch, str(1 << 30))
    assert truth.how == "float64, whole" and verdicts["ieee"].passed and not verdicts["coarse"].passed
    assert "the truth:" not in verdicts["coarse"].message  # nothing to say about a whole float64 truth
