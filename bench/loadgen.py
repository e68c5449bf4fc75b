"""A bounded, closed-loop HTTP load generator for the tagging service.

``python -m bench.loadgen --url http://127.0.0.1:3000/tag --clients 32 --duration 30``

Each of ``--clients`` clients sends one request, waits for its answer, and sends the next, until
``--duration`` seconds have passed (a request started before then is awaited, at most
``--timeout`` seconds). Bounded in concurrency, time and per-request wait, so it measures the
service rather than an ever-growing queue. Requests carry ``--sentences`` EWT test sentences each
(``{"sentences": [[token, ...], ...]}``), cycling through the corpus; ``--tokens 20`` instead sends
sentences of exactly 20 tokens (the latency target). An answer counts as an error unless it is HTTP
200 with one tag per token sent. ``--get`` sends bodiless GETs instead (``--url .../livez``: what the
server costs per request before any tagging). With ``--pid`` the RSS of that process and its children is sampled
every second (the soak test). Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

EWT_SPLIT = "ud_english_ewt/en_ewt-ud-{split}.conllu"
JSON_HEADERS = {"Content-Type": "application/json"}
REPO = Path(__file__).resolve().parents[1]


@dataclass
class LoadResult:
    clients: int
    duration_s: float
    sentences_per_request: int
    requests: int = 0
    tokens: int = 0
    errors: Counter = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, MB)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 2) if lat else None

        out = {
            "clients": self.clients,
            "duration_s": round(self.duration_s, 2),
            "sentences_per_request": self.sentences_per_request,
            "requests": self.requests,
            "ok": len(lat),
            "errors": sum(self.errors.values()),
            "error_kinds": dict(self.errors),
            "requests_per_s": round(len(lat) / self.duration_s, 1) if self.duration_s else None,
            "tokens_per_s": round(self.tokens / self.duration_s, 1) if self.duration_s else None,
            "p50_ms": pct(50),
            "p95_ms": pct(95),
            "p99_ms": pct(99),
            "max_ms": round(lat[-1], 2) if lat else None,
            "mean_ms": round(statistics.fmean(lat), 2) if lat else None,
        }
        if self.rss_mb:
            out["memory"] = memory_summary(self.rss_mb)
        return out


def memory_summary(samples: list[tuple[float, float]], warmup_fraction: float = 0.2) -> dict[str, Any]:
    """RSS over a run: after a warm-up (first 20% of the samples, when arenas and caches fill), the
    growth and the least-squares slope in MB/min; "stable" = under 20 MB and 5% growth after warm-up."""
    t = [s for s, _ in samples]
    mb = [m for _, m in samples]
    k = max(1, int(len(samples) * warmup_fraction))
    tail_t, tail_mb = t[k - 1:], mb[k - 1:]
    slope = 0.0
    if len(tail_t) > 1 and tail_t[-1] > tail_t[0]:
        mt, mm = statistics.fmean(tail_t), statistics.fmean(tail_mb)
        var = sum((x - mt) ** 2 for x in tail_t)
        slope = sum((x - mt) * (y - mm) for x, y in zip(tail_t, tail_mb)) / var * 60 if var else 0.0
    growth = tail_mb[-1] - tail_mb[0]
    return {
        "rss_start_mb": round(mb[0], 1),
        "rss_after_warmup_mb": round(tail_mb[0], 1),
        "rss_end_mb": round(mb[-1], 1),
        "rss_max_mb": round(max(mb), 1),
        "growth_after_warmup_mb": round(growth, 1),
        "slope_mb_per_min": round(slope, 2),
        "samples": len(samples),
        "stable": growth < max(20.0, 0.05 * tail_mb[0]),
    }


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its children (BentoML serves from worker processes)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def ewt_split(data_dir: str | Path, split: str = "test") -> tuple[list[list[str]], list[list[str]]]:
    """The tokens and UPOS tags of one EWT split (the benches' text)."""
    from tagger.data.readers import read_conllu

    path = Path(data_dir) / EWT_SPLIT.format(split=split)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the EWT {split} split (set --data-dir or TAGGER_DATA_DIR)")
    sents = read_conllu(path)
    return [s["tokens"] for s in sents], [s["tags"] for s in sents]


def load_sentences(data_dir: str | Path) -> list[list[str]]:
    return ewt_split(data_dir, "test")[0]


def payloads(sentences: list[list[str]], per_request: int, tokens: int | None = None) -> list[list[list[str]]]:
    """The sentence list of each request, in corpus order (the clients cycle through them)."""
    if tokens is not None:  # sentences of exactly `tokens` tokens, cut from the running text
        words = [w for s in sentences for w in s]
        pool = [words[i:i + tokens] for i in range(0, len(words) - tokens, tokens)]
    else:
        pool = [s for s in sentences if s]
    return [pool[i:i + per_request] for i in range(0, len(pool) - per_request + 1, per_request)]


def answered_5xx(load: dict[str, Any]) -> int:
    """How many answers of a :func:`run_load` summary had a 5xx status, as its clients counted them."""
    return sum(n for kind, n in load["error_kinds"].items() if kind.startswith("http_5"))


def _tags_per_sentence(body: Any) -> list[int] | None:
    """Number of tags the service returned for each sentence, whatever the exact response shape:
    a list of sentences, or {"sentences": [...]} / {"results": [...]}, each sentence a list of tags or
    token objects, or an object with a "tags" or "tokens" list."""
    if isinstance(body, dict):
        for key in ("sentences", "results", "tagged", "predictions"):
            if isinstance(body.get(key), list):
                body = body[key]
                break
    if not isinstance(body, list):
        return None
    counts = []
    for sent in body:
        if isinstance(sent, dict):
            sent = sent.get("tags", sent.get("tokens"))
        if not isinstance(sent, list):
            return None
        counts.append(len(sent))
    return counts


async def _client(session, url: str, bodies: Iterator[tuple[list[list[str]], bytes]], deadline: float, timeout: float,
                  result: LoadResult, get: bool = False) -> None:
    import aiohttp

    limit = aiohttp.ClientTimeout(total=timeout)
    while time.perf_counter() < deadline:
        sents, body = next(bodies)  # clients share one event loop thread: no lock needed
        started = time.perf_counter()
        request = (session.get(url, timeout=limit) if get else
                   session.post(url, data=body, headers=JSON_HEADERS, timeout=limit))
        try:
            async with request as r:
                raw = await r.read()
                status = r.status
        except asyncio.TimeoutError:
            result.requests += 1
            result.errors["timeout"] += 1
            continue
        except aiohttp.ClientError as e:
            result.requests += 1
            result.errors[type(e).__name__] += 1
            await asyncio.sleep(0.05)  # a refused connection would otherwise spin
            continue
        elapsed = (time.perf_counter() - started) * 1000
        result.requests += 1
        if status != 200:
            result.errors[f"http_{status}"] += 1
            continue
        if get:  # a probe such as /livez: any 200 answer is right
            result.latencies_ms.append(elapsed)
            continue
        try:
            counts = _tags_per_sentence(json.loads(raw))
        except ValueError:
            counts = None
        if counts != [len(s) for s in sents]:
            result.errors["wrong_answer"] += 1
            continue
        result.latencies_ms.append(elapsed)
        result.tokens += sum(counts)


async def _run(url: str, clients: int, duration: float, bodies: Iterator[tuple[list[list[str]], bytes]], timeout: float,
               per_request: int, pid: int | None, get: bool = False) -> LoadResult:
    import aiohttp

    result = LoadResult(clients, duration, per_request)
    stop = threading.Event()
    started = time.perf_counter()

    def sample() -> None:
        while not stop.is_set():
            result.rss_mb.append((time.perf_counter() - started, tree_rss_mb(pid)))
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True) if pid else None
    if sampler:
        sampler.start()
    connector = aiohttp.TCPConnector(limit=clients, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + duration
        await asyncio.gather(*(_client(session, url, bodies, deadline, timeout, result, get) for _ in range(clients)))
    result.duration_s = time.perf_counter() - started
    stop.set()
    if sampler:
        sampler.join()
        result.rss_mb.append((result.duration_s, tree_rss_mb(pid)))
    return result


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Every object alive on entry out of the garbage collector's sight until exit (``gc.freeze``), as a service
    worker keeps its loaded model: a measurement then does not time full collections rescanning it."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_load(url: str, clients: int, duration: float, sentences: list[list[str]], per_request: int = 1,
             tokens: int | None = None, timeout: float = 30.0, pid: int | None = None,
             get: bool = False) -> dict[str, Any]:
    """Drive the service at ``url`` with ``clients`` closed-loop clients for ``duration`` seconds. ``get``: GET
    ``url`` instead (no body; every 200 answer counts), e.g. ``/livez`` for the server's per-request floor."""
    if clients < 1 or duration <= 0 or per_request < 1:
        raise ValueError("need clients >= 1, duration > 0 and sentences per request >= 1")
    # each request's sentences and its JSON body, encoded once before the clients start rather than per request
    bodies = itertools.repeat(([], b"")) if get else itertools.cycle(
        [(g, json.dumps({"sentences": g}).encode()) for g in payloads(sentences, per_request, tokens)])
    # the client's own heap (corpus, imports) out of the collector's sight while it measures: else a full
    # collection in this process pauses every client at once and shows up as the service's latency
    with frozen_heap():
        result = asyncio.run(_run(url, clients, duration, bodies, timeout, per_request, pid, get))
    out = result.summary()
    out["tokens_per_sentence"] = None if get else tokens if tokens is not None else "EWT test sentences"
    return out


def wait_ready(base_url: str, timeout: float = 120.0, proc=None) -> None:
    """Poll ``/readyz`` (BentoML's readiness endpoint) until it answers 200."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the service exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base_url.rstrip("/") + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{base_url} not ready after {timeout:.0f} s")


# -- a private service to load ----------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_service(run_dir: Path, work: Path, threads: int, log_path: Path,
                    access_log: bool = False) -> Iterator[tuple[str, int, dict]]:
    """Package ``run_dir`` into a private BentoML store and serve it on a free loopback port.
    Yields (base url, server pid, environment); stops the whole process group afterwards. ``access_log``: the
    service logs every request (``TAGGER_ACCESS_LOG=1``), which :func:`server_errors` reads."""
    env = dict(os.environ, BENTOML_HOME=str(work / "bentoml"), TAGGER_MODEL="tagger-bench:latest",
               TAGGER_TORCH_THREADS=str(threads), BENTOML_DO_NOT_TRACK="True")
    if access_log:
        env["TAGGER_ACCESS_LOG"] = "1"
    r = subprocess.run([sys.executable, "-m", "tagger.commands.package", str(run_dir), "--name", "tagger-bench"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"packaging {run_dir} failed:\n{r.stderr[-3000:]}")
    port = free_port()
    bentoml = str(Path(sys.executable).with_name("bentoml"))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([bentoml, "serve", "serve.service:TaggingService", "--host", "127.0.0.1", "--port", str(port)],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, timeout=300, proc=proc)
        yield base, proc.pid, env
    finally:
        stop_group(proc)


def server_errors(log_path: Path) -> list[str]:
    """Access-log lines of requests the service answered with a 5xx (a service started with ``access_log``).
    (BentoML also logs every 400 validation error as ``[ERROR]`` with a traceback: those are correct answers, not
    counted.)"""
    return [ln for ln in log_path.read_text(errors="replace").splitlines() if re.search(r"\(status=5\d\d\b", ln)]


def stop_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Stop ``bentoml serve`` and every worker it started: SIGTERM, then SIGKILL after ``grace``
    seconds. The workers are found as children, not by process group: BentoML's process manager
    starts some of them in process groups of their own, which a killpg alone would orphan."""
    import psutil

    try:
        procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    proc.poll()


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000/tag")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds (default: %(default)s)")
    parser.add_argument("--sentences", type=int, default=1, help="sentences per request (default: %(default)s)")
    parser.add_argument("--tokens", type=int, help="send sentences of exactly this many tokens")
    parser.add_argument("--get", action="store_true", help="GET --url with no body (e.g. /livez); any 200 is right")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, seconds")
    parser.add_argument("--pid", type=int, help="sample this process tree's RSS every second")
    parser.add_argument("--data-dir", default=os.environ.get("TAGGER_DATA_DIR", "data"))
    parser.add_argument("--max-errors", type=int, help="exit 1 if more errors than this (e.g. 0 for the soak test)")
    args = parser.parse_args(argv)
    out = run_load(args.url, args.clients, args.duration, [] if args.get else load_sentences(args.data_dir),
                   args.sentences, args.tokens, args.timeout, args.pid, args.get)
    print(json.dumps(out))
    failed = args.max_errors is not None and out["errors"] > args.max_errors
    if args.pid and out.get("memory") and not out["memory"]["stable"]:
        print("memory grew after warm-up: " + json.dumps(out["memory"]), file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
