"""The compile cache kept across runs (kernelgen.verify.judge.compilecache): what a worker compiled comes
back to the next worker running the same kernel bytes, and nothing a hostile candidate leaves in it
reaches another kernel's worker or changes its verdict."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

import kernelgen.verify.judge.judge as judge_module
from kernelgen.devices import DeviceInfo
from kernelgen.opdir import open_operator
from kernelgen.verify.judge import compilecache
from kernelgen.verify.judge.accuracy import check_accuracy
from kernelgen.verify.judge.runner import open_judge
from kernelgen.verify.worker.sandbox import landlock_abi
from kernelgen.verify.judge.judge import KernelSource
from tests.support.broadcast import make_op_dir
from tests.support.judging import HONEST


CPU = DeviceInfo("cpu", "cpu", interpreter=True)
POISON = "kernelgen-poison-marker"

# Module code appended to an honest kernel: leave a poisoned entry in this worker's own Triton cache,
# and try to plant it in the store folders of other kernels directly (Landlock refuses those).
HOSTILE_TAIL = '''
import os as _os
_mine = _os.path.join(_os.environ["TRITON_CACHE_DIR"], "0" * 64)
_os.makedirs(_mine, exist_ok=True)
open(_os.path.join(_mine, "_broadcast_kernel.json"), "w").write("{POISON}")
for _target in {targets!r}:
    try:
        _os.makedirs(_os.path.join(_target, "0" * 64), exist_ok=True)
        open(_os.path.join(_target, "0" * 64, "_broadcast_kernel.json"), "w").write("{POISON}")
    except OSError:
        pass
'''
# A kernel whose verdict a poisoned entry would change: it refuses to work when one reached its cache.
VICTIM_TAIL = '''
import os as _os
for _root, _dirs, _files in _os.walk(_os.environ["TRITON_CACHE_DIR"]):
    for _f in _files:
        if "{POISON}" in open(_os.path.join(_root, _f), errors="replace").read():
            raise RuntimeError("a poisoned compile-cache entry reached this worker")
'''


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_poisoned_compile_cache_entry_changes_no_later_verdict(tmp_path, monkeypatch):
    if not landlock_abi():
        pytest.skip("without Landlock a candidate writes wherever the user can (the tool says so); the cache relies on it")
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(judge_module, "check_source", lambda *a, **k: [])  # the runtime defences alone
    op = open_operator(make_op_dir(tmp_path, HONEST))
    honest = HONEST.read_text(encoding="utf-8")
    victim = honest + VICTIM_TAIL.replace("{POISON}", POISON)
    store = cache / "compile" / "broadcast"
    targets = [str(store / _sha(victim)), str(store / "offline"), str(store)]
    hostile = honest + HOSTILE_TAIL.replace("{POISON}", POISON).format(targets=targets)

    with open_judge(op, CPU) as judge:
        assert check_accuracy(judge, KernelSource(hostile, op.file("triton").name), seeds=(0,)).correct
    # What it left in its own cache is kept under its own key, and nowhere else.
    poisoned = [p for p in store.rglob("*") if p.is_file() and POISON in p.read_text(errors="replace")]
    assert poisoned and all(p.is_relative_to(store / _sha(hostile)) for p in poisoned), poisoned

    with open_judge(op, CPU) as judge:  # a later run: the victim, and the hostile kernel again
        verdict = check_accuracy(judge, KernelSource(victim, op.file("triton").name), seeds=(0,))
        assert verdict.correct, verdict.error or verdict.violations
        again = check_accuracy(judge, KernelSource(hostile, op.file("triton").name), seeds=(0,))
        worker, _ = judge.load(KernelSource(hostile, op.file("triton").name))
        # the same bytes get their own entries back: that is the cache working
        assert again.correct and (worker.scratch / "triton" / ("0" * 64) / "_broadcast_kernel.json").is_file()


def test_harvest_takes_plain_files_only(tmp_path):
    secret = tmp_path / "secret.toml"
    secret.write_text('api_key = "sk-not-for-the-cache"')
    triton = tmp_path / "triton"
    entry = triton / ("a" * 64)
    entry.mkdir(parents=True)
    (entry / "kernel.cubin").write_bytes(b"\x7fELF compiled")
    (entry / "link.json").symlink_to(secret)
    os.link(secret, entry / "hard.json")  # a second name for a file the judge can read
    os.mkfifo(entry / "fifo.json")  # opening it would block the judge
    with open(entry / "huge.bin", "wb") as f:
        f.truncate(compilecache.MAX_FILE + 1)
    (triton / "escape").symlink_to(tmp_path)  # a folder link out of the cache
    store = compilecache.store_folder("broadcast", "b" * 64, root=tmp_path / "cache")

    assert compilecache.harvest(triton, store) == 1
    assert sorted(p.name for p in store.rglob("*") if p.is_file()) == ["kernel.cubin"]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    seeded = compilecache.seed(store, fresh)
    assert seeded == {Path("a" * 64, "kernel.cubin")}
    assert (fresh / ("a" * 64) / "kernel.cubin").read_bytes() == b"\x7fELF compiled"
    # what another key's folder seeded is not copied back into this worker's own
    (fresh / ("c" * 64)).mkdir()
    (fresh / ("c" * 64) / "own.cubin").write_bytes(b"\x7fELF mine")
    own = compilecache.store_folder("broadcast", "d" * 64, root=tmp_path / "cache")
    assert compilecache.harvest(fresh, own, skip=seeded) == 1 and not (own / ("a" * 64)).exists()
    with pytest.raises(ValueError):
        compilecache.store_folder("broadcast", "../elsewhere")


def _triton_cache(folder: Path, monkeypatch) -> "object":
    """Triton's own cache manager over `folder` (what a worker with TRITON_CACHE_DIR there uses)."""
    from triton.runtime.cache import FileCacheManager

    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    return FileCacheManager("c" * 52)


def test_a_seeded_kernel_is_read_from_the_folder_it_was_seeded_into(tmp_path, monkeypatch):
    """Triton finds a compiled kernel through its group file, which names every file by absolute path:
    copied as written, it named the recording worker's scratch, which the replay worker could see but
    not read (an H100 run: every replay of a kernel the live recording worker had compiled raised
    PermissionError). Seeded, the group names the copies, and still does once the source is gone."""
    recorded = _triton_cache(tmp_path / "recorder" / "triton", monkeypatch)
    children = {name: recorded.put(body, name, binary=isinstance(body, bytes))
                for name, body in (("k.cubin", b"\x7fELF"), ("k.ptx", "// ptx"), ("k.json", '{"name": "k"}'))}
    recorded.put_group("k.json", children)
    store = compilecache.store_folder("broadcast", "offline", root=tmp_path / "cache")
    compilecache.harvest(tmp_path / "recorder" / "triton", store)
    replay_dir = tmp_path / "replayer" / "triton"
    compilecache.seed(store, replay_dir)
    shutil.rmtree(tmp_path / "recorder")

    group = _triton_cache(replay_dir, monkeypatch).get_group("k.json")
    assert group is not None and set(group) == set(children)
    assert all(Path(p).parent == replay_dir / ("c" * 52) for p in group.values())
    assert Path(group["k.cubin"]).read_bytes() == b"\x7fELF"


@pytest.mark.parametrize("body", ['{"child_paths": {"k.json": "/etc/../etc/passwd/.."}}', '{"child_paths": ["x"]}',
                                  "not json", '{"child_paths": {"../k.json": "/tmp/k.json"}}'])
def test_a_group_file_that_is_not_triton_s_is_not_copied(tmp_path, body):
    entry = tmp_path / "triton" / ("d" * 52)
    entry.mkdir(parents=True)
    (entry / "__grp__k.json").write_text(body)
    (entry / "k.cubin").write_bytes(b"\x7fELF")
    store = compilecache.store_folder("broadcast", "e" * 64, root=tmp_path / "cache")

    assert compilecache.harvest(tmp_path / "triton", store) == 1
    assert sorted(p.name for p in store.rglob("*") if p.is_file()) == ["k.cubin"]
