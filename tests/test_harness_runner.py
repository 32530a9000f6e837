"""The isolated runner: a child sees no secrets; a hang is a timeout with its whole process group
killed; a hard crash is a crash with exit status and stderr tail; a forged result is an error, not
an exception in the caller. Tiny scripts stand in for candidates that static checks would miss."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from kernelgen.devices import DeviceInfo
from kernelgen.verify.runner import child_environment, run_isolated

CPU = DeviceInfo("cpu", "cpu", interpreter=True)

# Every script gets `--device cpu --json RESULT` appended, like the rendered harness scripts.
PRELUDE = "import json, os, sys, time\nRESULT = sys.argv[sys.argv.index('--json') + 1]\n"


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "child.py"
    p.write_text(PRELUDE + body, encoding="utf-8")
    return p


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in {"Z", "X"}


def test_child_environment_withholds_secrets(monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "k1")
    monkeypatch.setenv("GITHUB_TOKEN", "t1")
    monkeypatch.setenv("some_secret_value", "s1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm")
    monkeypatch.setenv("HARMLESS_SETTING", "ok")
    env = child_environment(CPU)
    for k in env:
        assert not any(m in k.upper() for m in ("KEY", "TOKEN", "SECRET")), k
    assert "OPENAI_BASE_URL" not in env
    assert env["HARMLESS_SETTING"] == "ok"
    assert env["TRITON_INTERPRET"] == "1"


def test_a_real_child_sees_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-should-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-should-not-leak")
    monkeypatch.setenv("HARMLESS_SETTING", "ok")
    dump = tmp_path / "env.json"
    script = _script(tmp_path, f"json.dump(dict(os.environ), open({str(dump)!r}, 'w'))\nos._exit(0)\n")
    rec = run_isolated("accuracy", script, [], CPU, timeout_s=30)
    assert rec.status == "crash"  # it wrote no result: exit code 0 alone is never trusted
    seen = json.loads(dump.read_text())
    assert seen.get("HARMLESS_SETTING") == "ok"
    leaked = [k for k in seen if any(m in k.upper() for m in ("KEY", "TOKEN", "SECRET"))]
    assert not leaked, leaked
    assert "should-not-leak" not in json.dumps(seen)


def test_hang_is_a_timeout_and_the_whole_process_group_dies(tmp_path):
    pids = tmp_path / "pids"
    script = _script(tmp_path, (
        "import subprocess\n"
        "kid = subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True: time.sleep(1)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{kid.pid}}')\n"
        "while True:\n    pass\n"
    ))
    t0 = time.monotonic()
    rec = run_isolated("accuracy", script, [], CPU, timeout_s=3)
    assert time.monotonic() - t0 < 20
    assert rec.status == "timeout"
    assert "timed out" in rec.describe() and "process group was killed" in rec.describe()
    parent, kid = (int(x) for x in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (_alive(parent) or _alive(kid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(parent) and not _alive(kid)


def test_env_timeout_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGEN_TIMEOUT", "2")
    rec = run_isolated("accuracy", _script(tmp_path, "time.sleep(60)\n"), [], CPU)
    assert rec.status == "timeout" and rec.duration_s < 15


def test_segfault_is_a_crash_with_signal_and_stderr_tail(tmp_path):
    script = _script(tmp_path, "sys.stderr.write('about to die\\n'); sys.stderr.flush()\nimport ctypes\nctypes.string_at(0)\n")
    rec = run_isolated("accuracy", script, [], CPU, timeout_s=30)
    assert rec.status == "crash"
    assert rec.exit_code is not None and rec.exit_code != 0
    assert rec.signal == "SIGSEGV"
    assert "about to die" in rec.stderr_tail
    assert "crashed with exit status" in rec.describe()


def test_os_exit_zero_without_result_is_a_crash(tmp_path):
    rec = run_isolated("accuracy", _script(tmp_path, "print('bye'); os._exit(0)\n"), [], CPU, timeout_s=30)
    assert rec.status == "crash" and rec.exit_code == 0
    assert "without writing a result" in rec.stderr_tail


def test_nonzero_exit_with_traceback_is_a_crash_with_tail(tmp_path):
    rec = run_isolated("accuracy", _script(tmp_path, "raise RuntimeError('boom in the child')\n"), [], CPU, timeout_s=30)
    assert rec.status == "crash" and rec.exit_code == 1
    assert "boom in the child" in rec.stderr_tail


def test_forged_result_is_an_error_not_an_exception(tmp_path):
    script = _script(tmp_path, "open(RESULT, 'w').write('{\"correct\": true}')\nos._exit(0)\n")
    rec = run_isolated("accuracy", script, [], CPU, timeout_s=30)
    assert rec.status == "error"
    assert not rec.passed
    assert "does not validate" in rec.stderr_tail


def test_child_runs_in_its_own_working_directory(tmp_path):
    out = tmp_path / "cwd.txt"
    script = _script(tmp_path, f"open({str(out)!r}, 'w').write(os.getcwd())\nos._exit(3)\n")
    rec = run_isolated("accuracy", script, [], CPU, timeout_s=30)
    assert rec.status == "crash" and rec.exit_code == 3
    cwd = out.read_text()
    assert "kernelgen-accuracy-" in cwd and not Path(cwd).exists()  # removed afterwards
