"""Shared test set-up. Tests run on the CPU: Triton goes through its interpreter, which must be
switched on before any kernel module is imported."""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELGEN_DEVICE", "cpu")
# Torch's CPU threads: each of README's `-n 2` workers gets its share of the cores (one each on 2 cores), and
# so does every process a test starts (they inherit it; the judge's own workers take one on the interpreter).
# Two workers of 2 OpenMP threads each on 2 cores made every parallel torch op of the judge's comparison wait
# for a descheduled thread: in the conv e2e (tests/llm/test_kernelbench_e2e.py) torch.isfinite took 15 ms a
# call on 98k elements, 62 s in all, and the judge's process 78 s of CPU where one thread takes 16 s.
# Only in an xdist worker (the controller's environment is what the workers start from); one the user set is kept.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))
# Caches (baseline timings, compiled kernels) go to a folder of this run's own, not the user's.
os.environ.setdefault("KERNELGEN_CACHE_DIR", tempfile.mkdtemp(prefix="kernelgen-test-cache-"))
# Commands judge in their own process, as they always could: a test of the KernelGen service starts
# one of its own, in a runtime folder of its own, and stops it (tests/serve/test_service.py). No service
# outlives the session, and none from a user's shell is ever used by a test.
os.environ["KERNELGEN_NO_SERVICE"] = "1"
os.environ["KERNELGEN_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="kernelgen-test-run-")

import pytest  # noqa: E402

from tests.support.paths import REPO  # noqa: E402


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session", autouse=True)
def no_service_outlives_the_session():
    """Every KernelGen service a test started (all live under this session's runtime folder) is stopped
    at the end, and any process still naming that folder is killed: CI starts from nothing."""
    yield
    import signal

    root = os.environ["KERNELGEN_RUNTIME_DIR"]
    from kernelgen.serve.client import _ask
    from kernelgen.verify.judge.service.wire import StopRequest

    for sock in Path(root).rglob("*.sock"):
        _ask(sock, StopRequest())
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and root.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@pytest.fixture(scope="session", autouse=True)
def forked_workers():
    """The judge's workers forked from one fork server per test process, as the KernelGen service forks
    them for every command a user runs (kernelgen.verify.judge.forkserver), not a fresh Python each: every
    worker otherwise imports torch and Triton anew, ~3 s of CPU, several per `kernelgen new` (the judge's
    verdict tests: 143 -> 86 s). Commands a test runs as a subprocess (`python -m kernelgen ...`: the
    batch, lifetime, interrupt tests) still start theirs fresh, as `--no-service` does, and the sandbox's
    attacks run both ways (tests/verify/test_sandbox.py)."""
    from kernelgen.devices import DeviceInfo
    from kernelgen.verify.judge import session
    from kernelgen.verify.judge.forkserver import ForkServer

    try:
        forks = ForkServer(DeviceInfo("cpu", "cpu", interpreter=True))
    except OSError as e:  # as the service does: every worker then starts fresh (slower, the same verdicts)
        import warnings

        warnings.warn(f"no fork server for the judge's workers ({e}); each starts as a fresh Python")
        yield None
        return
    session.use_launcher(forks.launch)
    yield forks
    session.use_launcher(None)
    forks.close()


# What a developer's shell may set for the LLM path; the `llm_env` fixture clears every one.
LLM_ENV_PREFIXES = ("OPENAI_", "KERNELGEN_MODEL", "KERNELGEN_BASE_URL", "KERNELGEN_API_KEY", "KERNELGEN_TEMPERATURE",
                    "KERNELGEN_LLM_TIMEOUT", "KERNELGEN_MAX_RETRIES", "KERNELGEN_MAX_TOKENS", "KERNELGEN_REPAIRS",
                    "KERNELGEN_CONFIG_DIR", "KERNELGEN_BACKEND")


@pytest.fixture
def llm_env(monkeypatch, tmp_path):  # noqa: ANN001, ANN201
    """No LLM settings from the developer's machine: env cleared, config dir empty and private."""
    for k in list(os.environ):
        if k.startswith(LLM_ENV_PREFIXES):
            monkeypatch.delenv(k, raising=False)
    cfg = tmp_path / "config"
    cfg.mkdir()
    monkeypatch.setenv("KERNELGEN_CONFIG_DIR", str(cfg))
    return cfg


_SHARED_SCOPES = ("class", "module", "package")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """For `-n 2 --dist loadgroup` (README's command): the tests that share a module-scoped fixture in one
    group, so that it is built once (tests/support/groups.py), and the modules that hold a slow test first, so
    that the longest tests start early and the last minutes are the many short ones on both workers (a slow
    test handed out last leaves one worker idle for its whole length). Each module keeps its own order."""
    from tests.support.groups import shared_fixture_group

    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        shared = [name for name, defs in info.name2fixturedefs.items() if defs and defs[-1].scope in _SHARED_SCOPES]
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared_fixture_group(item.module.__name__, shared)))
    slow_files = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_files)  # stable: each module's order kept
