"""FakeOpenAIServer: a scripted stand-in for an OpenAI-compatible server, named as a fake.

The real local server (llama.cpp with grammar-constrained output) never returns invalid JSON, a
wrong verdict count on demand, a 429 with Retry-After, a 503, a hang or a dropped connection, so
those paths are driven by this fake. Each request takes the next scripted reply, then `default`
once the script is spent. A reply is a `Reply` or a (status, content, finish_reason) tuple; `default`
may also be a function of the request's body (`follow_the_schema`: the least reply its schema allows).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER, HANG, DROP, REFUSE = "answer", "hang", "drop", "refuse"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str = ""
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "1"}
    delay_s: float = 0.0  # a slow answer
    # answer; hang: never answer (until the fake stops); drop: close the connection unanswered;
    # refuse: drop, and stop listening, so every later connection is refused.
    action: str = ANSWER
    # The body exactly as sent instead of a chat completion built from content: a proxy's HTML page, a
    # JSON object without choices. Sent with content_type.
    raw_body: str | None = None
    content_type: str = "application/json"


class FakeOpenAIServer:
    def __init__(
        self,
        replies: list[Reply | tuple[int, str, str]] = (),
        default: Reply | Callable[[dict], Reply] | None = None,
    ):
        self.replies = [r if isinstance(r, Reply) else Reply(*r) for r in replies]
        self.default = default or Reply(500, "script exhausted")
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = fake._next(body)
                if reply.action == HANG:
                    fake._stopped.wait()
                elif reply.action in (DROP, REFUSE):
                    self.close_connection = True
                    if reply.action == REFUSE:
                        threading.Thread(target=fake._stop_listening, daemon=True).start()
                else:
                    self._answer(reply, body["model"])

            def _answer(self, reply: Reply, model: str) -> None:
                time.sleep(reply.delay_s)
                data = (reply.raw_body if reply.raw_body is not None else json.dumps(_payload(reply, model))).encode()
                self.send_response(reply.status)
                for name, value in {"Content-Type": reply.content_type, **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._listening = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def _next(self, body: dict) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self.replies:
                return self.replies.pop(0)
        return self.default(body) if callable(self.default) else self.default

    def _stop_listening(self) -> None:
        with self._lock:
            if self._listening:
                self._listening = False
                self._server.shutdown()
                self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()  # releases hanging handlers
        self._stop_listening()


def follow_the_schema(body: dict) -> Reply:
    """The least reply the request's JSON schema allows: every list exactly as long as its minItems."""
    response_format = body["response_format"]
    schema = response_format.get("schema") or response_format["json_schema"]["schema"]
    return Reply(200, json.dumps(_least(schema, schema.get("$defs", {}))))


def _least(schema: dict, defs: dict):
    if "$ref" in schema:
        return _least(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema or "const" in schema:
        return schema.get("enum", [schema.get("const")])[-1]
    kind = str(schema.get("type"))
    if kind == "object":
        return {name: _least(sub, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [_least(schema["items"], defs) for _ in range(schema.get("minItems", 0))]
    return {"string": "x", "boolean": False, "integer": 1, "number": 1.0}[kind]


def _payload(reply: Reply, model: str) -> dict:
    if reply.status != 200:
        return {"error": {"message": reply.content}}
    return {
        "id": "fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": reply.finish_reason,
                "message": {"role": "assistant", "content": reply.content},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
