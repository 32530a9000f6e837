"""Which of the worker's sandbox steps a device's driver tolerates: each step alone, then Landlock with
wider rules, each followed by a CUDA (or NPU) initialisation in a fresh process. Prints one line per
configuration; run it on a new kind of machine before trusting the sandbox there.

    python benchmarks/sandbox_probe.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys
from pathlib import Path
from kernelgen.verify import sandbox
cfg = json.loads(sys.argv[1])
scratch = Path(cfg["scratch"])
read, listed = sandbox.python_read_paths(sandbox.worker_python_path())
extra = cfg.get("extra_read", [])
policy = sandbox.SandboxPolicy(scratch=scratch, read_paths=read + extra, list_paths=listed, interpreter=False,
                               namespaces=cfg["ns"], landlock=cfg["landlock"])
orig_dirs, orig_prefixes = sandbox.DEVICE_DIRS, sandbox.DEVICE_PREFIXES
if cfg.get("all_dev"):
    sandbox.DEVICE_PREFIXES = ("",)
if cfg.get("rw"):
    orig = sandbox.restrict_filesystem
    def wide(policy, report):
        policy.read_paths = policy.read_paths
        sandbox.SYSTEM_READ = sandbox.SYSTEM_READ + tuple(cfg["rw"])
        orig(policy, report)
    sandbox.restrict_filesystem = wide
if cfg.get("abi"):
    real = sandbox.landlock_abi
    sandbox.landlock_abi = lambda: min(real(), cfg["abi"])
report = sandbox.apply(policy)
try:
    import torch
    n = torch.cuda.device_count()
    x = torch.ones(4, device="cuda") * 2
    print("OK", n, float(x.sum()), report.missing)
except Exception as e:
    print("FAIL", type(e).__name__, str(e)[:160].replace("\n", " "))
"""

CONFIGS = [
    ("nothing", {"ns": False, "landlock": False}),
    ("namespaces only", {"ns": True, "landlock": False}),
    ("landlock only", {"ns": False, "landlock": True}),
    ("landlock, every /dev node", {"ns": False, "landlock": True, "all_dev": True}),
    ("landlock + read /run /var /tmp /dev/shm", {"ns": False, "landlock": True, "extra_read": ["/run", "/var", "/tmp", "/dev/shm"]}),
    ("landlock, every /dev node + read /run /var /tmp", {"ns": False, "landlock": True, "all_dev": True, "extra_read": ["/run", "/var", "/tmp", "/dev/shm"]}),
    ("landlock as ABI 4 (device ioctls not handled)", {"ns": False, "landlock": True, "abi": 4}),
    ("landlock as ABI 5 (no scoping)", {"ns": False, "landlock": True, "abi": 5}),
    ("both", {"ns": True, "landlock": True}),
]


def main() -> int:
    for label, cfg in CONFIGS:
        scratch = tempfile.mkdtemp(prefix="kg-probe-")
        cfg = {**cfg, "scratch": scratch}
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, timeout=180)
        line = (p.stdout.strip().splitlines() or [p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"])[-1]
        print(f"{label:<48} {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
