"""The key of a kernel's verdicts and caches (kernelgen.verify.judge.kernelkey): its bytes and the host runtime
it imports, so the same bytes under another runtime are judged again, and the judge records which runtime."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kernelgen.runtime import inline
from kernelgen.verify.judge import kernelkey
from kernelgen.verify.judge.judge import KernelSource

SNAPSHOT = (Path(__file__).resolve().parents[1] / "offline" / "snapshots" / "pointwise_broadcast.py").read_text()


@pytest.fixture(autouse=True)
def _fresh_keys():
    kernelkey.runtime_digests.cache_clear()
    kernelkey.kernel_key.cache_clear()
    yield
    kernelkey.runtime_digests.cache_clear()
    kernelkey.kernel_key.cache_clear()


def test_a_file_without_the_runtime_is_keyed_on_its_bytes_alone():
    source = "import torch\n\ndef f(x):\n    return x\n"
    assert KernelSource(source, "f.py").sha256 == hashlib.sha256(source.encode()).hexdigest()
    assert KernelSource(source, "f.py").runtime == []


def test_a_generated_file_is_keyed_on_the_runtime_it_imports_too(monkeypatch, tmp_path):
    kernel = KernelSource(SNAPSHOT, "broadcast_triton.py", "offline")
    v1 = inline.module_path("kernelgen.runtime.v1")
    before, recorded = kernel.sha256, kernel.runtime
    assert before != hashlib.sha256(SNAPSHOT.encode()).hexdigest()
    assert f"kernelgen.runtime.v1 {hashlib.sha256(v1.read_bytes()).hexdigest()}" in recorded
    edited = tmp_path / "v1.py"
    edited.write_bytes(v1.read_bytes() + b"\n# an upgrade that changed the runtime\n")
    real = inline.module_path
    monkeypatch.setattr(inline, "module_path", lambda m: edited if m == "kernelgen.runtime.v1" else real(m))
    kernelkey.runtime_digests.cache_clear()
    kernelkey.kernel_key.cache_clear()
    assert kernel.sha256 != before  # the same bytes under another runtime: judged again, cached apart

