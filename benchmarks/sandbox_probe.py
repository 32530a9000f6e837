"""Which sandbox steps a device's driver tolerates: each configuration starts a fresh process, applies
some steps by hand (user / PID / mount namespaces, /proc remounted, no_new_privs, Landlock with given
rules), then initialises CUDA and runs one kernel. One line per configuration; run it on a new kind
of machine before trusting the worker's sandbox there.

    python benchmarks/sandbox_probe.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

CHILD = r"""
import ctypes, json, os, struct, sys
cfg = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
def err(): return os.strerror(ctypes.get_errno())
uid, gid = os.getuid(), os.getgid()
flags = (0x10000000 if cfg.get("userns") else 0) | (0x20000000 if cfg.get("pidns") else 0) | (0x00020000 if cfg.get("newns") else 0)
if flags:
    if libc.unshare(flags) != 0: print("FAIL unshare", err()); sys.exit()
    if cfg.get("userns"):
        open("/proc/self/setgroups", "w").write("deny")
        open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1"); open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
    if cfg.get("pidns"):
        pid = os.fork()
        if pid:
            os.waitpid(pid, 0); sys.exit()
    if cfg.get("newns"):
        MS_REC, MS_PRIVATE = 0x4000, 1 << 18
        if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0: print("FAIL make-private", err()); sys.exit()
        if cfg.get("remount_proc") and libc.mount(b"proc", b"/proc", b"proc", 0, None) != 0: print("FAIL mount proc", err()); sys.exit()
if cfg.get("nnp") and libc.prctl(38, 1, 0, 0, 0) != 0: print("FAIL nnp", err()); sys.exit()
if cfg.get("rules") is not None:
    abi = libc.syscall(444, None, 0, 1)
    fs = (1 << 16) - 1 if abi >= 5 else (1 << 15) - 1
    attr = struct.pack("QQQ", fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)[: 24 if abi >= 6 else 16]
    rs = libc.syscall(444, attr, len(attr), 0)
    for path, access in cfg["rules"]:
        if not os.path.exists(path): continue
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        a = (fs if access == "rw" else (1 | 4 | 8)) & (fs if os.path.isdir(path) else (1 | 2 | 4 | (1 << 14) | (1 << 15)))
        if libc.syscall(445, rs, 1, struct.pack("=Qi", a, fd), 0) != 0: print("FAIL rule", path, err()); sys.exit()
        os.close(fd)
    libc.prctl(38, 1, 0, 0, 0)
    if libc.syscall(446, rs, 0) != 0: print("FAIL restrict", err()); sys.exit()
try:
    import torch
    x = torch.ones(4, device="cuda") * 2
    print("OK", torch.cuda.device_count(), float(x.sum()))
except Exception as e:
    print("FAIL", type(e).__name__, str(e)[:120].replace("\n", " "))
"""

SYS = ["/bin", "/sbin", "/lib", "/lib64", "/usr", "/opt", "/etc", "/proc", "/sys"]


def configs(scratch: str, site: list[str]) -> list[tuple[str, dict]]:
    read_all = [("/", "r")]
    dev = [(f"/dev/{n}", "rw") for n in ("null", "zero", "urandom", "random", "nvidia0", "nvidiactl", "nvidia-uvm",
                                          "nvidia-uvm-tools", "nvidia-caps")]
    base = [(p, "r") for p in SYS + site] + [(scratch, "rw"), ("/dev", "r")] + dev
    return [
        ("nothing", {}),
        ("no_new_privs only", {"nnp": True}),
        ("user namespace only", {"userns": True}),
        ("user + PID namespaces", {"userns": True, "pidns": True}),
        ("user + PID + mount ns, /proc remounted", {"userns": True, "pidns": True, "newns": True, "remount_proc": True}),
        ("landlock: rw everywhere", {"rules": [("/", "rw")]}),
        ("landlock: read everywhere, rw /dev /tmp /run /var /proc /sys", {"rules": read_all + [(p, "rw") for p in ("/dev", "/tmp", "/run", "/var", "/proc", "/sys")]}),
        ("landlock: read everywhere, rw /dev", {"rules": read_all + [("/dev", "rw")]}),
        ("landlock: read everywhere, rw /dev/shm + nvidia nodes", {"rules": read_all + [("/dev/shm", "rw")] + dev}),
        ("landlock: read everywhere, rw /proc", {"rules": read_all + [("/proc", "rw")] + dev}),
        ("landlock: read everywhere, rw /sys", {"rules": read_all + [("/sys", "rw")] + dev}),
        ("landlock: the worker's rules", {"rules": base}),
        ("landlock: the worker's rules + rw /dev/shm /proc", {"rules": base + [("/dev/shm", "rw"), ("/proc", "rw")]}),
        ("landlock: the worker's rules + rw /proc/self", {"rules": base + [("/proc/self", "rw")]}),
        ("namespaces, /proc remounted, worker's rules + rw /proc/self",
         {"userns": True, "pidns": True, "newns": True, "remount_proc": True, "rules": base + [("/proc/self", "rw")]}),
    ]


def main() -> int:
    import sysconfig

    site = sorted({p for p in sys.path if p and ("site-packages" in p or p.startswith("/tmp/site"))}
                  | {sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"]})
    for label, cfg in configs(tempfile.mkdtemp(prefix="kg-probe-"), site):
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, timeout=180)
        line = (p.stdout.strip().splitlines() or [p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"])[-1]
        print(f"{label:<62} {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
