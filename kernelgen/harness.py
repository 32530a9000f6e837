"""The stable entry point of the rendered `<op>_accuracy.py` and `<op>_performance.py`.

Those files read as tests (their cases, dtypes and tolerances are in them, and `pytest OP_DIR` runs
them); the checking itself is KernelGen's judge (kernelgen.verify), which runs the kernel in a
sandboxed worker and never in the process that decides. Run as scripts they print a verdict and exit
0 only on success:

    python broadcast_accuracy.py [--device auto|cuda|npu|cpu] [--kernel FILE] [--seeds N] [-v] [--json FILE]
    python broadcast_performance.py [--device ...] [--kernel FILE] [--no-compile] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from kernelgen.devices import INTERPRETER_WARNING, DeviceInfo, resolve_device
from kernelgen.errors import KernelGenError
from kernelgen.opdir import OperatorDir, open_operator
from kernelgen.verify.judge.accuracy import DEFAULT_SEEDS
from kernelgen.verify.results import AccuracyResult, RunRecord


def _parser(what: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=f"KernelGen {what} check (the trusted judge)")
    p.add_argument("--kernel", type=Path, help="kernel file to check instead of <name>_triton.py")
    p.add_argument("--device", default=os.environ.get("KERNELGEN_DEVICE", "auto"), choices=["auto", "cuda", "npu", "cpu"])
    p.add_argument("--json", type=Path, help="write the typed result here")
    return p


def _write_json(path: Path | None, record: RunRecord) -> None:
    if path is not None:
        from kernelgen.fsutil import atomic_write

        atomic_write(path, record.model_dump_json(indent=2))


def _describe(record: RunRecord) -> None:
    for line in record.describe().splitlines():
        if line != "ok":
            print(line)


def accuracy_main(op_dir: Path, argv: list[str] | None = None) -> int:
    from kernelgen.verify.judge.runner import run_accuracy

    p = _parser("accuracy")
    p.add_argument("--seeds", type=int, default=len(DEFAULT_SEEDS), help="seeds per test case")
    p.add_argument("--seed", type=int, default=None, help="draw every input from this seed base (a verdict names its "
                                                          "own: this replays it); default: a hash of the kernel and the spec")
    p.add_argument("-v", "--verbose", action="store_true", help="print every check, not only failures")
    args = p.parse_args(argv)
    try:
        op, device = open_operator(op_dir), resolve_device(args.device)
        record = run_accuracy(op, device, kernel=args.kernel, seeds=args.seeds, base=args.seed,
                              log=lambda line: print(line, flush=True) if args.verbose or line.startswith("FAIL") else None)
    except KernelGenError as e:
        print(f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else ""), file=sys.stderr)
        return 2
    _write_json(args.json, record)
    acc = record.accuracy
    for v in acc.violations if acc else []:
        print(f"VIOLATION {v.code}: {v.message}")
    for note in (acc.skipped if acc else []):
        print(f"NOTE {note}")
    if acc is None:
        _describe(record)
    elif acc.error:
        print(f"ERROR {acc.error}")
    verdict = "PASS" if record.passed else "FAIL"
    print(f"{verdict} {op.name} on {device.kind}: " + (acc.summary() if acc else record.status))
    return 0 if record.passed else 1


def performance_main(op_dir: Path, argv: list[str] | None = None) -> int:
    from kernelgen.verify.judge.runner import run_performance

    p = _parser("performance")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    args = p.parse_args(argv)
    try:
        op, device = open_operator(op_dir), resolve_device(args.device)
        if device.interpreter:
            print("WARNING: " + INTERPRETER_WARNING, flush=True)
        record = run_performance(op, device, kernel=args.kernel, no_compile=args.no_compile, log=lambda s: print(s, flush=True))
    except KernelGenError as e:
        print(f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else ""), file=sys.stderr)
        return 2
    _write_json(args.json, record)
    perf = record.performance
    for v in perf.violations if perf else []:
        print(f"VIOLATION {v.code}: {v.message}")
    if perf is None:
        _describe(record)
    elif perf.error:
        print(f"ERROR {perf.error}")
    g = perf.geomean("speedup_eager") if perf else None
    if g:
        print(f"geomean speedup vs eager: x{g:.3f}" + ("" if perf.measured else " [interpreter: not a measurement]"))
    return 0 if record.passed else 1


# --- pytest: the rendered files' tests ------------------------------------------------------------
class Suite:
    """What the rendered test files share: one judge run per file, its verdict asserted per case.

    The first test to ask runs every planned check of the operator's kernel (in a sandboxed worker);
    each parametrized test then asserts on its own case x dtype, so `pytest -v` shows which one fails
    and why. The integrity check includes the test files themselves: a tampered copy is refused."""

    def __init__(self, test_file: str):
        self.op_dir = Path(test_file).resolve().parent
        self._op: OperatorDir | None = None
        self._device: DeviceInfo | None = None
        self._accuracy: AccuracyResult | None = None
        self._record: RunRecord | None = None

    def _setup(self) -> tuple[OperatorDir, DeviceInfo]:
        if self._op is None:
            self._op = open_operator(self.op_dir)
            self._device = resolve_device(os.environ.get("KERNELGEN_DEVICE", "auto"))
        assert self._device is not None
        return self._op, self._device

    def accuracy(self) -> RunRecord:
        if self._record is None:
            from kernelgen.verify.judge.runner import run_accuracy

            op, device = self._setup()
            self._record = run_accuracy(op, device)
        return self._record

    def check_case(self, case: int, dtype: str) -> None:
        import pytest

        record = self.accuracy()
        acc = record.accuracy
        assert acc is not None, f"no verdict: {record.describe()}"
        mine = [c for c in acc.checks if c.case == case and c.dtype == dtype and not c.variant]
        if not mine and any("bfloat16" in s for s in acc.skipped) and dtype == "bfloat16":
            pytest.skip(next(s for s in acc.skipped if "bfloat16" in s))
        assert not acc.error, acc.error
        assert not acc.violations, "; ".join(f"{v.code}: {v.message}" for v in acc.violations)
        failed = [c for c in mine if not c.passed]
        if failed and not failed[0].decides:  # reported beside the spec's primary dtypes, never failing it
            pytest.xfail("; ".join(f"{c.label}: {c.message}" for c in failed))
        assert mine and not failed, "\n".join(f"{c.label}: {c.message}" for c in failed) or "this case was not checked"

    def check_generated(self) -> None:
        record = self.accuracy()
        acc = record.accuracy
        assert acc is not None, f"no verdict: {record.describe()}"
        failed = [c for c in acc.checks if c.variant and c.decides and not c.passed]
        assert not failed, "\n".join(f"{c.label}: {c.message}" for c in failed)
        assert acc.correct, acc.summary()

    def performance(self, **options: Any) -> RunRecord:
        from kernelgen.verify.judge.runner import run_performance

        op, device = self._setup()
        return run_performance(op, device, **options)


def main(argv: list[str] | None = None) -> int:
    """`python -m kernelgen.harness accuracy|performance OP_DIR [options]`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] not in {"accuracy", "performance"}:
        print("usage: python -m kernelgen.harness accuracy|performance OP_DIR [options]", file=sys.stderr)
        return 2
    fn = accuracy_main if argv[0] == "accuracy" else performance_main
    return fn(Path(argv[1]), argv[2:])


if __name__ == "__main__":
    sys.exit(main())
