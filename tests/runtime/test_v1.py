"""kernelgen.runtime.v1, the host runtime generated files import: each piece against what PyTorch itself
does, its unhappy paths, and the rules that keep it a runtime (frozen, importing nothing of KernelGen)."""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelgen.runtime import script_v1, v1

ROOT = Path(__file__).resolve().parents[2]

# v1 is frozen: its bytes are what every file importing it was verified against (the judge keys verdicts
# on them). Changing this digest is changing v1; write kernelgen/runtime/v2.py instead.
V1_SHA256 = "3252804c2a2858ae4e7389c6568a6db4e442ae7d8a7145e44412c8636766bb87"


def test_v1_is_frozen():
    got = hashlib.sha256(Path(v1.__file__).read_bytes()).hexdigest()
    assert got == V1_SHA256, ("kernelgen/runtime/v1.py changed: files verified against it would run other host code; "
                              "put the new behaviour in kernelgen/runtime/v2.py and leave v1 as it was")


def test_plan_frame_copies_only_where_no_frame_walks_the_inputs():
    shape = (2, 3, 4, 5)
    full = v1.contiguous_strides(shape)
    assert v1.plan_frame(shape, (full,), (shape,), False) == (None, (1, 1, 120, ((0, 0, 1),)))
    sliced = torch.empty(4, 6, 8, 5)[::2, ::2, ::2]  # [2, 3, 4, 5]: four dims no merge walks
    copies, frame = v1.plan_frame(shape, (sliced.stride(),), (shape,), False)
    assert copies == "contiguous" and frame == (1, 1, 120, ((0, 0, 1),))
    inter = v1.expanded_strides((2, 1, 4, 1), (4, 4, 1, 1), shape)  # broadcasts interleaved with real dims
    copies, frame = v1.plan_frame(shape, (sliced.stride(), inter), (shape, (2, 1, 4, 1)), False)
    assert copies == "materialise" and frame[:3] == (1, 24, 5)


def test_like_first_input_only_for_a_contiguous_uncopied_input_of_the_output_s_shape_and_dtype():
    f32 = torch.float32
    assert v1.like_first_input(((2, 3),), (f32,), (2, 3), (3, 1), f32, None) == (True,)
    assert v1.like_first_input(((2, 3),), (f32,), (2, 3), (1, 2), f32, None) == (False,)
    assert v1.like_first_input(((2, 3),), (torch.float16,), (2, 3), (3, 1), f32, None) == (False,)
    assert v1.like_first_input(((2, 3),), (f32,), (2, 3), (3, 1), f32, "contiguous") == (False,)


def test_the_runtime_imports_nothing_of_kernelgen():
    for path in (ROOT / "kernelgen" / "runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [m for m in mods if m.startswith("kernelgen")], f"{path.name} imports {mods}"


def test_the_llm_s_prompt_says_what_every_piece_does():
    text = (ROOT / "templates" / "prompts" / "_runtime.md.j2").read_text(encoding="utf-8")
    assert not [n for n in v1.__all__ if f"`{n}" not in text], "templates/prompts/_runtime.md.j2 misses a runtime name"


def test_every_exported_name_exists_and_the_script_helpers_are_not_exported():
    assert all(callable(getattr(v1, n)) for n in v1.__all__)
    assert "check_device" not in dir(v1) and "self_check" not in dir(v1)  # the script's: kernelgen.runtime.script_v1


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (3, 0, 2), (1, 7, 1)])
def test_contiguous_strides_are_pytorch_s(shape):
    assert v1.contiguous_strides(shape) == torch.empty(shape).stride()


@pytest.mark.parametrize("shape,to", [((4,), (2, 3, 4)), ((3, 1), (2, 3, 5)), ((1,), (6,)), ((2, 3), (2, 3))])
def test_expanded_strides_are_those_of_expand(shape, to):
    t = torch.empty(shape)
    assert v1.expanded_strides(shape, t.stride(), to) == t.expand(to).stride()


def test_expanded_strides_refuse_a_shape_that_does_not_broadcast():
    with pytest.raises(ValueError, match="does not broadcast"):
        v1.expanded_strides((3,), (1,), (2, 4))
    with pytest.raises(ValueError, match="does not broadcast"):
        v1.expanded_strides((2, 2, 3), (6, 3, 1), (2, 3))


def test_collapse_frame_merges_what_every_tensor_walks_as_one_dim():
    shape = (2, 3, 4, 5)
    full = v1.contiguous_strides(shape)
    assert v1.collapse_frame(shape, (full,), False) == (1, 1, 120, ((0, 0, 1),))
    bias = v1.expanded_strides((5,), (1,), shape)  # per column: the rows merge, the columns stay
    assert v1.collapse_frame(shape, (full, bias), False) == (1, 24, 5, ((0, 5, 1), (0, 0, 1)))
    assert v1.collapse_frame(shape, (full,), True) == (1, 24, 5, ((0, 5, 1),))


def test_collapse_frame_gives_none_past_three_dims():
    shape = (2, 3, 4, 5)
    sliced = torch.empty(4, 3, 8, 5)[::2, :, ::2].stride()  # strides no merge can walk as fewer dims
    interleaved = v1.expanded_strides((3, 1, 5), (5, 5, 1), shape)
    assert v1.collapse_frame(shape, (sliced, interleaved), False) is None


@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float16, torch.float16), (torch.float16, torch.float32),
                                    (torch.float16, torch.bfloat16), (torch.float64, torch.float16)])
def test_result_dtype_is_torch_result_type(dtypes):
    tensors = {f"t{i}": torch.ones(2, dtype=d) for i, d in enumerate(dtypes)}
    want = tensors["t0"]
    for t in list(tensors.values())[1:]:
        want = want + t
    assert v1.result_dtype(**{k: t.dtype for k, t in tensors.items()}) == want.dtype


def test_result_dtype_refuses_mixed_integer_dtypes_by_name():
    with pytest.raises(ValueError, match="x=torch.int32, y=torch.float32"):
        v1.result_dtype(x=torch.int32, y=torch.float32)


@pytest.mark.parametrize("base,new", [((4, 6), (24,)), ((4, 6), (2, 2, 6)), ((2, 3, 4), (6, 4)), ((0, 3), (3, 0))])
def test_reshape_strides_are_those_of_view(base, new):
    t = torch.empty(base)
    assert v1.reshape_strides(t.shape, t.stride(), new) == t.view(new).stride()


def test_reshape_strides_none_where_view_would_copy():
    t = torch.empty(4, 6).t()
    with pytest.raises(RuntimeError):
        t.view(24)
    assert v1.reshape_strides(t.shape, t.stride(), (24,)) is None


def test_view_strides_follow_pytorch_s_views():
    t = torch.arange(2 * 3 * 8).view(2, 3, 8)
    steps = [("permute", (2, 0, 1)), ("slice", (0, 1, 2, 4)), ("flip", (1,)), ("unsqueeze", 0), ("squeeze", (0,)),
             ("select", (2, 1))]
    shape, strides, offset = v1.view_strides(t.shape, t.stride(), 0, steps)
    want = t.permute(2, 0, 1)[1::2].flip(1)[:, :, 1]
    assert torch.equal(t.flatten().as_strided(shape, [abs(s) for s in strides], 0).shape and
                       torch.tensor([t.flatten()[offset + sum(i * s for i, s in zip(idx, strides))].item()
                                     for idx in torch.cartesian_prod(*[torch.arange(n) for n in shape]).tolist()]),
                       want.flatten())


def test_view_strides_none_for_a_reshape_the_layout_cannot_view():
    t = torch.empty(4, 6).t()
    assert v1.view_strides(t.shape, t.stride(), 0, [("reshape", (24,))]) is None


def test_stage_layout_groups_and_the_buffer_it_cannot_walk():
    layouts = {"x": ((4, 6), (6, 1)), "y": ((4, 6), (1, 4))}
    sizes, accesses, bad = v1.stage_layout((4, 6), [(0, 1)], [("x", [], (0, 1))], layouts)
    assert (sizes, accesses, bad) == ((24,), [(0, (1,))], None)
    assert v1.stage_layout((4, 6), [(0, 1)], [("y", [], (0, 1))], layouts)[1:] == (None, "y")


def test_kmajor_packing_and_pack_copy_an_operand_k_major_with_the_same_values():
    a = torch.randn(3, 5, 7).mT  # [3, 7, 5]: rows 7, K 5, K not contiguous
    off, sb, s_row, s_k = v1.matmul_operand((tuple(a.shape), a.stride()), [], 1)
    how, strides = v1.kmajor_packing((3,), 5, None, (off, sb, s_row, s_k, 7, True, False))
    assert how is not None and strides[0][3] == 1 and strides[0][2] == 8  # K contiguous, rows padded to 16 bytes
    (packed,) = v1.kmajor_pack(how, a)
    assert packed.stride()[-1] == 1 and torch.equal(packed[..., :5], a)
    assert v1.kmajor_packing((3,), 5, False, (off, sb, s_row, s_k, 7, True, False))[0] is None


def test_kmajor_pack_2d_transposes_where_asked():
    b = torch.randn(6, 5)
    (packed,) = v1.kmajor_pack_2d(((True, 6),), b)
    assert packed.shape == (5, 8) and torch.equal(packed[:, :6], b.mT)


def test_dot_and_conv_precision_off_nvidia():
    cpu = torch.device("cpu")
    assert v1.dot_precision(torch.float32, cpu) == "ieee" and v1.dot_precision(torch.float16, cpu) == "tf32"
    assert v1.dot_precision(torch.bfloat16, cpu, True) == "ieee"
    assert v1.conv_precision(torch.float16, cpu, None) == ("tf32", False)
    assert v1.conv_precision(torch.float32, cpu, None) == ("ieee", False)
    assert v1.conv_precision(torch.float32, cpu, True) == ("tf32", True) or not torch.backends.cudnn.allow_tf32
    assert v1.tf32_switches() == (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)


def test_conv_packing_makes_input_channels_contiguous_with_the_same_values():
    w = torch.randn(8, 4, 3, 3)
    how, strides, offset = v1.conv_packing("forward", False, tuple(w.shape), w.stride(), 0, None)
    assert strides[1] == 1 and offset == 0
    packed = v1.conv_pack(how, w)
    assert packed.stride() == strides and torch.equal(packed, w)
    assert v1.conv_packing("direct", False, tuple(w.shape), w.stride(), 0, None)[0] is None
    assert v1.conv_packing("forward", False, tuple(w.shape), w.stride(), 0, False)[0] is None
    wt = torch.randn(4, 8, 3, 3)  # transposed: [C_in, C_out, taps..], K along dim 0
    how, strides, _ = v1.conv_packing("transposed", False, tuple(wt.shape), wt.stride(), 0, None)
    assert strides[0] == 1 and torch.equal(v1.conv_pack(how, wt), wt)


def test_conv_packing_copies_an_input_channels_last_only_where_its_knob_says_so():
    base = torch.randn(2, 6, 5, 7, 9)[..., 1:8]  # sliced: an offset and strides no frame has
    x = base[:, :, 1:4]
    off = x.storage_offset()
    for knob in (None, False):
        assert v1.conv_packing("forward", False, tuple(x.shape), x.stride(), 0, knob, "input")[0] is None
    how, strides, offset = v1.conv_packing("transposed", False, tuple(x.shape), x.stride(), 0, True, "input")
    assert strides[1] == 1 and offset == 0 and strides == x.contiguous(memory_format=torch.channels_last_3d).stride()
    got = v1.conv_pack(how, base.as_strided(x.shape, x.stride(), 0))
    assert torch.equal(got, base.as_strided(x.shape, x.stride(), 0)) and got.stride() == strides
    cl = x.contiguous(memory_format=torch.channels_last_3d)  # already channels-last: left as it is
    assert v1.conv_packing("forward", False, tuple(cl.shape), cl.stride(), off, True, "input") == (None, cl.stride(), off)


def test_device_queries_off_a_gpu_give_the_file_s_guesses():
    assert v1.device_sm_count(torch.device("cpu"), 4, 128) == 4
    assert v1.device_sm_count(torch.device("meta"), 4, 128) == 128
    assert v1.device_l2_bytes(torch.device("cpu"), 123) == 123


def test_new_plan_analyses_once_and_forgets_past_1024_signatures():
    calls = []

    def plan(a, b):
        calls.append((a, b))
        return a + b

    plans: dict = {}
    assert v1.new_plan(plans, plan, (1, 2)) == 3 and plans == {(1, 2): 3}
    for i in range(1023):
        v1.new_plan(plans, plan, (i, 10))
    assert len(plans) == 1024
    v1.new_plan(plans, plan, (-1, -1))
    assert plans == {(-1, -1): -2} and len(calls) == 1025


def test_lean_launch_launches_nothing_until_kept_and_keep_launch_keeps_nothing_from_the_interpreter():
    lean: dict = {}
    assert v1.lean_launch(lean, "k", True, 1, "x") is False
    v1.keep_launch(lean, "k", object(), None, (1,), (), {}, True, 1, "x")  # the interpreter: no compiled kernel
    v1.keep_launch(lean, "k", object(), object(), (1,), (), {}, False, 1, "x")  # off 16-byte alignment: Triton's launch
    assert lean == {}  # (the kept path, on a fake driver: tests/offline/test_offline_lean_launch.py)


def test_self_check_exits_0_on_a_match_and_1_on_a_mismatch(capsys):
    x = torch.ones(3)
    with pytest.raises(SystemExit) as ok:
        script_v1.self_check("op", x, x.clone(), 1e-4, 1e-4, "float32, x [3]")
    with pytest.raises(SystemExit) as bad:
        script_v1.self_check("op", (x,), (x + 1,), 1e-4, 1e-4, "float32, x [3]")
    out = capsys.readouterr().out.splitlines()
    assert (ok.value.code, bad.value.code) == (0, 1)
    assert out[0].startswith("op: ok on cpu, float32, x [3]") and out[1].startswith("op: MISMATCH on cpu")


def test_check_device_reruns_the_script_in_the_interpreter_without_a_gpu(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os\nfrom kernelgen.runtime.script_v1 import check_device\n"
                      "print(check_device(), os.environ.get('TRITON_INTERPRET'))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "cpu 1", proc.stderr[-2000:]
