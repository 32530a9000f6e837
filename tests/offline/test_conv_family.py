"""The convolution family (kernelgen.offline.conv), kind by kind, through the public `generate_kernel`:
every spec of tests/support/conv_specs.py is served by it, and its kernel is as close to the float64
truth as the dtype's tolerance (never further than eager's own float16 error allows) under the
runtime guard, in float32 and float16 (the interpreter has no bfloat16 arithmetic), on contiguous,
channels-last and sliced inputs. One spec per kind is kept as a snapshot
(tests/offline/snapshots/conv_<kind>_<name>.py)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import difflib  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import first_choices, generate_kernel, knob_space, prune  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.conv_specs import ALL, CHAIN_STAGES, KINDS  # noqa: E402
from tests.support.offline_check import import_source, run_guarded  # noqa: E402

pytestmark = pytest.mark.slow
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH = "KERNELGEN_UPDATE_SNAPSHOTS"


def _relaid(t: torch.Tensor, how: str) -> torch.Tensor:
    """The same values in another layout: channels last (a 4-D or 5-D input), or every other element of
    a buffer twice as long along the last dim."""
    if t.dim() < 3 or not t.dtype.is_floating_point:
        return t
    if how == "channels_last":
        perm = (0, *range(2, t.dim()), 1)
        return t.permute(*perm).contiguous().permute(0, t.dim() - 1, *range(1, t.dim() - 1))
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


def _check(name: str, layout: str, dtypes: tuple[str, ...], tmp_path: Path, knobs: dict | None = None) -> str:
    spec = ALL[name]
    kern = generate_kernel(spec, knobs)
    assert kern.family == "conv", f"{name} is served by the {kern.family} family now"
    fn = getattr(import_source(spec.name, kern.source, tmp_path), spec.name)
    ref = load_reference(spec)
    for ci, case in enumerate(spec.test_cases):
        for dtype in dtypes:
            inputs = [_relaid(t, layout) for t in draw_inputs(spec, case, dtype, 11 + ci, "cpu")]
            assert layout == "contiguous" or not inputs[0].is_contiguous()
            truth = ref(*[t.double() if t.is_floating_point() else t for t in inputs])
            eager = ref(*inputs)
            got = run_guarded(fn, inputs)
            assert got.shape == eager.shape and got.dtype == eager.dtype, (got.shape, got.dtype, eager.shape, eager.dtype)
            tol = spec.tolerance_for(dtype)
            where = f"{name} case {ci} {dtype} {layout}"
            # within the dtype's tolerance of the truth; float16 eager itself is further than that on
            # some transposed convolutions (CPU rounding per tap): 0.0195 where the kernel is at 0.0046
            err, eager_err = (got.double() - truth).abs().max().item(), (eager.double() - truth).abs().max().item()
            assert err <= max(tol.atol + tol.rtol * truth.abs().max().item(), 2 * eager_err), \
                f"{where}: {err:.3g} from the float64 truth (eager: {eager_err:.3g})"
            torch.testing.assert_close(got.double(), truth, atol=max(tol.atol, 2 * eager_err), rtol=tol.rtol,
                                       msg=lambda m: f"{where}: {m}")
    return kern.source


@pytest.mark.parametrize("name", sorted(ALL))
def test_contiguous_inputs_in_float32_and_float16(name: str, tmp_path: Path) -> None:
    _check(name, "contiguous", ("float32", "float16"), tmp_path)


@pytest.mark.parametrize("name", sorted(n for k in ("forward2d", "forward3d", "depthwise", "transposed", "chain")
                                        for n in [KINDS[k][0].name]))
def test_channels_last_and_sliced_inputs(name: str, tmp_path: Path) -> None:
    _check(name, "channels_last", ("float32",), tmp_path)
    _check(name, "sliced", ("float16",), tmp_path)


@pytest.mark.parametrize("name", sorted(CHAIN_STAGES))
def test_a_chain_is_fused_into_the_convolutions_epilogue_and_few_stages(name: str) -> None:
    kern = generate_kernel(ALL[name])
    assert kern.summary.startswith(f"conv: {CHAIN_STAGES[name]} stage(s) (conv"), kern.summary
    # one kernel per stage, plus the split form (kernelgen.offline.stages.emit_split) a reduction stage
    # over many pixels carries beside its single-program form; no other kernel
    kernels = re.findall(r"@triton\.jit\ndef (\w+)", kern.source)
    assert len([k for k in kernels if not k.endswith("_split_kernel")]) == CHAIN_STAGES[name], kernels
    assert all(k.replace("_split_kernel", "_kernel") in kernels for k in kernels), kernels


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_kernel_per_kind_matches_its_snapshot(kind: str) -> None:
    spec = KINDS[kind][0]
    source = generate_kernel(spec).source
    path = SNAPSHOTS / f"conv_{kind}_{spec.name}.py"
    if os.environ.get(REFRESH) == "1":
        path.write_text(source)
        return
    want = path.read_text() if path.exists() else ""
    if source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), source.splitlines(True),
                                            f"snapshots/{path.name} (checked in)", f"{spec.name} (generated now)"))
        pytest.fail(f"the generated {spec.name} kernel differs from its snapshot:\n{diff}\n"
                    f"If intended: {REFRESH}=1 python3 -m pytest tests/offline/test_conv_family.py -k snapshot",
                    pytrace=False)


def test_every_conv_snapshot_has_a_kind() -> None:
    want = {f"conv_{kind}_{specs[0].name}" for kind, specs in KINDS.items()}
    stale = sorted({p.stem for p in SNAPSHOTS.glob("conv_*.py")} - want)
    assert not stale, f"conv snapshots no kind writes (delete them): {stale}"


def test_each_form_is_the_kernel_its_kind_needs() -> None:
    """Depthwise: direct multiply-adds, no tl.dot; transposed: a stride-phase grid; forward: both K walks,
    the tap loop's (tap, channel block) pairs one loop unless ONE_LOOP is off (Triton pipelines only an
    innermost loop)."""
    direct = generate_kernel(ALL["depthwise2d"]).source
    assert "tl.dot(" not in direct and "acc += xv.to(tl.float32) * wv.to(tl.float32)" in direct
    transposed = generate_kernel(ALL["conv_transpose2d_groups"]).source
    assert "PHASES: tl.constexpr" in transposed and "% STRIDE_H == 0" in transposed
    forward = generate_kernel(ALL["conv2d_bias_relu"]).source
    assert "if FLAT_K:" in forward and "elif ONE_LOOP:" in forward and "for kk in range(0, TAPS * n_c):" in forward
    assert "im2col" not in forward.split('"""', 2)[2]  # no materialised im2col buffer: one launch, no temporaries
    # a 1x1 convolution with stride 1 stays a batched matmul (nd), strided it is a convolution
    from tests.support.nd_specs import ALL as ND
    assert generate_kernel(ND["conv1x1"]).family == "nd"
    assert generate_kernel(ALL["conv2d_pointwise_strided"]).family == "conv"


@pytest.mark.parametrize("knobs", [{"FLAT_K": False, "BLOCK_N": 16, "BLOCK_K": 16}, {"FLAT_K": True, "BLOCK_M": 32}])
def test_the_knobs_reach_the_file_and_stay_correct(knobs: dict, tmp_path: Path) -> None:
    base = generate_kernel(ALL["conv2d_many_channels"]).source
    source = _check("conv2d_many_channels", "contiguous", ("float32",), tmp_path, knobs)
    assert source != base and all(f'"{k}": {v!r}' in source for k, v in knobs.items())


@pytest.mark.parametrize("name", ["conv2d_many_channels", "conv_transpose2d_groups", "conv_transpose3d"])
def test_the_nested_tap_and_channel_loops_stay_a_knob_and_correct(name: str, tmp_path: Path) -> None:
    """ONE_LOOP False: a loop over a tap's channel blocks inside the taps' (the form before 2026-12-07, kept to
    be timed against the one loop); the same file otherwise, and as close to the truth."""
    source = _check(name, "contiguous", ("float32",), tmp_path, {"ONE_LOOP": False, "BLOCK_K": 16})
    assert '"ONE_LOOP": False' in source and "for c0 in range(0, CIN_G, BLOCK_K):" in source


def test_one_loop_is_worth_timing_only_where_the_convolution_has_a_tap_loop() -> None:
    shapes = {"x": [8, 64, 66, 66], "w": [128, 64, 3, 3]}
    got = {p.value: p for p in prune(ALL["conv2d_many_channels"], "ONE_LOOP", [None, False], {}, shapes, "float32", 132)}
    assert got[False].kept and "a channel loop in each tap's" in got[False].reason, got[False].reason
    flat = {p.value: p for p in prune(ALL["conv2d_many_channels"], "ONE_LOOP", [None, False], {"FLAT_K": True}, shapes,
                                      "float32", 132)}
    assert not flat[False].kept and "(channel, tap) pairs" in flat[False].reason
    dw = {p.value: p for p in prune(ALL["depthwise2d"], "ONE_LOOP", [None, False], {}, {"x": [8, 64, 99, 99], "w": [64, 1, 3, 3]},
                                    "float32", 132)}
    assert not dw[False].kept and "direct" in dw[False].reason


def test_knob_space_pruning_and_round_zero_speak_of_the_convolution() -> None:
    spec = ALL["conv_relu_group_norm"]
    space = knob_space(spec)
    assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "FLAT_K", "MAX_SINGLE_PASS"} <= set(space)
    shapes = {"x": [64, 3, 130, 130], "w": [16, 3, 3, 3], "b": [16], "gw": [16], "gb": [16]}
    got = {p.value: p for p in prune(spec, "BLOCK_N", space["BLOCK_N"], {}, shapes, "float32", 132)}
    assert got[None].kept and "base setting" in got[None].reason
    assert not got[128].kept and "87% of every tile is padding" in got[128].reason  # 16 output channels
    got_k = {p.value: p for p in prune(spec, "BLOCK_K", [None, 16, 64], {}, shapes, "float16", 132)}
    assert got_k[16].kept and "K=27" in got_k[16].reason
    dw = {p.value: p for p in prune(ALL["depthwise2d"], "BLOCK_K", [None, 32], {}, {"x": [8, 64, 99, 99], "w": [64, 1, 3, 3]},
                                    "float32", 132)}
    assert not dw[32].kept and "direct" in dw[32].reason
    big = {p.value: p for p in prune(spec, "num_stages", [None, 5], {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}, shapes,
                                     "float32", 132)}
    assert not big[5].kept and "shared memory" in big[5].reason
    (choice,) = first_choices(spec.model_copy(update={"perf_cases": [shapes], "dtypes": ["float32"]}), 132)
    assert "conv 1048576x16" in choice.reason and "(channel, tap) pairs" in choice.reason, choice.reason


def test_fp32_convolutions_take_one_tf32_product_where_pytorch_allows_it_on_an_nvidia_gpu(tmp_path: Path) -> None:
    """PyTorch's precision policy for convolutions (torch.backends.cudnn.allow_tf32, its default True): on an
    NVIDIA GPU one TF32 product of operands rounded to nearest, as cuDNN may use; with TF32 off, three
    (tf32x3, near IEEE); off NVIDIA GPUs (the interpreter) IEEE, as PyTorch's own CPU convolution. The tf32
    knob False never takes one product, True takes it wherever the switch allows; 16-bit inputs multiply in
    their own precision. The matmul switch changes nothing here."""
    module = import_source("conv2d_bias_relu", generate_kernel(ALL["conv2d_bias_relu"]).source, tmp_path)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        for conv_tf32, mm_tf32 in ((True, False), (False, True), (True, True), (False, False)):
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = conv_tf32, mm_tf32
            one = ("tf32", True)
            assert module.conv_precision(torch.float32, cuda, None) == (one if conv_tf32 else ("tf32x3", False))
            assert module.conv_precision(torch.float32, cpu, None) == ("ieee", False)
            assert module.conv_precision(torch.float32, cuda, False) == ("tf32x3", False)
            assert module.conv_precision(torch.float32, cpu, True) == (one if conv_tf32 else ("ieee", False))
        assert module.conv_precision(torch.float16, cuda, None) == ("tf32", False)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def _tf32_nearest(t: torch.Tensor) -> torch.Tensor:
    """Each float32 rounded to the nearest TF32 (10-bit mantissa, ties away from zero), as cuDNN rounds."""
    return ((t.view(torch.int32).to(torch.int64) + 0x1000) & 0xFFFFE000).to(torch.int32).view(torch.float32)


def test_one_tf32_product_rounds_its_operands_to_nearest(tmp_path: Path) -> None:
    """With the tf32 knob the kernel computes the convolution of its operands rounded to the nearest
    TF32 (what cuDNN's TF32 algorithms compute), not of the truncated ones the tensor core would read:
    on the interpreter, whose tl.dot multiplies in fp32, it matches the rounded-operand reference to
    fp32 rounding, and lies measurably further from the float64 truth than the IEEE kernel."""
    spec = ALL["conv2d_bias_relu"]
    ref = load_reference(spec)
    one = getattr(import_source("conv_tf32", generate_kernel(spec, {"tf32": True}).source, tmp_path), spec.name)
    ieee = getattr(import_source("conv_ieee", generate_kernel(spec).source, tmp_path), spec.name)
    inputs = draw_inputs(spec, spec.test_cases[0], "float32", 5, "cpu")
    truth = ref(*[t.double() for t in inputs])
    x, w, b = inputs  # the bias is added to the fp32 accumulator, not multiplied
    rounded = ref(_tf32_nearest(x), _tf32_nearest(w), b)
    before = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        got = run_guarded(one, inputs)
        torch.backends.cudnn.allow_tf32 = False  # the user's switch off: the knob is not granted
        off = run_guarded(one, inputs)
    finally:
        torch.backends.cudnn.allow_tf32 = before
    exact = run_guarded(ieee, inputs)
    assert torch.allclose(got, rounded, atol=1e-5, rtol=1e-5), (got - rounded).abs().max()
    assert torch.equal(off, exact)
    err_one, err_ieee = (got.double() - truth).abs().max().item(), (exact.double() - truth).abs().max().item()
    assert err_one > 10 * err_ieee, (err_one, err_ieee)


def test_the_tf32_knob_is_timed_only_where_products_are_fp32_tensor_core_ones() -> None:
    spec = ALL["conv_relu_group_norm"]
    shapes = {"x": [64, 3, 130, 130], "w": [16, 3, 3, 3], "b": [16], "gw": [16], "gb": [16]}
    fp32 = {p.value: p for p in prune(spec, "tf32", [None, False], {}, shapes, "float32", 132)}
    assert fp32[False].kept and "three (tf32x3" in fp32[False].reason
    half = {p.value: p for p in prune(spec, "tf32", [None, False], {}, shapes, "float16", 132)}
    assert not half[False].kept and "float32 products only" in half[False].reason
    dw = {p.value: p for p in prune(ALL["depthwise2d"], "tf32", [None, False], {}, {"x": [8, 64, 99, 99], "w": [64, 1, 3, 3]},
                                    "float32", 132)}
    assert not dw[False].kept and "direct" in dw[False].reason

def test_the_generated_tile_rule_is_the_one_the_generator_models(tmp_path):
    """The tile heuristic is written twice: in the generated file (`_conv_config`, which must run where
    KernelGen is not installed) and in the generator's model of that file (launch.conv_tiles, which the
    pruning and the dispatch read). They must agree at every size, or the generator reasons about tiles
    the file never launches."""
    from kernelgen.offline.conv.knobs import ConvKnobs
    from kernelgen.offline.launch import conv_tiles

    path = SNAPSHOTS / "conv_forward2d_conv2d_bias_relu.py"
    module = import_source("conv_tile_rule", path.read_text(), tmp_path)
    knobs = ConvKnobs()
    for form in ("direct", "forward", "transposed"):
        for rows in (100, 128 * 264, 256 * 264, 1 << 22):
            for cols in (3, 16, 33, 64, 200):
                for cin_g in (3, 16, 40, 128):
                    # 3 x 9 taps: one flat K step; one: fp32 as one TF32 product (its own tiles)
                    for fp32, one, taps in ((False, False, 9), (True, False, 9), (True, False, 27), (True, False, 1),
                                            (True, True, 9), (True, True, 27), (True, True, 81)):
                        for epilogue in (False, True):
                            made = module._conv_config(form, rows, cols, cin_g, fp32, one, False, taps, epilogue)
                            model = conv_tiles(knobs, form, rows, cols, cin_g, taps, 1, fp32, one, epilogue)
                            assert made == (*model.tiles, model.flat, model.pack_x), (form, rows, cols, cin_g, fp32,
                                                                                      one, taps, epilogue)


def test_round_0s_conv_tiles_follow_the_gpu_sweep():
    """Round 0's choices at KernelBench's sizes, one TF32 product (H200 sweep, 2026-12-04): 256x128 where
    nothing follows the convolution, 128x128 where an epilogue computes on the accumulator (level 2's 4:
    x0.37 -> x0.85 of eager); the input packed channels-last at 64 channels per tile or 25+ taps (level 1's
    62: 5x9 taps, 32 -> 64 channels) and not at 3x3 over 128 channels (level 1's 55), nor where K is
    flattened (8 input channels), transposed, or with three TF32 products; a knob overrides either."""
    from kernelgen.offline.conv.knobs import ConvKnobs
    from kernelgen.offline.launch import conv_tiles

    k = ConvKnobs()
    l1_55 = conv_tiles(k, "forward", 8 * 510 * 1022, 128, 64, 9, 1, True, True)
    l2_4 = conv_tiles(k, "forward", 64 * 254 * 254, 128, 64, 9, 1, True, True, epilogue=True)
    l1_62 = conv_tiles(k, "forward", 8 * 508 * 504, 64, 32, 45, 1, True, True)
    l1_56 = conv_tiles(k, "forward", 8 * 508 * 250, 128, 64, 35, 1, True, True)
    assert (l1_55.block_m, l1_55.block_n, l1_55.pack_x) == (256, 128, False)
    assert (l2_4.block_m, l2_4.block_n, l2_4.num_warps, l2_4.pack_x) == (128, 128, 8, False)
    assert (l1_62.block_n, l1_62.pack_x) == (64, True) and l1_56.pack_x
    flat = conv_tiles(k, "forward", 128 * 254 * 254, 64, 8, 9, 1, True, True)
    assert flat.flat and not flat.pack_x
    assert not conv_tiles(k, "transposed", 8 * 508 * 504, 64, 32, 45, 1, True, True).pack_x
    assert not conv_tiles(k, "forward", 8 * 508 * 504, 64, 32, 45, 1, True, False).pack_x  # tf32x3: not swept
    assert not conv_tiles(ConvKnobs(PACK_X=False), "forward", 8 * 508 * 504, 64, 32, 45, 1, True, True).pack_x
    assert conv_tiles(ConvKnobs(PACK_X=True), "forward", 8 * 510 * 1022, 128, 64, 9, 1, True, True).pack_x
    assert conv_tiles(ConvKnobs(BLOCK_M=256), "forward", 64 * 254 * 254, 128, 64, 9, 1, True, True,
                      epilogue=True).block_m == 256


def test_the_generators_model_takes_one_tf32_product_where_the_policy_in_force_allows_it(monkeypatch):
    """The kernel runs where the judge has set cuDNN's switch from KernelGen's precision policy; the
    generator's process keeps PyTorch's default. Its model of the tiles follows the policy, not the switch."""
    import torch

    from kernelgen.offline.conv.stage import one_tf32
    from kernelgen.precision import CONV_ENV, OPTION_ENV

    monkeypatch.delenv(OPTION_ENV, raising=False)
    monkeypatch.delenv(CONV_ENV, raising=False)
    assert torch.backends.cudnn.allow_tf32
    assert one_tf32(True, True) and not one_tf32(False, True) and not one_tf32(True, False)
    assert one_tf32(True, None) == torch.cuda.is_available()  # no NVIDIA GPU here: IEEE, as the file picks
    monkeypatch.setenv(CONV_ENV, "0")
    assert not one_tf32(True, True)
    monkeypatch.delenv(CONV_ENV)
    monkeypatch.setenv(OPTION_ENV, "conv=ieee")
    assert not one_tf32(True, True)


@pytest.mark.parametrize("kind", ["forward2d", "transposed", "grouped"])
def test_the_weight_copied_k_major_gives_the_same_results_as_pytorch_s_layout(kind: str, tmp_path: Path) -> None:
    """The weight packed with its input channels contiguous (PACK_W, on by default where a K step runs along
    them: the tap loop, FLAT_K off, and the transposed form) and left as PyTorch lays it out: both right on
    contiguous, channels-last and sliced inputs, and the pack engaged only in the first."""
    name = KINDS[kind][0].name
    for sub in ("cl", "sl", "pt", "mod"):
        (tmp_path / sub).mkdir()
    packed = _check(name, "contiguous", ("float32",), tmp_path, {"FLAT_K": False})
    _check(name, "channels_last", ("float32",), tmp_path / "cl", {"FLAT_K": False})
    _check(name, "sliced", ("float16",), tmp_path / "sl", {"FLAT_K": False})
    _check(name, "contiguous", ("float32",), tmp_path / "pt", {"FLAT_K": False, "PACK_W": False})
    module = import_source(f"{name}_packed", packed, tmp_path / "mod")
    spec = ALL[name]
    inputs = draw_inputs(spec, spec.test_cases[0], "float32", 3, "cpu")
    run_guarded(getattr(module, spec.name), inputs)
    assert any(p is not None and p[1] is not None for plan in module._PLANS.values() for p in plan.packs), \
        "the weight was not packed"


@pytest.mark.parametrize("kind", ["forward2d", "transposed", "grouped"])
def test_the_input_copied_channels_last_gives_the_same_results(kind: str, tmp_path: Path) -> None:
    """PACK_X: the input copied with its channels contiguous before the launch, the kernel given its new
    strides -- right on contiguous and sliced inputs (packed), and on channels-last ones (already so: left
    as they are); off by default."""
    name = KINDS[kind][0].name
    for sub in ("sl", "cl", "mod", "off"):
        (tmp_path / sub).mkdir()
    packed = _check(name, "contiguous", ("float32",), tmp_path, {"FLAT_K": False, "PACK_X": True})
    _check(name, "sliced", ("float16",), tmp_path / "sl", {"FLAT_K": False, "PACK_X": True})
    _check(name, "channels_last", ("float32",), tmp_path / "cl", {"FLAT_K": False, "PACK_X": True})
    spec = ALL[name]
    inputs = draw_inputs(spec, spec.test_cases[0], "float32", 3, "cpu")
    for source, where, want in ((packed, "mod", True), (generate_kernel(spec, {"FLAT_K": False}).source, "off", False)):
        module = import_source(f"{name}_{where}", source, tmp_path / where)
        run_guarded(getattr(module, spec.name), inputs)
        packs = [p for plan in module._PLANS.values() for p in plan.packs if p is not None]
        assert packs and all((p[0] is not None) == want for p in packs), (where, packs)


@pytest.mark.parametrize("name, body, case, tiles, packed", [
    # level 1's 55: a bare convolution, 3x3 over 128 channels: 256x128, the input as it is
    ("kb_plain", "    return F.conv2d(x, w)", {"x": [8, 64, 512, 1024], "w": [128, 64, 3, 3]}, (256, 128, 8), False),
    # level 2's 4: Mish twice after it: 128x128 (256x128 spilled: x0.37 -> x0.85 of eager on an H200)
    ("kb_mish_mish", "    return F.mish(F.mish(F.conv2d(x, w)))", {"x": [64, 64, 256, 256], "w": [128, 64, 3, 3]},
     (128, 128, 8), False),
    # level 1's 62: 5x9 taps, 64 output channels: the input copied channels-last first
    ("kb_5x9", "    return F.conv2d(x, w)", {"x": [8, 32, 512, 512], "w": [64, 32, 5, 9]}, (128, 64, 4), True),
])
def test_the_generated_file_plans_round_0s_gpu_tiles_at_kernelbench_sizes(name, body, case, tiles, packed, tmp_path):
    """The generated file's own plan for a CUDA device at KernelBench's sizes (shapes only: nothing is
    allocated or launched), where PyTorch allows TF32 for convolutions: the epilogue and packing rules
    reach the launch, and the generator's model (stage_launches) says the same."""
    from kernelgen.offline import route
    from kernelgen.offline.conv.knobs import ConvKnobs
    from kernelgen.offline.stages.launch import stage_launches
    from tests.support.conv_specs import _spec

    spec = _spec(name, "x w", body, [{n: [max(2, d // 64) if i >= 2 else d for i, d in enumerate(s)]
                                      for n, s in case.items()}], dtypes=["float32"])
    module = import_source(name, generate_kernel(spec, {}).source, tmp_path)
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default: one TF32 product on an NVIDIA GPU
    metas = [torch.empty(case[n], device="meta") for n in spec.input_names]
    args = [a for t in metas for a in (t.shape, t.stride(), torch.float32)]
    plan = module._plan(*args, torch.device("cuda"))
    meta = plan.metas[0]
    assert (meta["BLOCK_M"], meta["BLOCK_N"], meta["num_warps"]) == tiles
    assert (plan.packs[0][0] is not None) == packed
    ct = stage_launches(route(spec).served.plan, ConvKnobs(tf32=True), case, spec.input_names, True)[0].conv
    assert (ct.block_m, ct.block_n, ct.num_warps, ct.pack_x) == (*tiles, packed)


def test_the_input_layout_is_a_setting_worth_timing_where_it_changes_the_launch():
    """PACK_X keeps round 0's tile and changes the input's layout: where it flips what the file does it is
    timed (it was pruned as "the base's tile: nothing to time" until the model carried the layout), and
    where it changes nothing -- the heuristic already packs, or K is flattened -- it is not."""
    spec = _spec_5x9()
    shapes = {"x": [8, 32, 512, 512], "w": [64, 32, 5, 9]}
    three = {p.value: p for p in prune(spec, "PACK_X", [None, True, False], {}, shapes, "float32", 132)}
    assert three[True].kept and "channels-last" in three[True].reason
    assert not three[False].kept and "same kernels" in three[False].reason
    one = {p.value: p for p in prune(spec, "PACK_X", [None, True, False], {"tf32": True}, shapes, "float32", 132)}
    assert one[False].kept and not one[True].kept  # one TF32 product: round 0 packs here already
    flat = {p.value: p for p in prune(_spec_5x9(cin=3), "PACK_X", [None, True], {}, {"x": [8, 3, 512, 512],
                                      "w": [64, 3, 5, 9]}, "float32", 132)}
    assert not flat[True].kept  # K as (channel, tap) pairs: no channel step to make contiguous


def _spec_5x9(cin: int = 32):
    from tests.support.conv_specs import _spec

    return _spec(f"kb_5x9_{cin}", "x w", "    return F.conv2d(x, w)", [{"x": [2, cin, 9, 12], "w": [64, cin, 5, 9]}],
                 dtypes=["float32"])
