"""The worker's sandbox, applied by the worker's own trusted bootstrap before any candidate is imported.

What it does (each step degrades to a plain note where the kernel lacks the feature):
- dies with the judge (PR_SET_PDEATHSIG), and runs as PID 1 of its own PID namespace (in a user
  namespace), so every process a candidate starts — a `setsid` daemon included — is killed when the
  worker ends; without namespaces, a child subreaper kills what it can find;
- Landlock (Linux >= 5.13): reads only where Python, the installed packages, the system and the
  device files live (never $HOME, the user's config, the operator folder or other processes'
  /proc entries); writes only into its scratch folder (the Triton cache points there); no TCP;
  no signals to processes outside the sandbox (ABI >= 6);
- resource limits: file size, core dumps, processes (RLIMIT_NPROC binds non-root users only; a pids
  cgroup is used where one is writable), address space under the CPU interpreter (CUDA reserves
  more virtual memory than any sane limit, so GPU workers get a memory cgroup where writable).
Captured output is capped by the judge, which reads it (kernelgen.verify.judge.session).
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal
import struct
from pathlib import Path

from kernelgen.verify.policy import DEFAULT_PROCESS_HEADROOM, SandboxPolicy, SandboxReport

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on x86-64 and arm64.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_ONLY = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR

_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 1, 38, 36
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNS = 0x10000000, 0x20000000, 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18

# Top-level system folders a worker reads (never /root, /home, /tmp, /work, /run, /var, /srv, /mnt).
SYSTEM_READ = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/opt", "/etc", "/proc", "/sys")
# Device nodes a worker may open read-write: the null family, randomness, and accelerators
# (NVIDIA, AMD ROCm and DRM render nodes, Ascend). Never block devices or /dev/mem.
DEVICE_PREFIXES = ("null", "zero", "full", "random", "urandom", "nvidia", "kfd", "davinci", "devmm_svm", "hisi_hdc")
DEVICE_DIRS = ("/dev/dri", "/dev/nvidia-caps")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _errno_text() -> str:
    e = ctypes.get_errno()
    return f"{os.strerror(e)} (errno {e})"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    try:
        v = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_RULESET_VERSION))
    except OSError:  # pragma: no cover - no syscall() in libc
        return 0
    return max(0, int(v))


# --- steps, in the order the worker applies them ----------------------------------------------
def die_with_parent(report: SandboxReport, parent: int | None = None) -> None:
    """SIGKILL when the process that started this one dies. `parent`: that process's pid, as it knew it
    before the start. The request watches whatever parent this process has *when it asks*: one that died
    in between (its judge or fork server killed as the worker was starting, as a SIGKILLed batch kills
    them) left this process re-parented, and no signal would ever come: it exits now instead."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        if parent is not None and os.getppid() != parent:
            os._exit(1)
        report.enforced.append("dies with the judge (PR_SET_PDEATHSIG)")
    else:  # pragma: no cover - Linux always has it
        report.missing.append(f"PR_SET_PDEATHSIG failed: {_errno_text()}")


def join_cgroups(paths: list[str], report: SandboxReport) -> None:
    for path in paths:
        try:
            Path(path, "cgroup.procs").write_text(str(os.getpid()))
            report.enforced.append(f"the limits of cgroup {path}")
        except OSError as e:
            report.missing.append(f"could not join the cgroup {path}: {e.strerror}")


def enter_namespaces(report: SandboxReport) -> bool:
    """Become PID 1 of a new PID namespace (inside new user and mount namespaces, with a /proc of its
    own: the CUDA driver looks itself up under /proc/<pid>, and fails with error 304 when /proc still
    shows the host's processes — seen on an H100, driver 580). The calling process stays outside: it
    waits for the namespace's first process and exits with its status, so the caller's code after this
    returns True only in that first process. False (and a note): no namespaces."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS) != 0:
        report.missing.append(f"no PID namespace ({_errno_text()}): a process the candidate starts and detaches "
                              "with setsid can outlive the run; a subreaper kills the ones it can find")
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return False
    try:  # identity maps: files keep their owners; only the namespaces change
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as e:  # pragma: no cover - unusual kernels
        report.missing.append(f"user namespace maps failed: {e.strerror}")
    alive_r, alive_w = os.pipe()  # the outer process holds the write end until it dies
    pid = os.fork()
    if pid:  # the outer process: relay the status, leave nothing behind
        os.close(alive_r)
        signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:  # pragma: no cover
                continue
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    os.close(alive_w)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the outer process is this one's parent
    # ...unless it died before the request: its parent is outside this namespace (getppid() reads 0 either
    # way), so its end of the pipe says it: closed, and this process would outlive it
    hung = select.poll()
    hung.register(alive_r, select.POLLIN)
    if hung.poll(0):
        os._exit(1)
    os.close(alive_r)
    if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0 or \
            _libc.mount(b"proc", b"/proc", b"proc", 0, None) != 0:
        report.missing.append(f"could not mount a /proc of its own ({_errno_text()}): a GPU driver may fail to start")
    report.enforced.append("own PID namespace (and /proc): every process it starts dies with it, no other process is visible")
    return True


def limit_resources(policy: SandboxPolicy, report: SandboxReport) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.file_limit, policy.file_limit))
    report.enforced.append(f"files up to {policy.file_limit >> 20} MiB")
    if os.getuid() != 0:
        uid = str(os.getuid())
        own = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid)
        cap = own + DEFAULT_PROCESS_HEADROOM
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
        report.enforced.append(f"at most {DEFAULT_PROCESS_HEADROOM} more processes (RLIMIT_NPROC)")
    elif not policy.cgroups:
        report.missing.append("no process-count limit: running as root, RLIMIT_NPROC does not bind and no pids "
                              "cgroup was writable")
    if policy.interpreter:
        resource.setrlimit(resource.RLIMIT_AS, (policy.cpu_memory, policy.cpu_memory))
        report.enforced.append(f"address space up to {policy.cpu_memory >> 30} GiB")
    elif not policy.cgroups:
        report.missing.append("no host-memory limit on a GPU worker (CUDA reserves more address space than "
                              "RLIMIT_AS could allow, and no memory cgroup was writable)")


def _owner(proc_dir: Path) -> str:
    try:
        for line in (proc_dir / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return line.split()[1]
    except OSError:
        pass
    return ""


def restrict_filesystem(policy: SandboxPolicy, report: SandboxReport) -> None:
    abi = landlock_abi() if policy.landlock else 0
    if abi < 1:
        why = "switched off" if not policy.landlock else "not available in this kernel (Linux >= 5.13 with landlock enabled)"
        report.missing.append(f"no filesystem sandbox: Landlock is {why}; the candidate can read and write what "
                              "this user can (the integrity checks still notice changes to the tool and the folder)")
        return
    fs = _FS_ALL_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else (16 if abi < 6 else 24)]
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        report.missing.append(f"Landlock ruleset refused: {_errno_text()}")
        return
    try:
        readable = [p for p in (*SYSTEM_READ, *policy.read_paths) if os.path.exists(p)]
        for p in readable:
            _add_rule(ruleset, p, READ_ONLY, fs)
        # The CUDA driver writes under its own /proc/<pid> as it starts (error 304 without: H100, driver
        # 580); the rule resolves /proc/self to this process's folder, nothing else in /proc is writable.
        _add_rule(ruleset, "/proc/self", READ_ONLY | FS_WRITE_FILE | FS_TRUNCATE, fs)
        for p in policy.list_paths:
            _add_rule(ruleset, p, FS_READ_DIR, fs)
        _add_rule(ruleset, str(policy.scratch), fs, fs)
        _add_rule(ruleset, "/dev", FS_READ_DIR, fs)
        for name in sorted(os.listdir("/dev")):
            if name.startswith(DEVICE_PREFIXES) and not os.path.islink(f"/dev/{name}"):
                _add_rule(ruleset, f"/dev/{name}", FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV, fs)
        for d in DEVICE_DIRS:
            if os.path.isdir(d):
                _add_rule(ruleset, d, READ_ONLY | FS_WRITE_FILE | FS_IOCTL_DEV, fs)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            report.missing.append(f"Landlock restrict_self failed: {_errno_text()}")
            return
    finally:
        os.close(ruleset)
    report.enforced.append(f"Landlock ABI {abi}: writes only in its scratch folder, reads only the system, Python "
                           "and the installed packages" + (", no TCP" if net else "")
                           + (", no signals outside the sandbox" if scoped else ""))


def _add_rule(ruleset: int, path: str, access: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # vanished or unreadable: nothing to allow
    try:
        if not os.path.isdir(path):
            access &= _FILE_RIGHTS
        rule = struct.pack("=Qi", access & handled, fd)
        if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
    finally:
        os.close(fd)


def apply(policy: SandboxPolicy, parent: int | None = None) -> SandboxReport:
    """Every step, in order; called once by the worker's bootstrap, before torch is imported. `parent`:
    the pid of the process that started the worker (the judge, or its fork server)."""
    report = SandboxReport()
    die_with_parent(report, parent)
    join_cgroups(policy.cgroups, report)
    if policy.namespaces:
        enter_namespaces(report)
    else:
        report.missing.append("namespaces switched off")
    limit_resources(policy, report)
    restrict_filesystem(policy, report)
    return report
