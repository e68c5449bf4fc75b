"""Requests per second of single-sentence ``POST /tag`` through the service's real ASGI app in this process, answered
by serve.bentoml_internals.DirectAPIs ("direct") or by BentoML's own dispatch ("bentoml"), in alternated rounds.

    python -m tests.serve.bench_dispatch [--run RUN_DIR] [--requests 2000] [--rounds 3] [--clients 1 32]

No socket and no HTTP parsing: each call is one ASGI call into the app ``bentoml serve`` builds (BentoML's
middlewares, the service's, the router), so the figures compare what the two paths cost, not what a client sees.
The service reads its settings from the environment as ``bentoml serve`` does (TAGGER_BACKEND: int8 unless set).
Without ``--run`` a tiny self-attention POS model (the tests' fixture, 2 epochs) is trained first, in a temporary
folder.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

SENTENCE = json.dumps({"sentences": [["the", "big", "cat", "sees", "a", "dog", "."]]}).encode()


def tiny_run(tmp: Path) -> Path:
    from tests.conftest import train_tiny, write_conllu

    data = tmp / "data"
    (data / "ud_english_ewt").mkdir(parents=True)
    for split, n, seed in (("train", 60, 1), ("dev", 12, 2), ("test", 12, 3)):
        write_conllu(data / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu", n, seed)
    return train_tiny(tmp / "run", data, ["model=self_attention", "model.d_model=32", "model.heads=2",
                                          "model.ffn_dim=32", "trainer.max_epochs=2"])


async def asgi_post(app, path: str, body: bytes) -> tuple[int, bytes]:
    """(status, body) of one JSON POST through ``app`` as uvicorn would make it, without a socket."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:3000"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 3000), "state": {}}
    asked, answered = False, asyncio.Event()
    status, chunks = 0, []

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client stays until it has its answer
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def load(app, requests: int, clients: int) -> float:
    """Requests per second of ``requests`` calls made by ``clients`` concurrent callers, each after the other."""
    async def client(n: int) -> None:
        for _ in range(n):
            status, body = await asgi_post(app, "/tag", SENTENCE)
            if status != 200:
                raise RuntimeError(f"POST /tag answered {status}: {body[:300]!r}")

    start = time.perf_counter()
    await asyncio.gather(*(client(requests // clients) for _ in range(clients)))
    return (requests // clients * clients) / (time.perf_counter() - start)


async def bench(requests: int, rounds: int, clients: list[int]) -> dict[str, dict[int, list[float]]]:
    """One app, its API calls answered by DirectAPIs or by BentoML's dispatch in turn (ABBA...)."""
    from serve.service import TaggingService
    from tests.serve.conftest import bentoml_dispatch

    app = TaggingService.to_asgi()
    rates: dict[str, dict[int, list[float]]] = {"direct": {c: [] for c in clients}, "bentoml": {c: [] for c in clients}}
    async with app.router.lifespan_context(app):  # the service instance is created (the model loaded)
        await load(app, 200, 8)  # warm-up: word table, allocator, first passes
        for r in range(rounds):
            for c in clients:
                for path in ("direct", "bentoml") if r % 2 == 0 else ("bentoml", "direct"):
                    with bentoml_dispatch(app) if path == "bentoml" else contextlib.nullcontext():
                        rates[path][c].append(await load(app, requests, c))
                    print(f"round {r + 1} {path:7s} {c:2d} clients: {rates[path][c][-1]:6.0f} requests/s", flush=True)
    return rates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="run dir to serve (default: train the tiny test model)")
    parser.add_argument("--requests", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32], help="concurrent callers")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-dispatch-") as tmp:
        home = Path(tmp) / "bentoml"
        os.environ["BENTOML_HOME"] = str(home)
        os.environ.setdefault("BENTOML_DO_NOT_TRACK", "True")
        from tests.serve.conftest import model_store, package_into

        package_into(home, args.run or tiny_run(Path(tmp)), "tagger")  # the name the service serves by default
        with model_store(home / "models"):
            rates = asyncio.run(bench(args.requests, args.rounds, args.clients))
    for c in args.clients:
        d, b = rates["direct"][c], rates["bentoml"][c]
        print(f"{c:2d} clients: direct {' / '.join(f'{x:.0f}' for x in d)}, bentoml {' / '.join(f'{x:.0f}' for x in b)}"
              f" requests/s; per request {1e3 / (sum(b) / len(b)) - 1e3 / (sum(d) / len(d)):.3f} ms more through "
              "BentoML's dispatch (means)")


if __name__ == "__main__":
    main()
