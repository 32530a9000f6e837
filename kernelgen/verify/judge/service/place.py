"""Where a KernelGen service lives, and what it answers to.

A service serves one user, one device and one installation: its socket is in the user's private
runtime folder (`$KERNELGEN_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/kernelgen`, else
`/tmp/kernelgen-<uid>`; mode 0700, owned by the user, or it is not used at all), named by the device
and by its key — a hash of every file of the installed tool (kernelgen.verify.judge.integrity), the
Python that runs it, the device asked for and the environment that can change a verdict or a
timing (KERNELGEN_*, TRITON_*, CUDA_*, the import path...). A client computes the key of what it
would run itself; a service whose key differs is never used. Nothing secret is part of it, and a
service never gets a variable whose name looks like a credential.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path

from kernelgen.verify.judge.scrub import _SECRET_NAME

# Settings of the service itself: they say where and how long it runs, never what it decides.
CONTROL_VARS = frozenset({"KERNELGEN_NO_SERVICE", "KERNELGEN_SERVICE_IDLE", "KERNELGEN_RUNTIME_DIR",
                          "KERNELGEN_SERVICE_WORKERS", "KERNELGEN_SERVICE_WARM_IDLE"})
_PREFIXES = ("KERNELGEN_", "TRITON_", "TORCH", "PYTORCH_", "CUDA", "HIP_", "ROCR_", "ROCM", "ASCEND_", "NVIDIA_",
             "NCCL_", "NVSHMEM_", "OMP_", "MKL_", "OPENBLAS_", "LC_")
_NAMES = frozenset({"PATH", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "HOME", "XDG_CACHE_HOME",
                    "XDG_CONFIG_HOME", "TMPDIR", "LANG", "TZ"})
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes with its terminator


class PlaceError(Exception):
    """No private runtime folder, or a socket path too long: the command runs in its own process."""


def service_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a service runs with, and is keyed on: those that can change what the judge does."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items())
            if (k in _NAMES or k.startswith(_PREFIXES)) and k not in CONTROL_VARS and not _SECRET_NAME.search(k)}


def tool_digest() -> str:
    """One hash of every file of the installed tool, read now (not the integrity module's cached copy:
    a long-lived service must see a file changed since it started)."""
    from kernelgen.verify.judge.integrity import tool_files

    return hashlib.sha256(json.dumps(tool_files.__wrapped__(), sort_keys=True).encode()).hexdigest()


def installation() -> tuple[str, str]:
    """The installation this process runs: the folder its kernelgen package is in (a checkout, or
    site-packages) and its Python environment (sys.prefix: a virtual environment's own folder).
    `kernelgen serve --stop` and `--status` act on this installation's services unless told `--all`."""
    import kernelgen

    return str(Path(kernelgen.__file__).resolve().parent.parent), os.path.realpath(sys.prefix)


def device_kind(choice: str, environ: dict[str, str] | None = None) -> str:
    """The device `choice` most likely resolves to, without importing torch (auto: a GPU where the
    NVIDIA or ROCm driver's device node exists). The service resolves it for real."""
    env = os.environ if environ is None else environ
    kind = env.get("KERNELGEN_DEVICE", "auto") if choice == "auto" else choice
    if kind == "auto":
        kind = "cuda" if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd") else "cpu"
    return kind


def service_key(choice: str, environ: dict[str, str] | None = None, *, digest: str | None = None) -> str:
    payload = {"tool": digest or tool_digest(), "python": os.path.realpath(sys.executable),
               "device": device_kind(choice, environ), "env": service_env(environ)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def runtime_dir() -> Path:
    """The user's private runtime folder, made 0700 if missing; PlaceError when it is not private."""
    given = os.environ.get("KERNELGEN_RUNTIME_DIR")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if given:
        path = Path(given)
    elif xdg and os.path.isdir(xdg):
        path = Path(xdg) / "kernelgen"
    else:
        path = Path(tempfile.gettempdir()) / f"kernelgen-{os.getuid()}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise PlaceError(f"cannot make the runtime folder {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PlaceError(f"{path} is not a private folder of this user (owner uid {st.st_uid}, mode "
                         f"{stat.S_IMODE(st.st_mode):o}); no service socket is kept or trusted there")
    return path


def socket_path(choice: str, key: str) -> Path:
    path = runtime_dir() / f"{device_kind(choice)}-{key[:20]}.sock"
    if len(str(path)) > SOCKET_PATH_MAX:
        raise PlaceError(f"the socket path {path} is longer than a Unix socket allows ({SOCKET_PATH_MAX} bytes)")
    return path
