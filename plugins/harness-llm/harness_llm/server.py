"""An OpenAI-compatible chat server on 127.0.0.1 around an in-process model.

    harness-llm-serve --model /path/SmolLM2-135M-Instruct.Q4_1.gguf --port 8080

Speaks ``POST /v1/chat/completions`` (non-streaming) and ``GET /v1/models``, enough for the
official ``openai`` SDK, so the OpenAI provider (``openai:NAME`` with ``base_url``) can run
against a real model anywhere. Requests are answered one at a time.
"""

from __future__ import annotations

import argparse
import http.server
import json
import time
import uuid
from typing import Any

from harness import HarnessError
from harness_llm.api import Message
from harness_llm.local import LocalLLM

__all__ = ["main", "make_server"]


def make_server(model: str, port: int = 0, device: str = "cpu") -> http.server.ThreadingHTTPServer:
    """A server ready to ``serve_forever()``; port 0 picks a free one (``server.server_address``)."""
    llm = LocalLLM(model, device=device, cache=False)
    llm.load()  # fail here, not on the first request
    served_name = model.rsplit("/", 1)[-1]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": served_name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                messages = [Message(m["role"], m["content"]) for m in body["messages"]]
                max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
                temperature = float(body.get("temperature") or 0.0)
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}})
                return
            try:
                answer = llm.complete(messages, max_tokens=max_tokens, temperature=temperature)
            except HarnessError as exc:
                self._send(500, {"error": {"message": str(exc), "type": "server_error"}})
                return
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", served_name),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer.text},
                            "finish_reason": "stop" if answer.output_tokens < max_tokens else "length",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": answer.input_tokens,
                        "completion_tokens": answer.output_tokens,
                        "total_tokens": answer.input_tokens + answer.output_tokens,
                    },
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a .gguf file or a transformers model directory")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    server = make_server(args.model, args.port, args.device)
    print(f"serving {args.model} at http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
