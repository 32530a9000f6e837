"""The judge run on a kernel file: the hostile kernels of tests/verify/adversarial/ (each with the verdict its
`# EXPECT:` header names) and the honest one, `kernelgen test` through the CLI, and the harness in a child
process as the rendered scripts run it (optionally with the static checks off, to hold the run-time
defences on their own)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from tests.support.paths import TESTS

ADVERSARIAL = TESTS / "verify" / "adversarial"
HONEST = ADVERSARIAL / "honest.py"


def expectation(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# EXPECT: "), f"{path.name} has no '# EXPECT: ...' header"
    return first[len("# EXPECT: "):].strip()


def run_test_cli(op: Path, monkeypatch: pytest.MonkeyPatch, timeout_s: int = 40, seeds: int = 3) -> tuple[int, str]:
    monkeypatch.setenv("KERNELGEN_TIMEOUT", str(timeout_s))
    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, ["test", str(op), "--device", "cpu", "--seeds", str(seeds)])
    text = " ".join((result.output or "").split())  # rich wraps lines; compare on normalized spaces
    return result.exit_code, text


def run_harness(kind: str, op: Path, *extra: str, bypass_static: bool = False) -> subprocess.CompletedProcess:
    """Run the harness in a child directly (as the rendered scripts do), optionally with the static
    checks switched off, to prove the runtime defences hold on their own."""
    code = (
        "import sys; from pathlib import Path; import kernelgen.harness as h; import kernelgen.verify.judge.judge as j\n"
        + ("j.check_source = lambda *a, **k: []\n" if bypass_static else "")
        + f"sys.exit(h.main([{kind!r}, {str(op)!r}, '--device', 'cpu', *{list(extra)!r}]))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
