"""The convolution family's knobs, baked into its file's _KNOBS (None: the file's heuristic;
kernelgen.offline.knobs says how knobs work).

The convolution stage reads the tiles (BLOCK_M output pixels x BLOCK_N output channels x BLOCK_K of
the reduction), GROUP_SIZE_M, num_warps, num_stages, FLAT_K and ONE_LOOP; the stages after it (reductions over
pixels or channels: norms, pooling, softmax) read MAX_SINGLE_PASS and ROW_TILE as nd's do, and
num_warps too. The names match the matmul and nd families' where they mean the same, so the
planner's hypotheses about them apply here too."""

from __future__ import annotations

from typing import Optional

from pydantic import StrictBool

from kernelgen.offline.knobs import Count, KnobsModel, Pow2, candidates


class ConvKnobs(KnobsModel):
    BLOCK_M: Optional[Pow2] = candidates(None, 64, 128, 256)  # output pixels per tile
    # output channels per tile: a group's channels are often few (16 for KernelBench's level 2)
    BLOCK_N: Optional[Pow2] = candidates(None, 16, 32, 64, 128)
    BLOCK_K: Optional[Pow2] = candidates(None, 16, 32, 64)
    GROUP_SIZE_M: Count = candidates(8, 1, 4, 16)  # pixel-blocks sharing the weight's columns in L2
    num_warps: Optional[Pow2] = candidates(None, 2, 4, 8)
    num_stages: Optional[Count] = candidates(None, 2, 3, 4, 5)
    # K as flattened (channel, tap) pairs (True) or a loop over taps of BLOCK_K channels (False);
    # None: flattened where a group has fewer than 16 input channels (forward convolutions)
    FLAT_K: Optional[StrictBool] = candidates(None, False, True)
    # the tap-loop forward and the transposed forms' (tap, channel block) pairs as one loop (None, True), or
    # a loop over a tap's channel blocks inside the loop over taps (False, the form before 2026-12-07).
    # Triton pipelines only an innermost loop: nested, the pipeline is filled again at every tap. One loop
    # was faster on 8 of 10 KernelBench convolutions on an H100 (level 1's 78 x0.35 -> x0.71 of eager);
    # level 2's 17 read x1.01 -> x0.63 in the same run, unexplained: False is there to time it
    ONE_LOOP: Optional[StrictBool] = candidates(None, False)
    # float32 products of a tensor-core convolution. None: one TF32 product of operands rounded to nearest
    # (as cuDNN rounds) where PyTorch allows TF32 for convolutions (torch.backends.cudnn.allow_tf32, its
    # default) on an NVIDIA GPU -- what cuDNN may do there, 2.0-3.5x faster than three products on
    # KernelBench's convolutions (H100), and judged against the error one TF32 product makes at each shape
    # (kernelgen.verify.judge.tf32ref); three TF32 products (tf32x3, near IEEE) where it does not allow it,
    # IEEE off NVIDIA GPUs. True: one TF32 product wherever PyTorch allows it (the interpreter too);
    # False: never
    tf32: Optional[StrictBool] = candidates(None, False)
    # the weight copied with its input channels contiguous before the launch (None: where the kernel
    # steps K along them: the tap-loop forward and the transposed forms); False keeps PyTorch's layout
    PACK_W: Optional[StrictBool] = candidates(None, False)
    # the input copied channels-last (its channels contiguous: each K step one 64-byte row per pixel) before
    # the launch, where the kernel steps K along them. An NCHW input makes the K step a column of separate
    # loads, and Triton 3.6 compiles level 1's 55 (Conv2d 64->128, 8x512x1024) at 256x128 tiles to 255
    # registers and a 112-byte spill per thread, channels-last to 231 and none (sm_90, compiled on a CPU,
    # 2026-11-28); the copy costs a read and a write of the input (1 GB there, ~0.7 ms on an H100). None: the
    # file's heuristic from an H200 sweep (benchmarks/conv_tune.py, 2026-12-04: 10-13% faster at 64 channels
    # per tile or 25+ taps, 0-5% slower at 3x3 taps over 128 channels); True packs; False never
    PACK_X: Optional[StrictBool] = candidates(None, True, False)
    # the later stages, as the nd family's knobs of the same names
    MAX_SINGLE_PASS: Optional[Count] = candidates(None, 4096, 8192, 32768)
    ROW_TILE: Optional[Pow2] = candidates(None, 1024, 2048, 8192, 16384)
    # the later stages' split reductions (per-channel statistics over a batch of feature maps leave
    # few kept blocks), as the nd family's knobs of the same names: the file's reduction stages read them
    split: Optional[StrictBool] = candidates(None, False, True)
    SPLIT_PER_SM: Optional[Count] = candidates(None, 2, 8, 16)
    # a 1x1 convolution after another (depthwise-separable) is a matmul stage: it reads pack as nd's do
    pack: Optional[StrictBool] = candidates(None, False, True)
