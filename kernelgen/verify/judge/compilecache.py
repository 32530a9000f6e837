"""Compiled kernels kept across runs: a worker's Triton cache is seeded from the store before its
kernel is imported, and what it compiled is copied back when it ends.

Integrity: every store folder belongs to one key — the sha256 of the one untrusted kernel file a
worker ran (each such kernel has a worker of its own), or "offline" for the worker that KernelGen's
own generated kernels share. Only the judge copies in and out; a worker writes only into its scratch
folder (kernelgen.verify.worker.sandbox), so whatever a hostile candidate leaves in its cache lands in the
folder of its own key and is seeded only into a later worker running those same bytes — never into
another candidate's, the offline kernels' or the baselines' (torch.compile runs in the judge, with a
cache no worker can reach). Trusted entries flow the other way only: every worker is also seeded with
the "offline" folder (what KernelGen's own kernels compiled: Triton's launchers and utilities, and
the very kernel `bench` times after offline rounds), which is not copied back into its own folder. The copy back takes plain files only: no links (a link planted in the
scratch could point the judge at a file of the user's), no FIFOs or devices, bounded in size and count.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Set as AbstractSet
from pathlib import Path

from kernelgen.verify.judge.peaks import cache_dir

MAX_FILE = 64 << 20  # a cubin, a PTX file or a launcher .so is < 10 MB
MAX_TOTAL = 512 << 20  # per key
MAX_FILES = 4096  # per key: a kernel with every dtype and alignment specialised makes ~100
# Triton's names (hashes, kernel names); no leading dot: never "..", never a half-copied .tmp file
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_GROUP = "__grp__"  # Triton's group files: which files make one compiled kernel, by absolute path


def store_folder(op_name: str, key: str, *, root: Path | None = None) -> Path:
    """Where the compiled kernels of `key` (a kernel's sha256, or "offline") for operator `op_name` live."""
    if not _NAME.match(op_name) or not _NAME.match(key):
        raise ValueError(f"not a cache key: {op_name!r}/{key!r}")
    return (root or cache_dir()) / "compile" / op_name / key


def seed(store: Path, triton_dir: Path) -> set[Path]:
    """Copy the store's files into a worker's Triton cache (those it lacks); the paths copied,
    relative to the cache."""
    return _copy_new(store, triton_dir)


def harvest(triton_dir: Path, store: Path, *, skip: AbstractSet[Path] = frozenset()) -> int:
    """Copy what a worker compiled (plain files only, within the bounds; not the paths in `skip`,
    which another store seeded) into the store of its key; files the store already has are left as
    they are. How many were added."""
    return len(_copy_new(triton_dir, store, skip))


def _copy_new(src_root: Path, dst_root: Path, skip: AbstractSet[Path] = frozenset()) -> set[Path]:
    """The plain files under `src_root` that `dst_root` lacks, copied there (each written under a
    temporary name, then renamed: two judges may fill one key at once); their relative paths."""
    done: set[Path] = set()
    for src, rel in _plain_files(src_root):
        dst = dst_root / rel
        if rel in skip or dst.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        if _copy_plain(src, tmp) and (not rel.name.startswith(_GROUP) or _rehome_group(tmp, dst.parent)):
            os.replace(tmp, dst)
            done.add(rel)
        else:
            tmp.unlink(missing_ok=True)
    return done


def _rehome_group(path: Path, folder: Path) -> bool:
    """Point a copied Triton group file (`__grp__<kernel>.json`: the absolute path of every file of one
    compiled kernel) at the files beside it in `folder`. As written, it names the folder it was compiled in:
    another worker's scratch, which a replay worker seeded from it found with os.path.exists and then could
    not read (Landlock), so every replay of a kernel the live recording worker had compiled raised
    PermissionError on an H100 (2026-11-27: all of `optimize`'s timings, and each round's first candidate);
    and a store seeded from a finished worker named files that no longer exist, so Triton compiled again.
    False (the file is not copied) when it is not a group file of plain names."""
    try:
        data = json.loads(path.read_text())
        children = data["child_paths"]
        if not isinstance(children, dict) or not all(isinstance(k, str) and isinstance(v, str) and
                                                     _NAME.match(k) and _NAME.match(Path(v).name)
                                                     for k, v in children.items()):
            return False
        data["child_paths"] = {k: str(folder / Path(v).name) for k, v in children.items()}
        path.write_text(json.dumps(data))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _plain_files(root: Path) -> list[tuple[Path, Path]]:
    """(path, path relative to root) of the regular files under root, two levels deep at most (Triton
    keeps <hash>/<file>), names of plain characters only, within the count and size bounds."""
    out: list[tuple[Path, Path]] = []
    total = 0
    try:
        top = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return out
    for entry in top:
        if not _NAME.match(entry.name) or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            try:
                inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
            except OSError:
                continue
            files = [(e, Path(entry.name, e.name)) for e in inner]
        else:
            files = [(entry, Path(entry.name))]
        for e, rel in files:
            if not _NAME.match(e.name):
                continue
            try:
                st = os.lstat(e.path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > MAX_FILE:
                continue
            total += st.st_size
            if total > MAX_TOTAL or len(out) >= MAX_FILES:
                return out
            out.append((Path(e.path), rel))
    return out


def _copy_plain(src: Path, dst: Path) -> bool:
    """Copy `src` only if it is still a plain file when opened (no link followed, no FIFO waited on)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
            return False
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            return False
        dst.write_bytes(data)
        return True
    finally:
        os.close(fd)
