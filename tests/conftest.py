"""Shared test set-up. Tests run on the CPU: Triton goes through its interpreter, which must be
switched on before any kernel module is imported."""

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELGEN_DEVICE", "cpu")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "operator_specs"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
