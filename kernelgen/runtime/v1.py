"""KernelGen's host runtime, version 1: FROZEN. Generated files import from it the pieces they call, and a verified
file's host behaviour rests on these exact functions: a new behaviour goes to kernelgen/runtime/v2.py (saying what
changed and why), which new files import. The judge keys verdicts on this module's bytes too (an edit, even of a
comment, sends every file importing it to be judged again). Each piece is a top-level function or class reaching only
the imports below and other pieces by name (kernelgen.runtime.inline copies those a file uses into files that run
without KernelGen); `__all__` is what a kernel file may import (kernelgen.verify.judge.allowlist reads it).
"""

import functools
import math
import typing

import torch
import triton

__all__ = ["new_plan", "lean_launch", "keep_launch", "FramePlan", "StagePlan", "plan_frame", "like_first_input",
           "contiguous_strides", "expanded_strides", "collapse_frame", "result_dtype", "reshape_strides", "view_strides",
           "stage_layout", "matmul_operand", "kmajor_packing", "kmajor_pack", "kmajor_pack_2d", "dot_precision",
           "tf32_switches", "conv_precision", "conv_packing", "conv_pack", "device_sm_count", "device_l2_bytes"]


def new_plan(plans, plan, key):
    """The plan of a signature seen for the first time (`plan(*key)`), kept in `plans` (at most 1024: shapes that
    keep changing). A later call costs `plans.get(key)`, its allocations and launches: 2.3-3.5 us with Triton's launch
    mocked out on a CPU (benchmarks/host_path.py), where analysing every call cost 6.4-11.8 us."""
    if len(plans) >= 1024:
        plans.clear()
    found = plans[key] = plan(*key)
    return found


class FramePlan(typing.NamedTuple):
    """What every call with one signature needs, worked out once by a pointwise, row or matmul file's _plan."""

    kernel: typing.Any  # the kernel to launch (see the file's wrapper)
    grid: typing.Any  # its grid: a tuple, or a function of an autotuned config
    sizes: tuple  # the launch arguments after the tensors and scalar params: sizes and strides
    meta: dict  # constexprs, num_warps, num_stages
    out_shapes: tuple  # per output
    out_dtypes: tuple
    device: torch.device
    lean: dict  # kernel -> its launch through Triton's launcher, once compiled (keep_launch)
    like: tuple = ()  # per output: torch.empty_like(the first input) gives it (like_first_input)
    copies: typing.Optional[str] = None  # None; "contiguous" or "materialise": how the inputs are copied first
    shape: tuple = ()  # the broadcast shape of the inputs
    scratch: int = 0  # fp32 elements of partial statistics a split row needs (0: not split)
    packed: typing.Optional[tuple] = None  # matmul: per operand None, or (transposed, K): copied K-major (kmajor_pack_2d)


class StagePlan(typing.NamedTuple):
    """What every call with one signature needs, worked out once by a program of stages' _plan."""

    copies: tuple  # per input: True when it is copied contiguous first
    out_shapes: tuple
    out_dtypes: tuple
    temp_shapes: tuple
    grids: tuple  # per stage
    args: tuple  # per stage: the launch arguments after the buffers and scalar params
    metas: tuple  # per stage: constexprs, num_warps
    splits: tuple  # per stage: None, or a split reduction's (workspace elements, ((grid, meta) per phase), (n_split, steps))
    packs: tuple  # per stage: None, or how a matmul's fp32 operands are copied K-major first (kmajor_packing)
    device: torch.device
    lean: dict  # stage -> its launch through Triton's launcher, once compiled (keep_launch)


# --- the lean launch: after a plan's first call, each kernel goes straight to Triton's launcher, where
# kernel[grid](...) binds and specialises every argument again (10-20 us for 10-20 arguments on an H100;
# an empty launch takes 12.6). Launch hooks (proton) see the first launch only; CUPTI (nsys) sees all.
def lean_launch(lean, key, aligned, n_tensors, *args):
    """Launch `key`'s compiled kernel on the call's `args` through Triton's launcher; False, launching nothing, until
    the plan's first call compiled it, or where the inputs are off 16-byte alignment or the scalars changed."""
    fast = lean.get(key)
    if fast is None or not aligned:
        return False
    run, grid, function, packed, tail, params, device, current, stream = fast
    if args[n_tensors:] != params or current() != device:
        return False
    run(*grid, stream(device), function, packed, None, None, None, *args, *tail)
    return True


def keep_launch(lean, key, kernel, compiled, grid, sizes, meta, aligned, n_tensors, *args):
    """After a launch through kernel[grid](*args, *sizes, **meta): its compiled kernel kept for lean_launch, or
    None where Triton's own launch stays (an autotuned kernel, a backend without a launcher class or one taking
    its arguments in an order unknown here). A None `compiled` (the interpreter, a no-op launch) keeps nothing."""
    if compiled is None or not aligned or key in lean:
        return
    lean[key] = None
    backend = triton.runtime.driver.active
    launcher = getattr(backend, "launcher_cls", None)
    signature = getattr(getattr(compiled, "src", None), "signature", None)
    if not isinstance(kernel, triton.JITFunction) or launcher is None or not isinstance(getattr(compiled, "run", None), launcher) \
            or not isinstance(signature, dict):
        return
    names, given = list(kernel.arg_names), len(args) + len(sizes)
    # what the launcher takes, in order: Triton 3.3+ every argument (constexprs too), 3.0-3.2 the rest
    taken = [names[k] if isinstance(k, int) else k for k in signature]
    if taken[:given] == names[:given] and all(k in meta for k in taken[given:]):
        lean[key] = (compiled.run, (*grid, 1, 1)[:3], compiled.function, compiled.packed_metadata,
                     (*sizes, *(meta[k] for k in taken[given:])), args[n_tensors:], backend.get_current_device(),
                     backend.get_current_device, backend.get_current_stream)


# --- layouts in plain Python (a plan runs no torch op), matmul and convolution operands, device queries
def contiguous_strides(shape):
    """The strides of a contiguous tensor of this shape."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def expanded_strides(shape, stride, to):
    """The strides `t.expand(to)` would have for a tensor of this shape and stride (0 where it broadcasts); ValueError
    where the shape does not broadcast to `to`."""
    lead = len(to) - len(shape)
    if lead < 0 or any(d != 1 and d != t for d, t in zip(shape, to[lead:])):
        raise ValueError(f"shape {tuple(shape)} does not broadcast to {tuple(to)}")
    return (0,) * lead + tuple(0 if d == 1 and t != 1 else s for d, t, s in zip(shape, to[lead:], stride))


def collapse_frame(shape, strides, keep_last):
    """`shape` and every tensor's strides in it as (n_outer, n_inner, n_cols, strides3), or None past three
    dims: size-1 dims drop, neighbours every tensor walks as one dim merge (a contiguous tensor is one long
    row, a bias [rows, n_cols]); keep_last keeps the last dim apart (it is reduced)."""
    merged = []
    for d, size in enumerate(shape):
        st, last = tuple(s[d] for s in strides), keep_last and d == len(shape) - 1
        if size == 1 and not last:
            continue
        if merged and not last and all(p == q * size for p, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    if len(merged) > 3:
        return None
    merged = [(1, (0,) * len(strides))] * (3 - len(merged)) + merged
    return (*(size for size, _ in merged), tuple(zip(*(st for _, st in merged))))


def plan_frame(shape, strides, shapes, keep_last):
    """(copies, frame): the broadcast `shape` and the inputs' expanded `strides` as collapse_frame's frame, copies
    None; past three dims, "contiguous": strided inputs (of these `shapes`) copied contiguous once, broadcasts
    stay views; else "materialise": broadcasts materialised, the last dim apart (per-row or per-column inputs)."""
    frame = collapse_frame(shape, strides, keep_last)
    if frame is not None:
        return None, frame
    frame = collapse_frame(shape, tuple(expanded_strides(s, contiguous_strides(s), shape) for s in shapes), keep_last)
    if frame is not None:
        return "contiguous", frame
    return "materialise", collapse_frame(shape, (contiguous_strides(shape),) * len(shapes), True)


def like_first_input(out_shapes, out_dtypes, shape, stride, dtype, copies):
    """Per output: whether torch.empty_like(the first input) gives it (that input contiguous, not copied, of the
    output's shape and dtype): ~0.5 us less than torch.empty."""
    return tuple(s == shape and d == dtype and copies is None and stride == contiguous_strides(shape)
                 for s, d in zip(out_shapes, out_dtypes))


def result_dtype(**dtypes):
    """The dtype PyTorch gives an op on tensors of these dtypes (torch.result_type) in plain Python (torch.promote_types
    is an operator): one dtype stays; mixed float dtypes give the widest, float16 with bfloat16 float32."""
    first, *rest = dtypes.values()
    if all(d == first for d in rest):
        return first
    if not all(d.is_floating_point for d in dtypes.values()):
        got = ", ".join(f"{name}={d}" for name, d in dtypes.items())
        raise ValueError(f"expected float tensors, got {got}; cast them to one float dtype first")
    widest = max(dtypes.values(), key=lambda d: d.itemsize)
    return torch.float32 if widest.itemsize == 2 else widest


def reshape_strides(shape, strides, new):
    """The strides `new` has as a view of (shape, strides) -- PyTorch's rule for .view() -- or None
    where a view is impossible (a copy would be needed)."""
    if math.prod(shape) == 0:
        return contiguous_strides(new)
    out = [0] * len(new)
    view_d = len(new) - 1
    base = strides[-1] if strides else 1
    tensor_numel, view_numel = 1, 1
    for d in reversed(range(len(shape))):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base = strides[d - 1]
                tensor_numel, view_numel = 1, 1
    return tuple(out) if view_d == -1 else None


def view_strides(shape, strides, offset, steps):
    """(shape, strides, element offset) of a buffer seen through view steps (the reference's views, flips as negative
    strides), or None where a reshape cannot be a view of this layout."""
    shape, strides = list(shape), list(strides)
    for kind, arg in steps:
        if kind == "reshape":
            new = reshape_strides(shape, strides, arg)
            if new is None:
                return None
            shape, strides = list(arg), list(new)
        elif kind == "expand":
            lead = len(arg) - len(shape)
            strides = [0] * lead + [0 if d == 1 and t != 1 else s for d, t, s in zip(shape, arg[lead:], strides)]
            shape = list(arg)
        elif kind == "permute":
            shape, strides = [shape[p] for p in arg], [strides[p] for p in arg]
        elif kind == "unsqueeze":
            shape.insert(arg, 1)
            strides.insert(arg, 1)
        elif kind == "squeeze":
            shape = [d for i, d in enumerate(shape) if i not in arg]
            strides = [s for i, s in enumerate(strides) if i not in arg]
        elif kind == "flip":
            for d in arg:
                offset += (shape[d] - 1) * strides[d]
                strides[d] = -strides[d]
        elif kind == "slice":
            d, start, step, length = arg
            offset += start * strides[d]
            strides[d] *= step
            shape[d] = length
        elif kind == "select":
            d, index = arg
            offset += index * strides[d]
            del shape[d], strides[d]
        elif kind == "window":  # pooling windows: [.., L..] -> [.., out.., kernel..], overlapping reads
            n, ks, ss, ds = arg
            lead, size, st = len(shape) - n, shape[-n:], strides[-n:]
            outs = [(size[i] - ds[i] * (ks[i] - 1) - 1) // ss[i] + 1 for i in range(n)]
            shape = shape[:lead] + outs + list(ks)
            strides = strides[:lead] + [st[i] * ss[i] for i in range(n)] + [st[i] * ds[i] for i in range(n)]
    return tuple(shape), tuple(strides), offset


def stage_layout(frame, groups, accesses, layouts):
    """(per group its size, per access (offset, strides per group), None), or (.., None, buffer) for
    a buffer whose layout cannot walk a group as one dim: the plan copies it contiguous and retries."""
    sizes = tuple(math.prod(frame[d] for d in g) for g in groups)
    out = []
    for buffer, steps, fmap in accesses:
        got = view_strides(*layouts[buffer], 0, steps)
        if got is None:
            return sizes, None, buffer
        vshape, vstrides, offset = got
        fs = [0] * len(frame)
        for d, f in enumerate(fmap):
            if f is not None and vshape[d] != 1:
                fs[f] = vstrides[d]
        gs = []
        for g in groups:
            dims = [d for d in g if frame[d] != 1]
            if any(fs[a] != fs[b] * frame[b] for a, b in zip(dims, dims[1:])):
                return sizes, None, buffer
            gs.append(fs[dims[-1]] if dims else 0)
        out.append((offset, tuple(gs)))
    return sizes, out, None


def matmul_operand(layout, steps, batch):
    """A matmul operand [batch.., rows, cols]: (offset, batch strides right-aligned to the output's `batch` dims (0 where
    it broadcasts), row stride, column stride), or None where its view steps cannot be walked on this layout."""
    got = view_strides(*layout, 0, steps)
    if got is None:
        return None  # a reshape this layout cannot be viewed through: the plan copies the buffer contiguous
    shape, strides, offset = got
    lead = batch - (len(shape) - 2)
    sb = (0,) * lead + tuple(0 if d == 1 else s for d, s in zip(shape[:-2], strides[:-2]))
    return offset, sb, strides[-2], strides[-1]


def kmajor_packing(batch, K, knob, *operands):
    """Per matmul operand (offset, batch strides, row stride, K stride, rows, fp32, transposed): None, or how
    kmajor_pack copies it to [batch.., rows, K], K contiguous, rows padded to 16 bytes, where it is not so (knob
    None: fp32 operands, which Hopper's wgmma reads only K-major; True: any; False: none); and the strides the
    kernel then takes. A batch dim the operand broadcasts along stays one copy (stride 0)."""
    hows, strides = [], []
    for off, sb, s_row, s_k, rows, fp32, mt in operands:
        if (knob or (knob is None and fp32)) and not (s_k == 1 and s_row % 4 == 0):
            size = [b if st else 1 for b, st in zip(batch, sb)]
            kp = -(-K // 4) * 4
            packed = contiguous_strides(size + [rows, kp])
            hows.append((tuple(size) + ((K, rows) if mt else (rows, K)), tuple(sb) + ((s_k, s_row) if mt else (s_row, s_k)),
                         off, mt, K))
            strides.append((0, tuple(st if d != 1 else 0 for st, d in zip(packed[:-2], size)), kp, 1))
        else:
            hows.append(None)
            strides.append((off, sb, s_row, s_k))
    return (tuple(hows) if any(h is not None for h in hows) else None), strides


def kmajor_pack(packed, *operands):
    """The matmul operands copied as kmajor_packing says (the padding never read)."""
    out = []
    for t, how in zip(operands, packed):
        if how is not None:
            size, stride, offset, mt, k = how
            view = t.as_strided(size, stride, t.storage_offset() + offset)
            view = view.mT if mt else view
            dst = torch.empty((*view.shape[:-1], -(-k // 4) * 4), dtype=t.dtype, device=t.device)
            dst.narrow(-1, 0, k).copy_(view)
            t = dst
        out.append(t)
    return out


def kmajor_pack_2d(packed, *operands):
    """2-D operands copied as the plan says: each (transposed, K) one to [rows, K], K contiguous, rows padded to 16
    bytes (never read); Hopper's wgmma reads 32-bit operands only K-major (b [K, N] row-major: a quarter of the rate)."""
    out = []
    for t, how in zip(operands, packed):
        if how is not None:
            view = t.mT if how[0] else t
            dst = torch.empty((view.shape[0], -(-how[1] // 4) * 4), dtype=t.dtype, device=t.device)
            dst.narrow(1, 0, how[1]).copy_(view)
            t = dst
        out.append(t)
    return out


def dot_precision(dtype, device, upcast=False):
    """How tl.dot multiplies fp32: TF32 where PyTorch allows it for matmuls; else on NVIDIA GPUs three TF32 products
    (tf32x3: high and low TF32 parts, an error near fp32's, on tensor cores: fp32 on the FMA units reaches ~60 TFLOP/s
    of an H100's ~500 TF32), IEEE elsewhere (interpreter, ROCm). 16-bit inputs ignore it; `upcast` (fp32 operands): IEEE."""
    if dtype != torch.float32 or upcast:
        return "ieee" if upcast else "tf32"
    if device.type == "cuda" and torch.version.hip is None:
        return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "tf32x3"
    return "ieee"


def tf32_switches():
    """PyTorch's TF32 switches for convolutions and matmuls: the precision of a file's fp32 products follows them."""
    return torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32


def conv_precision(dtype, device, tf32):
    """(PRECISION, ROUND_TF32) of a convolution's fp32 products, as PyTorch's policy allows: one TF32 product of
    operands rounded to nearest first (as cuDNN rounds; the tensor core truncates, 2-3x the error) where
    torch.backends.cudnn.allow_tf32 allows TF32 (its default) on an NVIDIA GPU, or anywhere with the tf32 knob
    True; else three TF32 products (tf32x3, error near IEEE fp32's) on NVIDIA GPUs, IEEE elsewhere. One product
    is 2.0-3.5x faster on KernelBench's convolutions; the judge holds it to one TF32 product's error (H100)."""
    if dtype != torch.float32:
        return "tf32", False
    nvidia = device.type == "cuda" and torch.version.hip is None
    if torch.backends.cudnn.allow_tf32 and (tf32 or (tf32 is None and nvidia)):
        return "tf32", True
    return ("tf32x3" if nvidia else "ieee"), False


def conv_packing(form, flat, shape, strides, offset, knob, operand="weight"):
    """(how, strides, offset) of a convolution's weight or input: None and its own strides, or how conv_pack copies
    it with its input channels (each tap's K) contiguous, and the strides the kernel then takes. A weight [C_out,
    C_in, taps..] (transposed: [C_in, C_out, taps..]) strides its channels by the taps, where Hopper's wgmma reads
    fp32 operands only K-major: copied once per call (a few MB), 1.2-2.6x faster on KernelBench's 2-D and
    transposed convolutions (H100, 2026-11-27). An NCHW input strides them by the pixels: copied channels-last
    only where its knob (PACK_X) is True. Not for the direct form (no tl.dot), flattened (channel, tap) K, or knob False."""
    k, wanted = (1, knob is True) if operand == "input" else (0 if form == "transposed" else 1, knob is not False)
    if form == "direct" or flat or not wanted or strides[k] == 1 or shape[k] == 1:
        return None, strides, offset
    order = [d for d in range(len(shape)) if d != k] + [k]
    packed, new = contiguous_strides([shape[d] for d in order]), [0] * len(shape)
    for pos, d in enumerate(order):
        new[d] = packed[pos]
    return (tuple(shape), tuple(strides), offset, tuple(order)), tuple(new), 0


def conv_pack(how, t):
    """The weight or input copied as conv_packing says: the same values and shape, its K dim contiguous."""
    shape, strides, offset, order = how
    return t.as_strided(shape, strides, t.storage_offset() + offset).permute(order).contiguous().permute(
        [order.index(d) for d in range(len(order))])


@functools.lru_cache(maxsize=16)
def device_sm_count(device, interpreter, other):
    """The device's SM count, read once (persistent grids and split reductions are sized by it); the
    CPU interpreter (no SMs to ask) counts as `interpreter`, another device as `other`."""
    if device.type == "cuda":  # ROCm reports as CUDA too
        return torch.cuda.get_device_properties(device).multi_processor_count
    if device.type == "cpu":
        return interpreter
    return other


@functools.lru_cache(maxsize=16)
def device_l2_bytes(device, other):
    """The device's L2 cache, read once (an online row's re-read hits it while the rows in flight fit);
    `other`: the interpreter's and another device's."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).L2_cache_size
    return other
