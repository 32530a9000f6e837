"""Nothing the model wrote is lost: `kernelgen new` writes every exchange beside its staging folder as it
happens, a failure says where, and the same command again answers the requests the recording holds
from it (no call to the model) before asking the model for the rest. Unit tests here; the runs through
`kernelgen new` are in tests/llm/test_kernelbench_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.llm.client import ChatReply, Session
from kernelgen.llm.recording import ExchangeRecord, Recorder
from kernelgen.llm.transcript import MARK, ResumeChat, same_request, start_transcript
from kernelgen.record.usage import TokenUsage

GENERATE = [{"role": "system", "content": "rules"}, {"role": "user", "content": "write op for x[64, 128]"}]
REPAIR = [{"role": "system", "content": "rules"}, {"role": "user", "content": "512 of 8192 differ; got 1.25, expected 1.5"}]


class Live:
    """A stand-in endpoint that answers every request and counts them."""

    model, endpoint = "fake-model", "http://127.0.0.1/v1"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def complete(self, messages, purpose):  # noqa: ANN001, ANN201
        self.asked.append(purpose)
        return ChatReply(text=f"live {purpose}", usage=TokenUsage(calls=1, prompt_tokens=10, completion_tokens=5))


def _record(folder: Path, index: int, purpose: str, messages: list, reply: str | None = "recorded", error: str | None = None) -> None:
    Recorder(folder).write(ExchangeRecord(index=index, purpose=purpose, model="fake-model", started_at="t", elapsed_s=1.0,
                                          messages=messages, reply=reply, error=error,
                                          usage=TokenUsage(calls=1, prompt_tokens=100, completion_tokens=50)))


def test_the_first_request_must_match_exactly_later_ones_up_to_their_numbers():
    rec = ExchangeRecord(index=2, purpose="repair", model="m", started_at="t", elapsed_s=0, messages=REPAIR, reply="r")
    fresh = [REPAIR[0], {"role": "user", "content": "498 of 8192 differ; got -0.5, expected 2e-3"}]
    assert same_request(rec, fresh, "repair", first=False)
    assert not same_request(rec, fresh, "repair", first=True)
    assert not same_request(rec, fresh, "malformed", first=False)
    assert not same_request(rec, [REPAIR[0], {"role": "user", "content": "a different failure entirely"}], "repair", first=False)
    gen = ExchangeRecord(index=1, purpose="generate", model="m", started_at="t", elapsed_s=0, messages=GENERATE, reply="g")
    other_shape = [GENERATE[0], {"role": "user", "content": "write op for x[64, 256]"}]
    assert not same_request(gen, other_shape, "generate", first=True)  # another spec: never its replies


def test_resume_answers_from_the_recording_then_asks_the_model(tmp_path):
    earlier = tmp_path / f"op{MARK}20261125-100000"
    _record(earlier, 1, "generate", GENERATE, "recorded kernel")
    _record(earlier, 2, "repair", REPAIR, None, error="the server failed (500)")  # never answered: nothing to reuse
    live = Live()
    session = Session(ResumeChat(live, earlier), tmp_path / "now")
    assert session.chat(GENERATE, "generate").text == "recorded kernel" and live.asked == []
    assert session.chat(REPAIR, "repair").text == "live repair" and live.asked == ["repair"]
    assert session.chat(GENERATE, "generate").text == "live generate"  # once the run went its own way, always live
    first, second = (ExchangeRecord.model_validate_json(p.read_text()) for p in sorted((tmp_path / "now").glob("*.json"))[:2])
    assert first.replayed_from and first.replayed_from.endswith("0001_generate.json") and second.replayed_from is None
    assert session.backend.reused == 1


def test_a_new_run_resumes_the_newest_unfinished_run_that_has_replies(tmp_path):
    old, newer, empty = (tmp_path / f"op{MARK}{t}" for t in ("20261125-100000", "20261125-110000", "20261125-120000"))
    _record(old, 1, "generate", GENERATE)
    _record(newer, 1, "generate", GENERATE)
    _record(empty, 1, "generate", GENERATE, None, error="timed out")
    t = start_transcript(tmp_path, "op", resume=True)
    assert t.earlier == newer and t.folder.name.startswith(f"op{MARK}") and not t.folder.exists()
    assert start_transcript(tmp_path, "op", resume=False).earlier is None
    assert start_transcript(tmp_path, "other", resume=True).earlier is None


@pytest.mark.parametrize("reused, kept", [(1, False), (0, True)])
def test_a_finished_run_removes_the_earlier_folder_only_when_it_reused_every_reply(tmp_path, reused, kept):
    earlier = tmp_path / f"op{MARK}20261125-100000"
    _record(earlier, 1, "generate", GENERATE)
    t = start_transcript(tmp_path, "op", resume=True)
    _record(t.folder, 1, "generate", GENERATE)
    t.reused = reused
    t.finish(tmp_path / "op" / "llm")
    t.discard()
    assert (tmp_path / "op" / "llm" / "0001_generate.json").is_file() and not t.folder.exists()
    assert earlier.exists() == kept
    assert "exchange" not in t.kept()  # nothing left to point at
