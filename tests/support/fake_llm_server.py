"""A small OpenAI-compatible server for tests: stdlib http.server on 127.0.0.1 in a thread, answering
`POST /v1/chat/completions` from a script of replies and keeping every request it receives.

    with FakeLLMServer([ok(kernel_reply), status(429)]) as server:
        ... OPENAI_BASE_URL=server.url ...
        server.requests[0]["body"]["messages"]

Driven through the real `openai` client, so retries, timeouts and error mapping are the real ones.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.paths import DATA


@dataclass
class Scripted:
    """One scripted answer: a completion (status 200) or an error status."""

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 50
    reasoning: str | None = None
    finish_reason: str = "stop"
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def ok(content: str, **kw) -> Scripted:  # noqa: ANN003
    return Scripted(content=content, **kw)


def status(code: int, message: str = "scripted error", **kw) -> Scripted:  # noqa: ANN003
    headers = {"retry-after-ms": "10"} if code == 429 or code >= 500 else {}
    headers.update(kw.pop("headers", {}))
    return Scripted(status=code, error_message=message, headers=headers, **kw)


def fenced(code: str, text: str = "Here is the kernel.") -> str:
    return f"{text}\n\n```python\n{code.rstrip()}\n```\n"


# --- kernel texts for broadcast (tests/support/data/broadcast_honest.py is verified against the harness) ---
def honest_kernel() -> str:
    return (DATA / "broadcast_honest.py").read_text(encoding="utf-8")


def wrong_kernel() -> str:
    """Subtracts the bias: compiles, runs, wrong answer."""
    src = honest_kernel()
    assert "+ b[None, :]" in src
    return src.replace("+ b[None, :]", "- b[None, :]")


def cheating_kernel() -> str:
    """Launches the kernel, then computes the answer with PyTorch in the wrapper."""
    src = honest_kernel()
    assert "    return out\n" in src
    return src.replace("    return out\n", "    return x + bias\n")


class FakeLLMServer:
    def __init__(self, script: list[Scripted]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
                pass

            def do_GET(self) -> None:  # /v1/models, for completeness
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append({"path": self.path, "body": body,
                                            "headers": {k.lower(): v for k, v in self.headers.items()}})
                    step = server.script.pop(0) if server.script else None
                if step is None:
                    self._send(400, {"error": {"message": "fake server: the script has no more replies"}},
                               {"x-should-retry": "false"})
                    return
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.status != 200:
                    self._send(step.status, {"error": {"message": step.error_message, "type": "scripted"}}, step.headers)
                    return
                message = {"role": "assistant", "content": step.content}
                if step.reasoning is not None:
                    message["reasoning_content"] = step.reasoning
                self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "?"),
                    "choices": [{"index": 0, "message": message, "finish_reason": step.finish_reason}],
                    "usage": {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                              "total_tokens": step.prompt_tokens + step.completion_tokens},
                }, step.headers)

            def _send(self, code: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FakeLLMServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.httpd.shutdown()
        self.httpd.server_close()

    def messages(self, i: int) -> list[dict]:
        return self.requests[i]["body"]["messages"]
