"""The warm KernelGen service, through the command line: the first command starts it and says so, the
second uses it and gets the same worker back for the same kernel file (never for another file), a
hostile kernel is still caught, the verdicts are the ones `--no-service` gives, `--status` and
`--stop` work, and a stale socket, a dead service or a service with another key is replaced, never
trusted. One service serves the first tests of the module; each test that breaks a service starts
its own in a runtime folder of its own. conftest.py stops every one at the end of the session."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from tests.support.broadcast import make_op_dir
from tests.support.judging import ADVERSARIAL, HONEST, expectation
from tests.support.paths import REPO
from tests.support.procs import alive, gone

pytestmark = pytest.mark.slow
WARM = re.compile(r"warm worker pid (\d+): broadcast, kernel ([0-9a-f]{12})")
REPLAYS = re.compile(r"warm worker pid (\d+): broadcast \(replays\), kernel ([0-9a-f]{12})")


def _runtime(name: str) -> Path:
    """A private runtime folder under the session's (conftest sweeps it at the end)."""
    path = Path(os.environ["KERNELGEN_RUNTIME_DIR"]) / name
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _env(runtime: Path, **extra: str | None) -> dict[str, str | None]:
    return {"KERNELGEN_NO_SERVICE": None, "KERNELGEN_RUNTIME_DIR": str(runtime), "KERNELGEN_TIMEOUT": "120",
            "COLUMNS": "400", **extra}


def kg(env: dict, *args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, " ".join((result.output or "").split()), time.monotonic() - started


def warm_workers(env: dict, pattern: re.Pattern[str] = WARM) -> dict[str, int]:
    """kernel sha256 prefix -> pid of the worker the service keeps for it (`REPLAYS`: its replay worker)."""
    code, text, _ = kg(env, "serve", "--status")
    assert code == 0, text
    return {sha: int(pid) for pid, sha in pattern.findall(text)}


def _socket_for(env: dict) -> Path:
    """The socket path a command run with `env` looks for its service at."""
    from kernelgen.verify.judge.service.place import service_key, socket_path

    saved = dict(os.environ)
    try:
        for k, v in env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        return socket_path("cpu", service_key("cpu"))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _service_pid(env: dict) -> int:
    code, text, _ = kg(env, "serve", "--status")
    found = re.search(r"cpu: pid (\d+)", text)
    assert code == 0 and found, text
    return int(found.group(1))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One operator folder and one service for the module's first tests; stopped at the end."""
    root = tmp_path_factory.mktemp("served")
    op = make_op_dir(root, HONEST)
    other = root / "other_kernel.py"
    other.write_text(HONEST.read_text() + "\n# the same kernel, another file: other bytes\n")
    env = _env(_runtime("served"))
    yield op, other, env
    code, text, _ = kg(env, "serve", "--stop")
    assert code == 0, text


def test_first_command_starts_the_service_the_second_reuses_its_worker(served):
    op, _, env = served
    code, first, t_first = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0 and "PASS" in first, first
    assert "started the KernelGen service for cpu" in first
    warm = warm_workers(env)
    assert len(warm) == 1, warm
    (sha, pid), = warm.items()
    replays = warm_workers(env, REPLAYS)  # the judge's replay worker is kept beside it, for the same kernel
    assert list(replays) == [sha] and replays[sha] != pid, replays

    code, second, t_second = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0 and "PASS" in second, second
    assert "started the KernelGen service" not in second
    assert warm_workers(env) == {sha: pid}  # the same process served the same file again
    assert warm_workers(env, REPLAYS) == replays  # ...and the same replay worker replayed it
    assert t_second < t_first, (t_first, t_second)  # no torch import, no worker start, a warm kernel


def test_the_service_gives_the_verdict_the_command_gives_alone(served):
    op, _, env = served
    code, remote, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    code_here, here, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1", "--no-service")
    count = re.compile(r"PASS — (\d+)/(\d+) checks passed")
    assert code == code_here == 0
    assert count.search(remote).groups() == count.search(here).groups(), (remote, here)
    jobs_before = re.search(r"(\d+) command\(s\)", kg(env, "serve", "--status")[1]).group(1)
    code, _, _ = kg({**env, "KERNELGEN_NO_SERVICE": "1"}, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0
    assert re.search(r"(\d+) command\(s\)", kg(env, "serve", "--status")[1]).group(1) == jobs_before


def test_another_kernel_file_never_gets_that_worker(served):
    op, other, env = served
    code, text, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0, text
    before = warm_workers(env)
    code, text, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1", "--kernel", str(other))
    assert code == 0 and "PASS" in text, text
    after = warm_workers(env)
    assert len(after) == 2 and set(before.items()) <= set(after.items()), (before, after)
    assert len(set(after.values())) == 2  # two files, two processes


@pytest.mark.parametrize("hostile", ["half_written", "dtype_cast"])
def test_a_hostile_kernel_is_caught_through_the_service(served, hostile):
    op, _, env = served
    path = ADVERSARIAL / f"{hostile}.py"
    before = warm_workers(env)
    code, text, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1", "--kernel", str(path))
    assert code != 0 and "PASS —" not in text, text
    assert expectation(path) in text, text
    assert warm_workers(env) == before  # its worker was not kept for anyone


def test_new_checks_round_0_in_the_service(served, tmp_path):
    import yaml

    from tests.support.broadcast import SMALL_BROADCAST

    _, _, env = served
    spec = tmp_path / "broadcast.yaml"
    spec.write_text(yaml.safe_dump(SMALL_BROADCAST, sort_keys=False))
    jobs = lambda: int(re.search(r"(\d+) command\(s\)", kg(env, "serve", "--status")[1]).group(1))  # noqa: E731
    before = jobs()
    code, text, _ = kg(env, "new", str(spec), "--out", str(tmp_path / "out"), "--backend", "offline", "--no-bench",
                       "--device", "cpu")
    assert code == 0 and "PASS" in text, text
    assert "checking accuracy of rounds/round_0/broadcast_triton.py on cpu" in text
    assert (tmp_path / "out" / "broadcast" / "state.json").is_file()
    assert jobs() == before + 1


def test_a_command_that_goes_away_takes_its_work_with_it(served):
    """Ctrl-C (here: the command killed) while the service runs a kernel that never returns: the
    service kills that kernel's worker at once and is free for the next command."""
    import subprocess

    op, _, env = served
    run_env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    proc = subprocess.Popen([sys.executable, "-m", "kernelgen", "test", str(op), "--device", "cpu", "--seeds", "1",
                             "--kernel", str(ADVERSARIAL / "hang.py")], env=run_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while "running test" not in kg(env, "serve", "--status")[1]:
        assert time.monotonic() < deadline and proc.poll() is None, "the command never reached the service"
        time.sleep(0.2)
    time.sleep(1.0)  # into the kernel's first call
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30  # well under the 120 s the hanging call would otherwise get
    while "running test" in kg(env, "serve", "--status")[1]:
        assert time.monotonic() < deadline, "the service kept running the abandoned command"
        time.sleep(0.2)
    code, text, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0 and "PASS" in text and "busy" not in text, text


def test_status_and_stop(tmp_path):
    env = _env(_runtime("status"))
    code, text, _ = kg(env, "serve", "--status")
    assert code == 0 and "no KernelGen service is running" in text
    code, text, _ = kg(env, "serve", "--device", "cpu", "--idle", "5")
    assert code == 0 and "started the KernelGen service for cpu" in text and "stops after 5 min" in text, text
    pid = _service_pid(env)
    code, text, _ = kg(env, "serve", "--device", "cpu")
    assert code == 0 and "already running" in text and f"pid {pid}" in text, text
    code, text, _ = kg(env, "serve", "--stop")
    assert code == 0 and "stopped" in text, text
    assert gone(pid, 30)
    assert not list(Path(env["KERNELGEN_RUNTIME_DIR"]).glob("*.sock"))


def _tree_copy(tmp_path: Path) -> Path:
    """Another installation of KernelGen: a copy of this tree, run from its own folder."""
    repo = REPO
    tree = tmp_path / "tree"
    shutil.copytree(repo / "kernelgen", tree / "kernelgen", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(repo / "templates", tree / "templates")
    return tree


def test_stop_and_status_act_on_this_installation_and_know_a_batch_workers_service(tmp_path):
    """Two services in one runtime folder: another installation's (a copy of the tree) and this one's,
    started as a batch worker's steps start theirs (its own variables). `--status` calls the second this
    installation's, a batch worker's, with its GPU memory; `--stop` stops it and leaves the other
    installation's running; `--stop --all` stops that too."""
    import subprocess

    runtime = _runtime("installations")
    env = _env(runtime)
    run_env = {k: v for k, v in {**os.environ, **env, "PYTHONPATH": str(_tree_copy(tmp_path))}.items() if v is not None}
    other = subprocess.run([sys.executable, "-m", "kernelgen", "serve", "--device", "cpu"], env=run_env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert other.returncode == 0, other.stdout + other.stderr
    other_pid = int(re.search(r"pid (\d+)", other.stdout).group(1))
    batch_env = _env(runtime, KERNELGEN_BATCH_WORKER="cpu#0", KERNELGEN_LEND_DIR=str(tmp_path / "out" / "_batch" / "lend"))
    code, text, _ = kg(batch_env, "serve", "--device", "cpu")
    assert code == 0 and "started" in text, text
    mine = int(re.search(r"pid (\d+)", text).group(1))

    code, text, _ = kg(env, "serve", "--status")
    assert code == 0 and f"cpu: pid {mine}," in text and f"pid {other_pid}," not in text, text
    assert "[this installation, another environment (a `kernelgen batch` worker's): KERNELGEN_BATCH_WORKER=cpu#0" in text
    assert "GPU memory: n/a on the CPU" in text and "another KernelGen installation or Python environment: " \
        "`kernelgen serve --status --all` shows them" in text, text
    code, text, _ = kg(env, "serve", "--status", "--all")
    assert f"cpu: pid {other_pid}," in text and f"[another KernelGen installation or Python environment: {tmp_path / 'tree'}" in text

    code, text, _ = kg(env, "serve", "--stop")
    assert code == 0 and "stopped" in text and "1 service(s) of another KernelGen installation or Python environment left " \
        "running" in text, text
    assert gone(mine, 30) and alive(other_pid)
    code, text, _ = kg(env, "serve", "--stop", "--all")
    assert code == 0 and "stopped" in text, text
    assert gone(other_pid, 30)


def test_a_kept_worker_is_released_after_its_idle_time(tmp_path):
    """A kept worker holds a device context: it goes after KERNELGEN_SERVICE_WARM_IDLE seconds (90 by
    default) without a command on its kernel, while the service itself stays."""
    env = _env(_runtime("warm-idle"), KERNELGEN_SERVICE_WARM_IDLE="3")
    op = make_op_dir(tmp_path, HONEST)
    code, text, _ = kg(env, "test", str(op), "--device", "cpu", "--seeds", "1")
    assert code == 0 and "PASS" in text, text
    (pid,) = warm_workers(env).values()
    (replays,) = warm_workers(env, REPLAYS).values()
    assert gone(pid, 60) and warm_workers(env) == {}
    assert gone(replays, 10) and warm_workers(env, REPLAYS) == {}
    service = _service_pid(env)
    assert alive(service)
    assert kg(env, "serve", "--stop")[0] == 0


def test_it_idles_out(tmp_path):
    env = _env(_runtime("idle"), KERNELGEN_SERVICE_IDLE="3")  # seconds
    code, text, _ = kg(env, "serve", "--device", "cpu")
    assert code == 0 and "stops after 3 s" in text, text
    pid = _service_pid(env)
    assert gone(pid, 60)
    assert not list(Path(env["KERNELGEN_RUNTIME_DIR"]).glob("*.sock"))


def test_a_stale_socket_and_a_dead_service_are_replaced(tmp_path):
    runtime = _runtime("stale")
    env = _env(runtime)
    path = _socket_for(env)
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(path))  # a socket file nobody listens on, as a crashed service leaves it
    left.close()
    code, text, _ = kg(env, "serve", "--device", "cpu")
    assert code == 0 and "started the KernelGen service" in text, text
    first = _service_pid(env)
    os.kill(first, signal.SIGKILL)  # a dead service: its socket stays behind
    assert gone(first, 30) and path.exists()
    code, text, _ = kg(env, "serve", "--device", "cpu")
    assert code == 0 and "started the KernelGen service" in text, text
    assert _service_pid(env) != first
    assert kg(env, "serve", "--stop")[0] == 0


def test_a_service_with_another_key_is_retired_not_used(tmp_path):
    """A service started under another environment (or another installation: the tool's hash is part
    of the same key) found at this command's socket path is asked to stop; a new one takes its place."""
    runtime = _runtime("key")
    other_env = _env(runtime, KERNELGEN_TF32="1")  # a setting that changes verdicts: part of the key
    env = _env(runtime)
    code, text, _ = kg(other_env, "serve", "--device", "cpu")
    assert code == 0, text
    old = _service_pid(other_env)
    (sock,) = runtime.glob("*.sock")
    code, text, _ = kg(env, "serve", "--status")
    assert "[this installation, another environment: KERNELGEN_TF32=1]" in text, text
    mine = _socket_for(env)
    os.replace(sock, mine)  # where this command looks: the old service answers there with its own key
    code, text, _ = kg(env, "serve", "--device", "cpu")
    assert code == 0 and "started the KernelGen service" in text, text
    assert gone(old, 30)
    assert _service_pid(env) != old
    assert kg(env, "serve", "--stop")[0] == 0


def test_a_service_refuses_work_once_its_files_changed(tmp_path):
    """A copy of the tool runs a service; a file of that copy changes: the service refuses the next
    command (it runs the old code) and stops, and the command does the work itself."""
    tree = _tree_copy(tmp_path)
    runtime = _runtime("changed")
    env = {**_env(runtime), "PYTHONPATH": str(tree)}
    import subprocess
    import sys as _sys

    run = lambda *a: subprocess.run([_sys.executable, "-m", "kernelgen", *a], env={k: v for k, v in {**os.environ, **env}.items() if v is not None},  # noqa: E731
                                    cwd=tmp_path, capture_output=True, text=True, timeout=600)
    op = make_op_dir(tmp_path, HONEST)
    started = run("serve", "--device", "cpu")
    assert started.returncode == 0, started.stderr
    (sock,) = runtime.glob("*.sock")
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))
    with open(tree / "kernelgen" / "errors.py", "a") as f:
        f.write("\n# changed after the service started\n")
    # an old client (the key it knew) asks the old service: refused, and the service stops
    from kernelgen.serve.client import Handle, run as run_job
    from kernelgen.verify.judge.service.wire import AccuracyJob, JobRequest

    hello_key = _key_of(sock)
    notes: list[str] = []
    done = run_job(Handle(sock, hello_key, "cpu"), JobRequest(device="cpu", job=AccuracyJob(op_dir=str(op), seeds=1)),
                   lambda s: None, lambda s: None, notes.append)
    assert done is None and any("files changed" in n for n in notes), notes
    assert gone(pid, 60)


def _key_of(path: Path) -> str:
    from kernelgen.verify.judge.service.wire import Hello, recv_answer

    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(path))
        hello = recv_answer(s)
    assert isinstance(hello, Hello)
    return hello.key
