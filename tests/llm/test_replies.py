"""Reply parsing: what is accepted, and malformed replies that go back to the model."""

from __future__ import annotations

import pytest

from kernelgen.errors import MalformedReplyError
from kernelgen.llm.replies import code_blocks, parse_reply, short_reason
from kernelgen.spec import load_spec
from tests.support.fake_llm_server import fenced, honest_kernel
from tests.support.paths import SPECS


@pytest.fixture(scope="module")
def spec():  # noqa: ANN201
    return load_spec(SPECS / "broadcast.yaml", run_reference=False)


def test_one_python_block_is_the_file(spec):
    src = honest_kernel()
    parsed = parse_reply(fenced(src), spec)
    assert parsed.source == src.rstrip() + "\n"
    assert parsed.baseline_source is None


def test_kernel_and_wrapper_in_two_blocks_are_joined(spec):
    src = honest_kernel()
    head, wrapper = src.split("def broadcast(")
    reply = f"Kernel:\n```python\n{head}```\nWrapper:\n```python\ndef broadcast({wrapper}```\n"
    parsed = parse_reply(reply, spec)
    assert "_broadcast_kernel" in parsed.source and "def broadcast(" in parsed.source


def test_a_model_answer_may_be_several_kernels_in_several_blocks(spec):
    """A whole model (KernelBench level 3) takes a kernel per layer: each in its own block, then the wrapper
    launching them in turn through a buffer, are one file."""
    gemm = "@triton.jit\ndef _layer_kernel(x_ptr, w_ptr, out_ptr, n):\n    pass\n"
    act = "@triton.jit\ndef _relu_kernel(x_ptr, out_ptr, n):\n    pass\n"
    wrapper = ("def broadcast(x, bias):\n    h = torch.empty_like(x)\n    _layer_kernel[(1,)](x, bias, h, x.numel())\n"
               "    out = torch.empty_like(x)\n    _relu_kernel[(1,)](h, out, x.numel())\n    return out\n")
    reply = "".join(f"```python\n{code}```\n" for code in ("import torch\nimport triton\n\n" + gemm, act, wrapper))
    source = parse_reply(reply, spec).source
    assert source.index("_layer_kernel(x_ptr") < source.index("_relu_kernel(x_ptr") < source.index("def broadcast(")


def test_extra_usage_block_and_think_section_are_ignored(spec):
    reply = ("<think>```python\ndef broadcast(a):\n    pass\n```</think>\n" + fenced(honest_kernel())
             + "\nUsage:\n```bash\npython run.py\n```\n")
    assert "tl.load" in parse_reply(reply, spec).source


def test_change_type_reason_lines_are_read(spec):
    reply = "CHANGE: bigger blocks\nTYPE: parameters\nREASON: fewer programs\n\n" + fenced(honest_kernel())
    p = parse_reply(reply, spec)
    assert (p.change, p.change_type, p.reason) == ("bigger blocks", "parameters", "fewer programs")


@pytest.mark.parametrize("reply, words", [
    ("I cannot help with that.", "no code block"),
    ("", "empty reply"),
    (fenced("def broadcast(x, bias):\n    return (x +\n"), "syntax error"),
    (fenced("import torch\ndef add_bias(x, bias):\n    return x\n"), "missing entry function"),
    (fenced("import torch\ndef broadcast(x):\n    return x\n"), "wrong signature"),
    (fenced("def broadcast(x, bias):\n    return 1\n") + fenced("def broadcast(x, bias):\n    return 2\n"), "several conflicting files"),
])
def test_malformed_replies_are_explained_for_the_model(spec, reply, words):
    with pytest.raises(MalformedReplyError) as e:
        parse_reply(reply, spec)
    assert short_reason(e.value).startswith(words)
    assert "```python" in e.value.message or "broadcast" in e.value.message  # says what to send instead


def test_cut_off_reply_says_so(spec):
    with pytest.raises(MalformedReplyError, match="token limit"):
        parse_reply("Let me think about this at length", spec, finish_reason="length")


def test_description_only_spec_needs_both_files(spec):
    nospec = spec.model_copy(update={"reference": None})
    baseline = "def broadcast(x, bias):\n    return x + bias\n"
    reply = (f"```python\n# file: broadcast_baseline.py\n{baseline}```\n"
             f"```python\n# file: broadcast_triton.py\n{honest_kernel()}```\n")
    p = parse_reply(reply, nospec, want_baseline=True)
    assert "return x + bias" in p.baseline_source and "tl.store" in p.source
    with pytest.raises(MalformedReplyError, match="no reference implementation"):
        parse_reply(fenced(honest_kernel()), nospec, want_baseline=True)


def test_code_blocks_reads_tildes_and_file_marks():
    blocks = code_blocks("~~~py\n# file: x_triton.py\nprint(1)\n~~~\n")
    assert blocks[0].filename == "x_triton.py" and blocks[0].lang == "py"
