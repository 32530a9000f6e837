"""What the judge prepares for a worker's sandbox before starting it: the import path the worker gets,
the folders it may read or only list, and the cgroups that limit its processes and memory.

The worker applies the policy itself (kernelgen.verify.worker.sandbox); nothing here runs beside a
candidate.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def worker_python_path() -> list[str]:
    """The judge's import path as the worker gets it (PYTHONPATH): the folder holding kernelgen first,
    then every existing entry of sys.path but the judge's working folder (the user's project)."""
    import kernelgen

    cwd = os.path.realpath(os.getcwd())
    pkg_parent = str(Path(kernelgen.__file__).resolve().parent.parent)
    entries = [pkg_parent] + [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)]
    return [p for p in dict.fromkeys(entries) if p != cwd or p == pkg_parent]


def python_read_paths(path: list[str]) -> tuple[list[str], list[str]]:
    """(read, list-only) folders for a worker whose import path is `path`: the interpreter's prefixes
    and standard library, every package folder on the path, and the kernelgen package itself. A
    project folder on the path (one holding kernelgen's source: an editable install) may only be
    listed, so the worker finds kernelgen there without reading the project's other files (where the
    operator folders and the user's own files live)."""
    import sysconfig

    import kernelgen

    read = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable),
            str(Path(kernelgen.__file__).resolve().parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude"):
        p = sysconfig.get_paths().get(key)
        if p:
            read.add(p)
    listed = set()
    for entry in path:
        if (Path(entry) / "kernelgen" / "__init__.py").is_file() and os.path.basename(entry) not in ("site-packages", "dist-packages"):
            listed.add(entry)
        else:
            read.add(entry)
    return sorted(read), sorted(listed - read)


def _cgroup_dirs() -> dict[str, str]:
    """controller ("pids", "memory", or "" for the cgroup2 hierarchy) -> our cgroup's folder."""
    mounts: dict[str, str] = {}
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype, _, opts = right.split(" ", 2) if right.count(" ") >= 2 else (right, "", "")
            mount_point = left.split()[4]
            if fstype == "cgroup2":
                mounts[""] = mount_point
            elif fstype == "cgroup":
                for c in ("pids", "memory"):
                    if c in opts.split(","):
                        mounts[c] = mount_point
        ours: dict[str, str] = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in (controllers.split(",") if controllers else [""]):
                if c in mounts:
                    ours[c] = mounts[c] + path.rstrip("/")
        return ours
    except (OSError, ValueError):
        return {}


def make_cgroups(name: str, *, pids_max: int, memory_max: int) -> list[str]:
    """Best effort: child cgroups limiting processes and memory (cgroup v1 controllers, or cgroup2
    where its controllers are delegated). [] when none is writable (a normal user, most containers)."""
    made = []
    limits = {"pids": {"pids.max": pids_max}, "memory": {"memory.limit_in_bytes": memory_max},
              "": {"pids.max": pids_max, "memory.max": memory_max}}
    dirs = _cgroup_dirs()
    for controller, base in dirs.items():
        if controller == "" and ("pids" in dirs or "memory" in dirs):
            continue  # the v1 controllers are in use; cgroup2 holds none of them
        d = Path(base, name)
        try:
            d.mkdir(exist_ok=True)
        except OSError:
            continue
        written = 0
        for file, value in limits[controller].items():
            try:
                (d / file).write_text(str(value))
                written += 1
            except OSError:
                pass
        if written:
            made.append(str(d))
        else:
            remove_cgroups([str(d)])
    return made


def remove_cgroups(paths: list[str]) -> None:
    for p in paths:
        try:
            os.rmdir(p)  # only once no process is left in it
        except OSError:
            pass
