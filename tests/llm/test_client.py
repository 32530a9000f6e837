"""The client against a local OpenAI-compatible server, through the real `openai` package:
replies, token usage, reasoning fields, and every failure turned into a clear LLMError."""

from __future__ import annotations

import json

import pytest

from kernelgen.llm.config import load_settings
from kernelgen.errors import LLMError
from kernelgen.llm.client import OpenAIChat, ReplayChat, Session
from tests.support.fake_llm_server import FakeLLMServer, ok, status

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]


def _session(server: FakeLLMServer, tmp_path, **overrides) -> Session:  # noqa: ANN001, ANN003
    settings = load_settings({"base_url": server.url, "api_key": KEY, "model": "fake-model", "max_retries": 0, **overrides})
    return Session(OpenAIChat(settings), tmp_path / "llm")


def test_reply_usage_and_recording(llm_env, tmp_path):
    with FakeLLMServer([ok("first", prompt_tokens=11, completion_tokens=7, reasoning="hmm, let me think"),
                        ok("second", prompt_tokens=5, completion_tokens=3)]) as server:
        s = _session(server, tmp_path, temperature=0.3, max_tokens=1234)
        r1 = s.chat(MESSAGES, "generate")
        r2 = s.chat(MESSAGES, "repair")
    assert (r1.text, r1.reasoning, r2.text) == ("first", "hmm, let me think", "second")
    assert (s.usage.calls, s.usage.prompt_tokens, s.usage.completion_tokens) == (2, 16, 10)
    body = server.requests[0]["body"]
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES
    assert body["temperature"] == 0.3 and body["max_tokens"] == 1234
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    files = sorted(p.name for p in (tmp_path / "llm").iterdir())
    assert files == ["0001_generate.json", "0002_repair.json"]
    rec = json.loads((tmp_path / "llm" / files[0]).read_text())
    assert rec["reply"] == "first" and rec["usage"]["prompt_tokens"] == 11 and rec["messages"] == MESSAGES
    assert rec["reasoning"] == "hmm, let me think"
    for f in files:
        assert KEY not in (tmp_path / "llm" / f).read_text()


def test_429_is_retried_then_succeeds(llm_env, tmp_path):
    with FakeLLMServer([status(429, "slow down"), ok("after the wait")]) as server:
        s = _session(server, tmp_path, max_retries=2)
        assert s.chat(MESSAGES, "generate").text == "after the wait"
    assert len(server.requests) == 2


def test_429_after_retries_is_a_clear_error(llm_env, tmp_path):
    with FakeLLMServer([status(429, "slow down")] * 2) as server:
        with pytest.raises(LLMError, match=r"rate limiting requests \(429\) \(after 1 retries\): slow down"):
            _session(server, tmp_path, max_retries=1).chat(MESSAGES, "generate")
    rec = json.loads(next((tmp_path / "llm").iterdir()).read_text())
    assert "429" in rec["error"] and rec["reply"] is None  # the failure is on record too


def test_timeout(llm_env, tmp_path):
    with FakeLLMServer([ok("too late", delay_s=2.0)]) as server:
        with pytest.raises(LLMError, match=r"timed out after 0.3 s") as e:
            _session(server, tmp_path, timeout_s=0.3).chat(MESSAGES, "generate")
    assert "KERNELGEN_LLM_TIMEOUT" in e.value.hint


def test_401_says_which_key_to_fix_and_never_shows_it(llm_env, tmp_path):
    with FakeLLMServer([status(401, f"Incorrect API key provided: {KEY}")]) as server:
        with pytest.raises(LLMError) as e:
            _session(server, tmp_path).chat(MESSAGES, "generate")
    assert "401" in e.value.message and "OPENAI_API_KEY" in e.value.hint
    assert KEY not in str(e.value)


def test_404_model_not_found(llm_env, tmp_path):
    with FakeLLMServer([status(404, "The model `fake-model` does not exist")]) as server:
        with pytest.raises(LLMError, match=r"model 'fake-model' not found") as e:
            _session(server, tmp_path).chat(MESSAGES, "generate")
    assert "--model" in e.value.hint


def test_5xx_after_retries(llm_env, tmp_path):
    with FakeLLMServer([status(503, "overloaded")] * 2) as server:
        with pytest.raises(LLMError, match=r"server error \(503\)"):
            _session(server, tmp_path, max_retries=1).chat(MESSAGES, "generate")
    assert len(server.requests) == 2


def test_connection_refused(llm_env, tmp_path):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = load_settings({"base_url": f"http://127.0.0.1:{port}/v1", "max_retries": 0})
    with pytest.raises(LLMError, match="cannot connect to http://127.0.0.1"):
        OpenAIChat(settings).complete(MESSAGES, "generate")


def test_replay_answers_in_order_and_runs_out_clearly(llm_env, tmp_path):
    with FakeLLMServer([ok("one"), ok("two")]) as server:
        s = _session(server, tmp_path)
        s.chat(MESSAGES, "generate")
        s.chat(MESSAGES, "repair")
    replay = Session(ReplayChat(tmp_path / "llm"), tmp_path / "again" / "llm")
    assert [replay.chat(MESSAGES, "x").text for _ in range(2)] == ["one", "two"]
    assert replay.usage.calls == 2
    with pytest.raises(LLMError, match="has 2 replies"):
        replay.chat(MESSAGES, "x")
    rec = json.loads(sorted((tmp_path / "again" / "llm").iterdir())[0].read_text())
    assert rec["replayed_from"].endswith("0001_generate.json")


def test_replay_warns_or_refuses_when_the_prompt_differs(llm_env, tmp_path):
    from kernelgen.llm.recording import ReplayMismatchWarning, prompt_difference

    with FakeLLMServer([ok("one")]) as server:
        _session(server, tmp_path).chat(MESSAGES, "generate")
    changed = [MESSAGES[0], {"role": "user", "content": "hello again"}]
    assert prompt_difference(MESSAGES, MESSAGES) is None
    assert prompt_difference(MESSAGES, changed) == ("message 2 (user): 1 line(s) recorded, 1 now differ; "
                                                   "first: recorded 'hello', now 'hello again'")
    assert prompt_difference(MESSAGES, MESSAGES[:1]) == "the recording has 2 messages, this run sends 1"
    replay = Session(ReplayChat(tmp_path / "llm"), tmp_path / "again" / "llm")
    with pytest.warns(ReplayMismatchWarning, match=r"generate prompt differs from the recorded exchange 0001_generate.json: "
                                                   r"message 2 \(user\)"):
        assert replay.chat(changed, "generate").text == "one"
    rec = json.loads(next((tmp_path / "again" / "llm").iterdir()).read_text())
    assert rec["replay_mismatch"].startswith("message 2 (user)")
    with pytest.raises(LLMError, match="differs from the recorded exchange") as e:
        ReplayChat(tmp_path / "llm", mismatch="refuse").complete(changed, "generate")
    assert "--replay-mismatch warn" in e.value.hint
    assert ReplayChat(tmp_path / "llm", mismatch="refuse").complete(MESSAGES, "generate").text == "one"
