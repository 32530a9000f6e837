"""Round 0's kernel compiled for an NVIDIA GPU on a machine without one: per launch, the registers, the
spill bytes and the lines of PTX, from Triton's own compiler and the ptxas it ships (`ptxas -v`).

    python benchmarks/ptxas_report.py SPEC_OR_PROBLEM [...] [--arch 90] [--sms 132] [--dtype float32]
    PYTHONPATH=/path/to/triton-3.6-site python benchmarks/ptxas_report.py ...   # another Triton's compiler

A spec (YAML) or a KernelBench problem file, derived as `kernelgen new` derives it; the offline
generator's kernel, its host plan worked out for a CUDA device of --sms SMs at the first perf case (the
file's own `_plan`: shapes only, nothing allocated), and each stage's @triton.jit function compiled with
that stage's constants, warps and stages for sm_<arch>a, specialised as a launch at that case would be
(integer arguments of 1 as constants, those divisible by 16 and every pointer marked so). One line per
stage: its grid, registers, spill stores and loads in bytes, shared memory, PTX lines and its global-memory
instructions by kind (`st.global.b32 x128`: 4 bytes a thread at a time; `.v4`: 16); a line a stage that
spills or whose PTX runs past --ptx-lines is marked `!`.

Why: a compile can be pathological where no timing on the CPU can show it. On 2026-12-07 this found level
2's 17 (Conv2d -> InstanceNorm -> divide, 36.8 ms a call on an H100 against 3.6 ms for the same
convolution in level 2's 1): under Triton 3.6, the GPU image's, its single-pass variance compiled to
191,131 lines of PTX with 62,228 bytes of spill stores (a count summed over a 2-D mask, unrolled per
element into every thread); Triton 3.9, this machine's, did not. So the Triton whose compiler is asked
matters: put the GPU machine's Triton first on PYTHONPATH (`pip install --target DIR triton==3.6.0`; its
NVIDIA backend and ptxas come with the wheel). The split forms of a reduction and files that are not a
program of stages (the single-kernel families) are named, not compiled.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import load_module, use_this_tree  # benchmarks/ is this script's folder, first on sys.path

SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")


@dataclass(frozen=True)
class StageReport:
    stage: int
    kernel: str
    grid: tuple
    launch: str  # warps and pipeline stages
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    shared: int = 0
    ptx_lines: int = 0
    memory: str = ""  # the global-memory instructions of the PTX, the most frequent first
    note: str = ""  # why it was not compiled, or the compiler's error

    def line(self, ptx_limit: int) -> str:
        if self.note:
            return f"    stage {self.stage} {self.kernel}: {self.note}"
        bad = self.spill_stores or self.spill_loads or self.ptx_lines > ptx_limit
        return (f"  {'!' if bad else ' '} stage {self.stage} {self.kernel} grid {self.grid} {self.launch}: "
                f"{self.registers} registers, spills {self.spill_stores}/{self.spill_loads} B, "
                f"shared {self.shared} B, {self.ptx_lines:,} lines of PTX"
                + (f"; global memory: {self.memory}" if self.memory else ""))


MEMORY_OPS = re.compile(r"^\s*(?:@%p\d+\s+)?((?:ld|st)\.global[.\w]*|cp\.async(?:\.bulk)?\.(?:ca|cg)[.\w]*)", re.M)


def memory_ops(ptx: str, most: int = 4) -> str:
    """The PTX's global loads, stores and async copies by kind, the most frequent first (`st.global.b32 x128`):
    whether a tile's accesses are vectorised (`.v4`, 16 bytes a thread) or go 4 bytes at a time."""
    counts: dict[str, int] = {}
    for op in MEMORY_OPS.findall(ptx):
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} x{n}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1])[:most])


def _ptxases() -> list[Path]:
    """The ptxas binaries the imported Triton ships, in the order tried: its own (made for its PTX version),
    then a newer one where it ships one; SystemExit where it has none (no NVIDIA backend)."""
    import triton

    folder = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    found = [folder / name for name in ("ptxas", "ptxas-blackwell") if (folder / name).is_file()]
    if not found:
        raise SystemExit(f"ptxas_report: no ptxas under {folder}: this Triton has no NVIDIA backend")
    return found


def _assemble(ptx: str, arch: int) -> str:
    """`ptxas -v`'s report of `ptx`; a newer ptxas where the first refuses the PTX's version."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        out = ""
        for ptxas in _ptxases():
            run = subprocess.run([str(ptxas), "-v", "--gpu-name", f"sm_{arch}a", str(src), "-o",
                                  str(src.with_suffix(".cubin"))], capture_output=True, text=True)
            out = run.stderr
            if run.returncode == 0:
                return out
        raise RuntimeError(out.strip().splitlines()[-1] if out.strip() else "ptxas failed")


def _as_launched(fn, sizes: tuple, constants: dict, spec, dtype: str) -> tuple[dict, dict, dict]:  # noqa: ANN001
    """(signature, constants, attrs) for `fn` as a launch at this case specialises it: buffers typed by the
    input they are (else float32: outputs at a float32 case, temporaries, workspaces), sizes as i32 or i64
    by value; an integer argument equal to 1 becomes a constant, and one divisible by 16 -- and every
    pointer (PyTorch's allocations are aligned) -- is marked so. Without that a unit stride is a runtime
    value, and what Triton can prove contiguous (and so coalesce and vectorise) is not what the GPU runs."""
    from kernelgen.spec import torch_dtype

    names = list(fn.arg_names)
    typed = {f"{i.name}_ptr": str(torch_dtype(spec.input_dtype(i, dtype))).removeprefix("torch.") for i in spec.inputs}
    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
             "int32": "i32", "bool": "i1", "uint8": "u8", "int8": "i8"}
    buffers = [n for n in names if n.endswith("_ptr")]
    by_value = dict(zip([n for n in names if n not in buffers and n not in constants], sizes))
    sig = {n: "*" + short.get(typed.get(n, "float32"), "fp32") for n in buffers}
    for n, v in by_value.items():
        sig[n] = "fp32" if isinstance(v, float) else ("i64" if abs(int(v)) >= 2**31 else "i32")
    constants = dict(constants, **{n: 1 for n, v in by_value.items() if isinstance(v, int) and v == 1})
    sig.update({n: "constexpr" for n in constants})
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if n in buffers or (n not in constants and isinstance(by_value.get(n), int) and by_value[n] % 16 == 0
                                 and by_value[n] != 0)}
    return {n: sig[n] for n in names if n in sig}, constants, attrs


def report(path: Path, *, arch: int, sms: int, dtype: str) -> tuple[str, list[StageReport]]:
    """The plan's perf case in words, and a report per stage."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernelgen.offline import generate_kernel
    from kernelgen.spec import torch_dtype
    from kernelgen.spec.given import read_spec

    spec = read_spec(path, run_reference=False).spec
    source = generate_kernel(spec, {}).source
    module = load_module(source, spec.name)
    case = spec.effective_perf_cases[0]
    metas = [torch.empty(case[i.name], device="meta", dtype=torch_dtype(spec.input_dtype(i, dtype))) for i in spec.inputs]
    module.device_sm_count = lambda *a, **k: sms  # the plan asks the device; there is none here
    plan = module._plan(*[a for t in metas for a in (t.shape, t.stride(), t.dtype)], torch.device("cuda"))
    what = f"{spec.name}: " + " ".join(f"{n}{list(s)}" for n, s in case.items()) + f", {dtype}, sm_{arch}a, {sms} SMs"
    if not hasattr(plan, "metas"):
        return what, [StageReport(0, spec.name, (), "", note="one kernel, not a program of stages: not compiled here")]
    # a stage's kernel by its name (helpers such as a scan's combine function are @triton.jit too)
    staged = {int(m[1]): m[0] for m in (re.fullmatch(r"_\w+_stage(\d+)_kernel", n)
                                         for n in re.findall(r"@triton\.jit\ndef (\w+)", source)) if m}
    jits = [getattr(module, staged[i]) for i in sorted(staged)]
    stages = []
    for i, (fn, meta, sizes, grid, split) in enumerate(zip(jits, plan.metas, plan.args, plan.grids, plan.splits)):
        constants = {k: v for k, v in meta.items() if k in fn.arg_names}
        options = {k: v for k, v in meta.items() if k in ("num_warps", "num_stages")}
        launch = ", ".join(f"{k} {v}" for k, v in options.items())
        if split is not None:
            stages.append(StageReport(i, fn.__name__, grid, launch, note="launched in its split form: not compiled here"))
            continue
        try:
            compiled = triton.compile(ASTSource(fn, *_as_launched(fn, sizes, constants, spec, dtype)),
                                      target=GPUTarget("cuda", arch, 32), options=options)
            ptx = compiled.asm["ptx"]
            said = _assemble(ptx, arch)
        except Exception as e:  # noqa: BLE001 - one stage's failure is its line
            stages.append(StageReport(i, fn.__name__, grid, launch, note=f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        regs, spills = REGISTERS.search(said), SPILLS.search(said)
        stages.append(StageReport(i, fn.__name__, grid, launch, int(regs.group(1)) if regs else None,
                                  int(spills.group(1)) if spills else 0, int(spills.group(2)) if spills else 0,
                                  int(getattr(compiled.metadata, "shared", 0) or 0), ptx.count("\n"), memory_ops(ptx)))
    return what, stages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="+", type=Path, help="spec YAML files or KernelBench problem files")
    ap.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90 (H100, H200)")
    ap.add_argument("--sms", type=int, default=132, help="the SMs the plan counts (132 on an H100 SXM or H200)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--ptx-lines", type=int, default=20_000, help="more lines of PTX than this are marked")
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # compiled, not interpreted
    use_this_tree()
    import triton

    print(f"Triton {triton.__version__} ({Path(triton.__file__).parent}), {_ptxases()[0].name}", flush=True)
    marked = 0
    for path in args.specs:
        try:
            what, stages = report(path, arch=args.arch, sms=args.sms, dtype=args.dtype)
        except Exception as e:  # noqa: BLE001 - one file's failure is one line; the rest go on
            print(f"{path.name}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            marked += 1
            continue
        print(what)
        for s in stages:
            print(s.line(args.ptx_lines), flush=True)
            marked += bool(not s.note and (s.spill_stores or s.spill_loads or s.ptx_lines > args.ptx_lines))
    return 1 if marked else 0


if __name__ == "__main__":
    sys.exit(main())
