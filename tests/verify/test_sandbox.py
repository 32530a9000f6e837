"""The worker's sandbox, attacked from inside a real worker: each hostile snippet runs as a kernel
file's module code when the worker imports it (the static checks live in the judge and are not in
the way here), and reports what it managed through the exception it raises.

These are the issue's attacks on secrets, on later verdicts (tampering) and on the machine (limits).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import kernelgen
from kernelgen.devices import DeviceInfo
from kernelgen.verify.judge.session import WorkerFailure, WorkerSession

CPU = DeviceInfo("cpu", "cpu", interpreter=True)
SITE = next(p for p in sys.path if p.endswith("site-packages"))


@pytest.fixture(autouse=True, params=["forked", "exec"])
def how_workers_start(request, forked_workers):  # noqa: ANN001, ANN201
    """Every attack on both ways a worker starts: forked from the fork server (the KernelGen service's, and
    the tests' default: tests/conftest.py), and as a fresh Python (`--no-service`); the sandbox is applied
    in each after its own start, so each must hold on its own."""
    from kernelgen.verify.judge import session

    if request.param == "exec":
        session.use_launcher(None)
    try:
        yield request.param
    finally:
        session.use_launcher(forked_workers.launch if forked_workers is not None else None)


def attack(code: str, *, timeout_s: float = 60) -> tuple[str, WorkerSession]:
    """Run `code` as a kernel file's module code in a fresh worker; the text of what it raised."""
    worker = WorkerSession(CPU, arena_bytes=1 << 20, request_timeout_s=timeout_s)
    reply = worker.request({"op": "load", "slot": "k", "entry": "op", "filename": "op_triton.py",
                            "source": textwrap.dedent(code)})
    return reply.error, worker


@pytest.fixture
def secret_env(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELGEN_API_KEY", "sk-judge-secret-0123456789abcdef")
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text('api_key = "sk-config-secret-0123456789abcdef"\n')
    monkeypatch.setenv("KERNELGEN_CONFIG_DIR", str(cfg))
    return cfg


def test_secrets_stay_out_of_reach(secret_env):
    code = f"""
    import os
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                env = open(f"/proc/{{pid}}/environ", "rb").read()
                if b"judge-secret" in env:
                    found.append(f"environ of {{pid}}")
            except OSError:
                pass
    if "judge-secret" in str(os.environ):
        found.append("own environment")
    for path in ["{secret_env / 'config.toml'}", os.path.expanduser("~/.bash_history"), "/root/.bash_history"]:
        try:
            found.append(path + ": " + open(path).read())
        except OSError as e:
            pass
    raise RuntimeError("FOUND " + repr(found))
    """
    error, worker = attack(code)
    worker.close()
    assert "FOUND []" in error, error
    assert "judge-secret" not in error and "config-secret" not in error


def test_writes_outside_the_scratch_folder_are_refused(tmp_path):
    pkg = Path(kernelgen.__file__).parent
    code = f"""
    done = []
    for path in ["{tmp_path / 'outside.bin'}", "{SITE}/zz_kernelgen_attack.pth", "{pkg / 'verify' / 'judge' / 'compare.py'}",
                 "/tmp/kernelgen-attack-200mb.bin"]:
        try:
            with open(path, "a") as f:
                f.write("import os  # planted\\n")
            done.append(path)
        except OSError:
            pass
    raise RuntimeError("WROTE " + repr(done))
    """
    before = (pkg / "verify" / "judge" / "compare.py").read_bytes()
    error, worker = attack(code)
    worker.close()
    assert "WROTE []" in error, error
    assert not (tmp_path / "outside.bin").exists() and not Path(SITE, "zz_kernelgen_attack.pth").exists()
    assert (pkg / "verify" / "judge" / "compare.py").read_bytes() == before


def test_a_setsid_daemon_does_not_outlive_the_worker():
    marker = f"1234.{os.getpid()}"  # this process's own: the other start's run of this test may be alive beside it
    error, worker = attack(f"""
    import subprocess
    subprocess.Popen(["sleep", "{marker}"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raise RuntimeError("STARTED")
    """)
    assert "STARTED" in error
    worker.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [ln for ln in subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout.splitlines()
                 if f"sleep {marker}" in ln and not ln.startswith("Z")]
        if not alive:
            break
        time.sleep(0.2)
    assert not alive, alive


def test_no_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        error, worker = attack(f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2)
            raise RuntimeError("CONNECTED")
        except OSError as e:
            raise RuntimeError("REFUSED " + str(e))
        """)
        worker.close()
    finally:
        server.close()
    assert "REFUSED" in error and "CONNECTED" not in error


def test_memory_is_limited_under_the_interpreter():
    error, worker = attack("""
    block = bytearray(9 << 30)  # 9 GiB: beyond the worker's 8 GiB
    raise RuntimeError("ALLOCATED")
    """)
    worker.close()
    assert "MemoryError" in error and "ALLOCATED" not in error


def test_output_is_capped_and_the_worker_still_answers():
    error, worker = attack("""
    import sys
    line = "x" * 1023 + "\\n"
    for _ in range(21 * 1024):  # 21 MiB, printed
        sys.stdout.write(line)
    raise RuntimeError("PRINTED")
    """)
    assert "PRINTED" in error
    text = worker.output()
    worker.close()
    assert len(text) < 40_000 and "bytes not kept" in text


def test_process_count_is_limited_where_a_cgroup_is_available():
    error, worker = attack("""
    import os, time
    n = 0
    try:
        for _ in range(400):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
    except OSError as e:
        raise RuntimeError(f"STOPPED after {n}: {e}")
    raise RuntimeError(f"FORKED {n}")
    """)
    limited = not any("process-count" in m for m in worker.sandbox_missing)
    worker.close()
    if not limited:
        pytest.skip("no writable pids cgroup and running as root: the sandbox reports the limit as missing")
    assert "STOPPED after" in error, error


def test_a_hang_is_a_timeout_and_everything_it_started_dies():
    # a duration of this test's own: the other way of starting workers runs this test at the same time in
    # the other xdist process, and its sleep is alive while it waits for its own timeout
    marker = f"4321.{os.getpid()}"
    worker = WorkerSession(CPU, arena_bytes=1 << 20, request_timeout_s=5)
    with pytest.raises(WorkerFailure) as e:
        worker.request({"op": "load", "slot": "k", "entry": "op", "filename": "op_triton.py", "source": textwrap.dedent(f"""
            import subprocess
            subprocess.Popen(["sleep", "{marker}"])
            while True:
                pass
            """)})
    assert e.value.status == "timeout" and "killed" in e.value.message
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    assert not [ln for ln in ps.splitlines() if f"sleep {marker}" in ln and not ln.startswith("Z")]
    assert not worker.scratch.exists()


@pytest.mark.parametrize("code, expect", [
    ("import os\nos._exit(0)", "exit status 0"),
    ("import ctypes\nctypes.string_at(0)", "signal"),
])
def test_a_dying_worker_is_a_crash_with_its_status(code, expect):
    worker = WorkerSession(CPU, arena_bytes=1 << 20)
    with pytest.raises(WorkerFailure) as e:
        worker.request({"op": "load", "slot": "k", "entry": "op", "filename": "op_triton.py", "source": code})
    assert e.value.status == "crash" and expect in e.value.message, e.value.message


def test_a_forged_reply_is_a_protocol_error_not_a_verdict():
    worker = WorkerSession(CPU, arena_bytes=1 << 20)
    forge = """
    import os, socket, stat
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, (12).to_bytes(4, "big") + b"not json at all")
        except OSError:
            pass
    """
    with pytest.raises(WorkerFailure) as e:
        worker.request({"op": "load", "slot": "k", "entry": "op", "filename": "op_triton.py", "source": textwrap.dedent(forge)})
    assert e.value.status == "error" and "protocol" in e.value.message


def test_the_worker_environment_is_an_allowlist(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.internal:8000/v1")
    monkeypatch.setenv("SOME_HARMLESS_SETTING", "kept?")
    error, worker = attack("""
    import os
    raise RuntimeError("ENV " + " ".join(sorted(os.environ)))
    """)
    worker.close()
    assert "OPENAI_BASE_URL" not in error and "SOME_HARMLESS_SETTING" not in error
    assert "TRITON_CACHE_DIR" in error and "HOME" in error


def test_every_sandbox_feature_is_on_here():
    # This machine (Linux 6.18, Landlock ABI 7, user namespaces) has them all; where a kernel lacks one,
    # the worker says so and every result carries the note.
    worker = WorkerSession(CPU, arena_bytes=1 << 20)
    report = worker.info["sandbox"]
    worker.close()
    enforced = " ".join(report["enforced"])
    if os.environ.get("KERNELGEN_SANDBOX") == "off" or "Landlock" not in enforced:
        pytest.skip(f"sandbox features missing on this machine: {report['missing']}")
    assert "PID namespace" in enforced and "Landlock" in enforced and "PDEATHSIG" in enforced
