"""`bench`'s torch.compile baseline, started beside the kernel's own start.

The first torch.compile of a process imports torch._dynamo and Inductor (3.4 s on an H200, issue 32;
5 s on a loaded 2-core CPU machine) before it compiles anything. While that import runs in a thread,
the judge's main thread starts the kernel's worker and has it import the kernel — time it spends
waiting on a socket, so the two overlap instead of adding up. The thread has finished before the
first timing request: the judge's own clock bounds every timing (kernelgen.verify.judge.wallclock),
and a thread holding the interpreter lock meanwhile would stretch that clock.

Nothing is imported when no compile baseline will be timed: `--no-compile`, the CPU interpreter, or
every case's compile timing already in the baseline cache or being timed ahead by another process.
"""

from __future__ import annotations

import threading

from kernelgen.nodynamo import real_dynamo
from kernelgen.verify.judge.judge import Judge, KernelSource, LoadError, static_problems
from kernelgen.verify.judge.baselinetimes import baseline_cache
from kernelgen.verify.judge.performance import timed_cases
from kernelgen.verify.judge.session import WorkerFailure


def compile_needed(judge: Judge, *, with_compile: bool, fresh: bool) -> bool:
    """Whether timing this operator will compile its reference (a case x dtype missing from the cache)."""
    import sys

    if not with_compile or judge.device.interpreter or "torch._inductor" in sys.modules:
        return False
    cache = baseline_cache(judge, fresh=fresh)
    if cache is None or fresh:
        return True
    cases, dtypes = timed_cases(judge)
    # an entry another process is timing now (kernelgen.verify.judge.ahead) is waited for, not compiled here
    return any(cache.get("compile", case, dtype) is None and not cache.claimed("compile", case, dtype)
               for case in cases for dtype in dtypes)


def _import_compiler() -> None:
    try:
        real_dynamo()
        import torch._inductor  # noqa: F401
    except Exception:  # noqa: BLE001 - torch.compile reports its own failure when the baseline is timed
        pass


def load_beside_compiler(judge: Judge, kernel: KernelSource) -> None:
    """Import the compiler in a thread while `kernel` is loaded into its worker; both done on return.
    A kernel the static checks refuse is not loaded (nothing of it runs before they pass); a load
    that fails is left for the timing to report, as it would without this."""
    thread = threading.Thread(target=_import_compiler, name="compiler import", daemon=True)
    thread.start()
    try:
        if not static_problems(judge.spec, kernel):
            judge.load(kernel)
    except (LoadError, WorkerFailure):
        pass
    finally:
        thread.join()
