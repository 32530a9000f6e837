"""The tuning memory: its schema, concurrent writers, export and import, refusals, and what a round
writes (nothing on the interpreter). Everything through the public entry points: kernelgen.memory,
the optimize loop's hook, and `kernelgen memory ...`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.devices import DeviceFacts, DeviceInfo
from kernelgen.errors import TuningMemoryError
from kernelgen.memory import (SCHEMA_VERSION, MemoryEntry, TuningMemory, advise, export_memory, import_memory,
                              round_entries)
from kernelgen.memory import store
from kernelgen.record.state import CandidateRecord, CaseResult, Hypothesis, RoundRecord

H100 = DeviceFacts(kind="cuda", name="NVIDIA H100 80GB HBM3", interpreter=False, sm_count=132, compute_capability="9.0",
                   torch_version="2.11", triton_version="3.6")


@pytest.fixture(autouse=True)
def memory_file(tmp_path, monkeypatch):
    path = tmp_path / "memory.sqlite3"
    monkeypatch.setenv("KERNELGEN_MEMORY", str(path))
    return path


def entry(**kw) -> MemoryEntry:
    base = dict(device=H100.name, capability="9.0", family="softmax", shape_class="rows~2^12 cols~2^16", dtype="bfloat16",
                knob="algorithm", value="online", speedup=1.69, noise=0.02, verdict="win", operator="log_softmax", round=1,
                shapes={"x": [4096, 50257]})
    return MemoryEntry(**{**base, **kw})


def judged_round(judged: bool = True) -> RoundRecord:
    case = lambda dtype, speedup, verdict: CaseResult(case=1, dtype=dtype, shapes={"x": [4096, 50257]}, speedup=speedup,  # noqa: E731
                                                      noise=0.02, verdict=verdict, best_ms=0.8, ms=0.8 / speedup)
    online = CandidateRecord(label="algorithm='online'", knobs={"algorithm": "online", "num_warps": None},
                             cases=[case("bfloat16", 1.69, "win"), case("float32", 1.2, "win")])
    split = CandidateRecord(label="algorithm='split'", knobs={"algorithm": "split"}, pruned="4096 rows >= 2 x 132 SMs")
    wrong = CandidateRecord(label="algorithm='single'", knobs={"algorithm": "single"},
                            cases=[CaseResult(case=1, dtype="bfloat16", shapes={"x": [4096, 50257]}, verdict="wrong")])
    return RoundRecord(round=1, started_at="t", backend="offline", kernel_file="k.py", judged=judged,
                       hypothesis=Hypothesis(knob="algorithm"), candidates=[online, split, wrong])


def test_a_new_memory_has_the_current_schema_in_wal_mode(memory_file):
    with TuningMemory() as mem:
        assert mem.path == memory_file and mem.schema_version == SCHEMA_VERSION
    db = sqlite3.connect(memory_file)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    columns = {r[1] for r in db.execute("PRAGMA table_info(entries)")}
    assert {"device", "capability", "torch_version", "triton_version", "family", "shape_class", "dtype", "knob", "value",
            "speedup", "noise", "operator", "round", "origin"} <= columns


def test_an_older_memory_is_migrated_and_keeps_its_entries(memory_file, monkeypatch):
    with TuningMemory() as mem:
        mem.add([entry()])
    monkeypatch.setattr(store, "MIGRATIONS", [*store.MIGRATIONS, "ALTER TABLE entries ADD COLUMN note TEXT NOT NULL DEFAULT ''"])
    monkeypatch.setattr(store, "SCHEMA_VERSION", len(store.MIGRATIONS))
    with TuningMemory() as mem:
        assert mem.schema_version == SCHEMA_VERSION + 1
        assert [e for _, e in mem.entries()] == [entry()]
    assert "note" in {r[1] for r in sqlite3.connect(memory_file).execute("PRAGMA table_info(entries)")}


def test_a_newer_or_damaged_memory_is_refused_with_exit_2(memory_file):
    with TuningMemory():
        pass
    sqlite3.connect(memory_file).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(TuningMemoryError, match="newer KernelGen"):
        TuningMemory()
    for f in memory_file.parent.glob(memory_file.name + "*"):  # the database and its WAL files
        f.unlink()
    memory_file.write_bytes(b"not a database, just bytes" * 100)
    result = CliRunner().invoke(app, ["memory", "list"])
    assert result.exit_code == 2 and "not a readable tuning memory" in result.output and "Traceback" not in result.output


def test_recording_twice_adds_nothing_and_forget_needs_a_filter():
    with TuningMemory() as mem:
        assert mem.add([entry(), entry(dtype="float32")]) == 2
        assert mem.add([entry()]) == 0  # a resumed run records its rounds again
        with pytest.raises(TuningMemoryError, match="needs a filter"):
            mem.forget()
        assert mem.forget(dtype="float32") == 1 and len(mem.entries()) == 1


WRITER = """
import sys
from kernelgen.memory import MemoryEntry, TuningMemory
worker = int(sys.argv[1])
for i in range(20):
    with TuningMemory() as mem:  # a batch worker opens the memory per round
        mem.add([MemoryEntry(device="gpu", family="softmax", shape_class="c", dtype="float32", knob="num_warps", value=i,
                             speedup=1.1, noise=0.01, verdict="win", operator=f"op{worker}", round=i)])
"""


def test_several_processes_write_at_once_and_nothing_is_lost(memory_file, repo):
    env = {"PYTHONPATH": str(repo), "KERNELGEN_MEMORY": str(memory_file), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w)], env=env, stderr=subprocess.PIPE) for w in range(4)]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    with TuningMemory() as mem:
        got = mem.entries()
    assert len(got) == 80 and {e.operator for _, e in got} == {f"op{w}" for w in range(4)}


def test_export_then_import_round_trips_as_hypotheses(tmp_path):
    with TuningMemory() as mem:
        mem.add([entry(), entry(dtype="float32", speedup=1.2)])
        assert export_memory(mem, tmp_path / "h100.json") == 2
        mem.forget(origin="measured")
        assert import_memory(mem, tmp_path / "h100.json") == (2, 2)
        assert import_memory(mem, tmp_path / "h100.json") == (2, 0)  # imported twice: nothing new
        back = [e for _, e in mem.entries()]
    assert {e.origin for e in back} == {"imported"} and {e.source for e in back} == {"h100.json"}
    assert [e.model_copy(update={"origin": "measured", "source": ""}) for e in back] == [entry(), entry(dtype="float32", speedup=1.2)]
    assert "imported, not re-timed here" in back[0].describe()


@pytest.mark.parametrize("text, says", [
    ("{not json", "not JSON"),
    (json.dumps({"entries": []}), "not a KernelGen tuning-memory export"),
    (json.dumps({"format": "kernelgen-tuning-memory", "schema_version": 1, "entries": [{"device": "x"}]}), "problem(s)"),
    (json.dumps({"format": "kernelgen-tuning-memory", "schema_version": 99, "entries": []}), "newer than this KernelGen"),
])
def test_a_corrupt_or_foreign_file_is_refused_whole(tmp_path, text, says):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    result = CliRunner().invoke(app, ["memory", "import", str(bad)])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output
    with TuningMemory() as mem:
        assert mem.entries() == []


def test_the_cli_lists_shows_exports_and_forgets(tmp_path):
    with TuningMemory() as mem:
        mem.add([entry()])
    runner = CliRunner()
    listed = runner.invoke(app, ["memory", "list", "--family", "softmax"])
    assert listed.exit_code == 0 and "log_softmax" in listed.output and "1 entry in" in listed.output
    shown = runner.invoke(app, ["memory", "show", "1"])
    assert shown.exit_code == 0 and json.loads(shown.output)["speedup"] == 1.69
    assert runner.invoke(app, ["memory", "show", "7"]).exit_code == 2
    assert runner.invoke(app, ["memory", "export", str(tmp_path / "out.json")]).exit_code == 0
    assert len(json.loads((tmp_path / "out.json").read_text())["entries"]) == 1
    forgot = runner.invoke(app, ["memory", "forget", "--operator", "log_softmax"])
    assert forgot.exit_code == 0 and "forgot 1 entry" in forgot.output


def test_a_judged_round_teaches_its_timed_values_and_an_unjudged_one_nothing():
    learned = round_entries(judged_round(), operator="log_softmax", family="softmax", facts=H100)
    assert [(e.knob, e.value, e.dtype, e.verdict) for e in learned] == [
        ("algorithm", "online", "bfloat16", "win"), ("algorithm", "online", "float32", "win")]  # pruned, wrong: untimed
    assert learned[0].device == H100.name and learned[0].capability == "9.0" and learned[0].shape_class == "rows~2^12 cols~2^16"
    assert round_entries(judged_round(judged=False), operator="log_softmax", family="softmax", facts=H100) == []


def test_interpreter_rounds_write_nothing(memory_file, repo):
    from kernelgen.optimize.remember import remember
    from kernelgen.spec import load_spec

    spec = load_spec(repo / "operator_specs" / "log_softmax.yaml")
    # an interpreter round is recorded unjudged; even one marked judged writes nothing on the CPU
    assert remember(spec, judged_round(judged=False), DeviceInfo("cpu", "cpu", interpreter=True)) == 0
    assert remember(spec, judged_round(), DeviceInfo("cpu", "cpu", interpreter=True)) == 0
    assert not memory_file.exists()
    assert remember(spec, judged_round(), DeviceInfo("cuda", "cuda", interpreter=False), facts=H100) == 2
    with TuningMemory() as mem:
        assert {e.family for _, e in mem.entries()} == {"softmax"}


def test_advice_for_an_alike_case_is_the_largest_win_and_leaves_out_mixed_values():
    remembered = [entry(), entry(speedup=1.3, operator="softmax", shapes={"x": [2048, 32768]}),
                  entry(knob="num_warps", value=16, speedup=1.1), entry(knob="num_warps", value=16, verdict="loss", speedup=0.9),
                  entry(dtype="float32", knob="persistent", value=True), entry(device="other GPU", knob="ROW_TILE", value=4096)]
    got = advise(remembered, device=H100.name, family="softmax", dtype="bfloat16", shapes={"x": [2048, 32768]})
    assert [(a.knob, a.value, a.speedup) for a in got] == [("algorithm", "online", 1.69)]
    assert advise(remembered, device=H100.name, family="softmax", dtype="bfloat16", shapes={"x": [32, 32000]}) == []
