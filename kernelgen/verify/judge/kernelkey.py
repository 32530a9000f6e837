"""The key of a kernel's verdicts and caches (kernelgen.verify.judge.judge.KernelSource.sha256): its bytes, and
the bytes of each KernelGen host runtime module it imports. A generated file runs KernelGen's runtime
(kernelgen.runtime.v1) as its host code; the same file under another runtime is other code, so every verdict,
recorded plan and compiled-kernel store keyed on the kernel is keyed on the runtime too. Read from the
installed files, never imported here.
"""

from __future__ import annotations

import functools
import hashlib
import re


@functools.lru_cache(maxsize=256)
def runtime_digests(source: str) -> tuple[tuple[str, str], ...]:
    """(module, sha256 of its file) of every kernelgen.runtime module `source` names in an import."""
    from kernelgen.runtime.inline import module_path

    found = sorted(set(_RUNTIME_IMPORT.findall(source)))
    out = []
    for module in found:
        try:
            out.append((module, hashlib.sha256(module_path(module).read_bytes()).hexdigest()))
        except ValueError:  # no such runtime: the static check refuses the import; the key still differs
            out.append((module, "missing"))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def kernel_key(source: str) -> str:
    h = hashlib.sha256(source.encode("utf-8"))
    for module, digest in runtime_digests(source):
        h.update(f"\0{module} {digest}".encode())
    return h.hexdigest()


# a runtime module named in an import: `from kernelgen.runtime.v1 import ...`, `import kernelgen.runtime.v1 as rt`
_RUNTIME_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+(kernelgen\.runtime\.[A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
