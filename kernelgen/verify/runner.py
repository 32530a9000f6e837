"""Running candidate code in isolation: a fresh subprocess, a wall-clock timeout, its own process
group (killed whole on timeout), its own working directory, and an environment without secrets.

The child writes a typed JSON result; the parent validates it (kernelgen.verify.results) and never trusts
an exit code alone: a candidate that calls `os._exit(0)` leaves no result and is a crash.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from kernelgen.devices import DeviceInfo
from kernelgen.errors import HarnessError
from kernelgen.verify.results import AccuracyResult, PerformanceResult, RunRecord

DEFAULT_TIMEOUT_S = {"accuracy": 600.0, "performance": 900.0}
# Any variable whose name contains one of these is withheld from a child (case-insensitive).
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_SECRET_RE = re.compile("|".join(SECRET_MARKERS), re.IGNORECASE)
# Endpoint settings are not secrets but tell a candidate where our LLM lives; withheld too.
_WITHHELD_PREFIXES = ("OPENAI_", "KERNELGEN_API", "KERNELGEN_BASE_URL", "DASHSCOPE_", "DEEPSEEK_", "ANTHROPIC_")


def child_environment(device: DeviceInfo, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not _SECRET_RE.search(k) and not k.upper().startswith(_WITHHELD_PREFIXES)
    }
    # The child imports kernelgen; make the package importable even when it is not installed.
    pkg_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("TRITON_INTERPRET", None)
    env.update(device.child_env())
    env.update(extra or {})
    return env


def _tail(text: str, n: int = 40) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])


def run_isolated(
    kind: Literal["accuracy", "performance"],
    script: Path,
    args: list[str],
    device: DeviceInfo,
    *,
    timeout_s: float | None = None,
    echo=None,  # noqa: ANN001 - optional callable(str) receiving the child's stdout lines
) -> RunRecord:
    """Run `python SCRIPT ARGS --json RESULT` isolated and return what happened, typed."""
    timeout_s = timeout_s or float(os.environ.get("KERNELGEN_TIMEOUT", DEFAULT_TIMEOUT_S[kind]))
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-{kind}-") as work:
        result_path = Path(work) / "result.json"
        cwd = Path(work) / "cwd"
        cwd.mkdir()
        cmd = [sys.executable, str(Path(script).resolve()), *args, "--device", device.kind, "--json", str(result_path)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=child_environment(device), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                # Something outside the group (a process that left it) still holds the pipes:
                # stop reading rather than wait for it.
                for pipe in (proc.stdout, proc.stderr):
                    if pipe:
                        pipe.close()
                proc.kill()
                proc.wait()
                out, err = "", ""
        finally:
            # Whatever happened, nothing the candidate started outlives the run.
            _kill_group(proc.pid)
        duration = time.monotonic() - t0
        if echo is not None:
            for line in out.splitlines():
                echo(line)
        record = RunRecord(kind=kind, status="ok", exit_code=proc.returncode, duration_s=duration,
                           stderr_tail=_tail(err or out))
        if timed_out:
            record.status = "timeout"
            return record
        if proc.returncode is not None and proc.returncode < 0:
            try:
                record.signal = signal.Signals(-proc.returncode).name
            except ValueError:
                record.signal = f"signal {-proc.returncode}"
        try:
            payload = result_path.read_text(encoding="utf-8") if result_path.is_file() else None
        except (OSError, UnicodeDecodeError):
            payload = "<unreadable>"
        if payload is None:
            record.status = "crash"
            why = f"the process exited with status {proc.returncode}" + (f" ({record.signal})" if record.signal else "") + " without writing a result"
            record.stderr_tail = f"{record.stderr_tail}\n{why}".strip()
            return record
        try:
            if kind == "accuracy":
                record.accuracy = AccuracyResult.model_validate_json(payload)
            else:
                record.performance = PerformanceResult.model_validate_json(payload)
        except ValidationError as e:
            # The candidate shares the child's process and could have written this file itself:
            # an unreadable result is a failed run, not a reason to stop the caller.
            record.status = "error"
            record.stderr_tail = _tail(f"the {kind} child wrote a result that does not validate: {e}\n{record.stderr_tail}")
            return record
        if proc.returncode != 0:
            record.status = "failed"
        return record


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _trusted_script(op, kind: str) -> Path:  # noqa: ANN001 - op: OperatorDir
    """The op's rendered test script, refused if it no longer matches what KernelGen renders:
    these files decide correctness, so an edited one is not run."""
    from kernelgen.opdir import render_trusted

    path = op.file(kind)
    expected = render_trusted(op.spec)[kind]
    if not path.is_file() or path.read_text(encoding="utf-8") != expected:
        raise HarnessError(
            f"{path} is missing or differs from what KernelGen renders; it decides {kind}, so it is not run",
            hint=f"restore it with `kernelgen new {op.path / 'spec.yaml'} --out {op.path.parent} --force` (old files are kept)",
        )
    return path


def run_accuracy(op, device: DeviceInfo, *, kernel: Path | None = None, seeds: int | None = None,
                 timeout_s: float | None = None, echo=None) -> RunRecord:  # noqa: ANN001
    args = ["--kernel", str(Path(kernel).resolve())] if kernel else []
    if seeds:
        args += ["--seeds", str(seeds)]
    return run_isolated("accuracy", _trusted_script(op, "accuracy"), args, device, timeout_s=timeout_s, echo=echo)


def run_performance(op, device: DeviceInfo, *, kernel: Path | None = None, compare: Path | None = None,
                    no_compile: bool = False, no_eager: bool = False, timeout_s: float | None = None, echo=None) -> RunRecord:  # noqa: ANN001
    args = ["--kernel", str(Path(kernel).resolve())] if kernel else []
    if compare:
        args += ["--compare", str(Path(compare).resolve())]
    if no_compile:
        args.append("--no-compile")
    if no_eager:
        args.append("--no-eager")
    return run_isolated("performance", _trusted_script(op, "performance"), args, device, timeout_s=timeout_s, echo=echo)
