"""A small OpenAI-compatible chat server for tests: deterministic answers from the last
user message, a count of requests, the Authorization headers it received, and switches
for failures (status codes to answer first) and for stalling after N answers; ``scripted``
answers are given first, in order. With ``context`` it behaves as a vLLM server of that
context length: ``GET /v1/models`` reports it as ``max_model_len``, ``POST /tokenize`` counts
a chat's tokens (one per word), and a chat whose prompt plus ``max_tokens`` exceeds it is
refused with HTTP 400 (listed in ``refused``). ``delay`` seconds are spent on each chat answer;
``in_flight`` and ``max_in_flight`` count the requests being answered at once; ``fail_tokenize``:
status codes to answer ``/tokenize`` with first."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(messages: list[dict]) -> str:
    """Sub-queries for a question, a ranking for numbered passages."""
    user = messages[-1]["content"]
    count = len(re.findall(r"^\[\d+\]", user, re.M))
    if count:
        return " > ".join(f"[{i}]" for i in range(count, 0, -1))
    question = user.split("Question:", 1)[-1].strip()
    words = question.split()
    return f"{' '.join(words[:3])}\n{' '.join(words[3:])}" if len(words) > 3 else question


def tokens(messages: list[dict]) -> int:
    """A chat's prompt tokens as this server counts them: its words."""
    return sum(len(m["content"].split()) for m in messages)


class ChatServer:
    """Serves ``/v1/chat/completions`` on 127.0.0.1 in a thread (a context manager)."""

    def __init__(self, fail_first: list[int] | None = None, stall_after: int | None = None,
                 scripted: list[str] | None = None, context: int | None = None, model: str = "test-model",
                 delay: float = 0.0, fail_tokenize: list[int] | None = None):
        self.context = context
        self.delay = delay
        self.fail_tokenize = list(fail_tokenize or [])
        self.in_flight = self.max_in_flight = 0
        self.refused: list[int] = []
        self.scripted = list(scripted or [])
        self.requests = 0
        self.authorization: list[str | None] = []
        self.bodies: list[dict] = []
        self.fail_first = list(fail_first or [])
        self.stall_after = stall_after
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status: int, payload: dict) -> None:
                self.done()  # before the answer leaves: a client that has it may send its next request
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.endswith("/models") and server.context:
                    return self.reply(200, {"data": [{"id": model, "max_model_len": server.context}]})
                self.reply(404, {"error": "not found"})

            def done(self) -> None:
                if getattr(self, "counted", False):
                    self.counted = False
                    with server._lock:
                        server.in_flight -= 1

            def do_POST(self):
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self.counted = True
                try:
                    self.answer_post()
                finally:
                    self.done()

            def answer_post(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/tokenize"):
                    with server._lock:
                        failure = server.fail_tokenize.pop(0) if server.fail_tokenize else None
                    if failure:
                        return self.reply(failure, {"error": "try later"})
                    if not server.context:
                        return self.reply(404, {"error": "not found"})
                    return self.reply(200, {"count": tokens(body["messages"]), "max_model_len": server.context})
                if server.context and tokens(body["messages"]) + body["max_tokens"] > server.context:
                    with server._lock:
                        server.refused.append(tokens(body["messages"]))
                    return self.reply(400, {"error": f"maximum context length is {server.context} tokens"})
                with server._lock:
                    server.requests += 1
                    server.authorization.append(self.headers.get("Authorization"))
                    server.bodies.append(body)
                    failure = server.fail_first.pop(0) if server.fail_first else None
                    stall = server.stall_after is not None and server.requests > server.stall_after
                if stall:
                    time.sleep(3600)
                if failure:
                    self.send_response(failure)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b'{"error": "try later"}')
                    return
                time.sleep(server.delay)
                with server._lock:
                    text = server.scripted.pop(0) if server.scripted else answer(body["messages"])
                self.reply(200, {"choices": [{"message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": tokens(body["messages"]),
                                           "completion_tokens": len(text.split())}})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ChatServer":
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()


if __name__ == "__main__":  # serve until killed: python -m tests.unit.llm.server
    with ChatServer() as s:
        print(s.url, flush=True)
        threading.Event().wait()
