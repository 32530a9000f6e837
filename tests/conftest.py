"""Shared test set-up. Tests run on the CPU: Triton goes through its interpreter, which must be
switched on before any kernel module is imported."""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELGEN_DEVICE", "cpu")
# Caches (baseline timings, compiled kernels) go to a folder of this run's own, not the user's.
os.environ.setdefault("KERNELGEN_CACHE_DIR", tempfile.mkdtemp(prefix="kernelgen-test-cache-"))

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "operator_specs"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
