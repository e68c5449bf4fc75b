"""The tagging service: ``bentoml serve serve.service:TaggingService``.

Endpoints (JSON): ``POST /tag``, ``POST /entities``, ``POST /attention``, ``GET /model``, the page
``GET /ui``, and BentoML's own ``/livez``, ``/readyz``, ``/metrics``, ``/docs`` (``/docs.json``: the
contract, :mod:`serve.openapi`).

One service, one process per worker: :class:`TaggingService` holds the packaged model — a class-level
``BentoModel``, so ``bentoml build`` ships it — loaded once per worker on the backend ``TAGGER_BACKEND``
(:mod:`tagger.inference.backends`), validates and tokenises requests, and gathers the sentences of concurrent
requests into one model pass without waiting on a clock (:class:`serve.batching.GreedyBatcher`;
BentoML's adaptive batching kept single requests waiting long after a burst).

Every ``TAGGER_*`` setting (``TAGGER_MODEL`` picks the model, default ``tagger:latest``) is read and checked once, at
import, by :mod:`serve.settings`; the request limits among them are applied in :mod:`serve.schemas`.
"""
from __future__ import annotations

import gc
import itertools
from pathlib import Path
from typing import Any

import anyio
import bentoml
import prometheus_client
from bentoml.models import BentoModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Route

from serve.batching import GreedyBatcher
from serve.bentoml_internals import DirectAPIs, fix_bentoml_timeout, openapi_document
from serve.memory import HeapTrimmer
from serve.middleware import BodyLimit
from serve.openapi import ServeContract
from serve.schemas import (
    LIMITS, AttentionRequest, AttentionResponse, AttentionToken, EntitiesResponse, Entity, EntitySequence,
    TagRequest, TagResponse,
)
from serve.settings import get_settings
from tagger.api import join_sentences, make_sentence, make_task_sentence
from tagger.tokenize import sentences as split_sentences

fix_bentoml_timeout()  # else every request stays in memory for traffic.timeout seconds
SETTINGS = get_settings()  # a bad TAGGER_* value stops `bentoml serve` here, naming the variable
BACKEND = SETTINGS.backend
UI_PAGE = Path(__file__).with_name("ui") / "index.html"
API_PATHS = ("/tag", "/entities", "/attention")
# BentoML records no trace unless a sample rate is configured (tracing.sample_rate, default 0), yet its OpenTelemetry
# middleware opens a span for every request, on the event loop that every request shares. The API routes skip it
# unless TAGGER_TRACING=1, for a deployment that sets a sample rate and an exporter (requests/s with and without it:
# docs/reference.md, "Speed, reliability and scaling").
TRACING = {} if SETTINGS.tracing else {"excluded_urls": [f"{p}$" for p in API_PATHS]}
MODEL = BentoModel(SETTINGS.model)
# Prometheus (GET /metrics): sentences per model pass, i.e. how much concurrent requests were merged. BentoML's
# `bentoml serve` starts each worker with PROMETHEUS_MULTIPROC_DIR set, so the worker's metrics reach /metrics.
BATCH_SENTENCES = prometheus_client.Histogram(name="tagger_batch_sentences", documentation="sentences per model pass",
                                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))


def check_store_entry(reference: BentoModel) -> None:
    """Refuse to start on a corrupted store entry. Runs at import, i.e. in ``bentoml serve`` and
    ``bentoml build`` before any worker starts: a worker failing in ``__init__`` would be restarted
    forever while the entry service waits. A model absent from the local store is left to BentoML."""
    from bentoml.exceptions import NotFound

    from tagger.artifacts.package_format import check_parts

    try:
        stored = bentoml.models.get(reference.tag)
    except NotFound:
        return
    check_parts(Path(stored.path), dict(stored.info.metadata), str(stored.tag))


check_store_entry(MODEL)


def _reject(message: str, loc: list[Any], status: int = 400) -> JSONResponse:
    """The same shape as BentoML's own validation errors: the field is in ``detail[].loc``."""
    return JSONResponse({"error": message, "detail": [{"loc": loc, "msg": message}]}, status_code=status)


def _tokenize_all(texts: list[str], field: str = "texts",
                  convention: str = "ud") -> list[list[list[tuple[str, int, int]]]] | JSONResponse:
    """Each text as sentences of (token, start, end), cut as the model's training corpus was (tagger.tokenize)."""
    out = []
    for i, text in enumerate(texts):
        sents = split_sentences(text, convention)
        tokens = [t for sent in sents for t in sent]
        name, loc = (f"{field}[{i}]", [field, i]) if field == "texts" else (field, [field])
        if not tokens:
            return _reject(f"{name} has no tokens (it is only whitespace)", loc)
        if len(tokens) > LIMITS.tokens:
            return _reject(f"{name} has {len(tokens)} tokens; the limit is {LIMITS.tokens} tokens per text "
                           "(TAGGER_MAX_TOKENS)", loc)
        out.append(sents)
    return out


def _task_kinds(metadata: dict[str, Any]) -> dict[str, tuple[str, str | None]] | None:
    """A multi-task model's tasks, name -> (kind, tag scheme), from its package metadata; None for a model of one
    task."""
    tasks = metadata.get("tasks")
    return {name: (card["task"], card.get("tag_scheme")) for name, card in tasks.items()} if tasks else None


async def _ui(request: Request) -> FileResponse:
    return FileResponse(UI_PAGE, media_type="text/html")


async def _model(request: Request) -> JSONResponse:
    return await bentoml.get_current_service().model_card()


pages = Starlette(routes=[Route("/ui", _ui), Route("/model", _model)])


@bentoml.asgi_app(pages, path="/")
# BentoML's access log writes a line per request through Python's logging, on the event loop (its share of the loop's
# time: docs/reference.md, "The service"). Off unless TAGGER_ACCESS_LOG=1; /metrics still counts every request by route
# and status.
@bentoml.service(name="tagger", workers=SETTINGS.workers, traffic={"timeout": 300},
                 tracing=TRACING, logging={"access": {"enabled": SETTINGS.access_log}})
class TaggingService:
    bento_model = MODEL

    def __init__(self) -> None:
        import torch

        from tagger.inference.backends import make_predictor
        from tagger.artifacts.packaged import load_packaged

        if threads := SETTINGS.torch_threads:
            torch.set_num_threads(threads)
        # a missing file, a weights hash mismatch or an unreadable part raises here: the worker
        # does not start, rather than serve a half model
        packaged = load_packaged(self.bento_model)
        # forward passes of at most TAGGER_BATCH_SIZE windows and TAGGER_BATCH_TOKENS padded tokens: the sentences
        # of merged requests, shortest first, are not all padded to the longest one's length
        self.predictor = make_predictor(packaged.tagger, packaged.vocab, BACKEND, threads=threads or None,
                                        streams=SETTINGS.streams, batch_size=SETTINGS.batch_size,
                                        max_tokens=SETTINGS.batch_tokens)
        self._info = {"tag": packaged.tag, "metadata": packaged.metadata, "config": packaged.config,
                      "window": self.predictor.window, "doc_window": self.predictor.doc_window,
                      "tokenizer": packaged.vocab.tokenizer, "backend": self.predictor.backend_name}
        self.trimmer = HeapTrimmer(SETTINGS.trim_interval)
        self._calls = itertools.count()  # a document id per call: calls merged into one pass stay apart
        self.batcher = GreedyBatcher(self._tag_sentences, max_items=SETTINGS.max_batch,
                                     on_pass=BATCH_SENTENCES.observe)
        # everything loaded so far (model, vocabulary, vectors, BentoML and its imports) lives as long as the worker:
        # frozen out of the collector's sight, so that a full collection does not rescan it and pause the worker
        # (what a rescan costs on the default POS model: docs/reference.md, "What the predictor does for speed")
        gc.freeze()

    def _tag_sentences(self, items: list[tuple[int, list[str]]]) -> list[Any]:
        sentences, docs = [s for _, s in items], [d for d, _ in items]
        if self.predictor.vocab.tasks is None:
            out: list[Any] = self.predictor.predict(sentences, docs)  # (tag, score) named tuples
        else:  # one encoder pass, every head: per sentence, task name -> (tag, score) per token
            by_task = self.predictor.predict_tasks(sentences, docs)
            out = [{name: tagged[i] for name, tagged in by_task.items()} for i in range(len(sentences))]
        self.trimmer.maybe_trim()  # freed tensor memory back to the OS, at most every TAGGER_TRIM_INTERVAL s
        return out

    async def predict(self, sentences: list[list[str]]) -> list[Any]:
        """Tags of sentences: [(tag, probability)] per token (a multi-task model: task name -> that list);
        concurrent calls share model passes. The sentences of one call are one document (context for a model
        trained with ``data.doc_window``)."""
        doc = next(self._calls)
        return await self.batcher([(doc, s) for s in sentences])

    def _attention(self, tokens: list[str]) -> list[list[list[list[float]]]]:
        weights = self.predictor.attention(tokens)
        return [[[[round(w, 4) for w in row] for row in head] for head in layer] for layer in weights]

    async def info(self) -> dict[str, Any]:
        return self._info

    async def model_card(self) -> JSONResponse:
        info = self._info
        meta = info["metadata"]
        tasks = {"tasks": {name: {"task": card.get("task"), "tag_scheme": card.get("tag_scheme"),
                                  "labels": card.get("labels"),
                                  "metrics": {"main": card.get("main_metric"), "dev": card.get("dev"),
                                              "test": card.get("test")}}
                           for name, card in meta["tasks"].items()}} if meta.get("tasks") else {}
        return JSONResponse({
            "name": info["tag"], "task": meta.get("task"), "tag_scheme": meta.get("tag_scheme"),
            "labels": meta.get("labels"), **tasks,
            "metrics": {"main": meta.get("main_metric"), "dev": meta.get("dev"), "test": meta.get("test")},
            "supports_attention": meta.get("supports_attention"), "window": info["window"],
            "doc_window": info.get("doc_window"), "backend": info.get("backend"),
            "limits": vars(LIMITS), "config": info["config"],
            "provenance": {k: meta.get(k) for k in ("data", "model", "head", "params", "data_files", "git",
                                                    "checkpoint", "run_dir", "command", "weights_sha256", "init_from")},
        })

    async def _tagged(self, sentences: list[list[str]] | None,
                      texts: list[str] | None) -> list[dict[str, Any]] | JSONResponse:
        """Per given sentence or text: tokens, tags, scores, offsets (texts) and spans (NER) as the Python API
        gives them (tagger.api.join_sentences), or a 400 response. A text is tagged sentence by sentence."""
        info = await self.info()
        task = info["metadata"].get("task")
        if sentences is not None:
            groups = [[(s, None)] for s in sentences]
        else:
            tokenized = await anyio.to_thread.run_sync(_tokenize_all, texts, "texts", info.get("tokenizer", "ud"))
            if isinstance(tokenized, JSONResponse):
                return tokenized
            groups = [[([w for w, _, _ in s], [(a, b) for _, a, b in s]) for s in sents] for sents in tokenized]
        predictions = iter(await self.predict([words for group in groups for words, _ in group]))
        kinds = _task_kinds(info["metadata"])
        if kinds is not None:
            return [join_sentences([make_task_sentence(words, {name: ([t for t, _ in p], [sc for _, sc in p])
                                                               for name, p in by_task.items()}, kinds,
                                                       offsets, texts[i] if texts is not None else None)
                                    for (words, offsets), by_task in zip(group, predictions)], task)
                    for i, group in enumerate(groups)]
        return [join_sentences([make_sentence(words, [t for t, _ in p], [sc for _, sc in p], offsets,
                                              texts[i] if texts is not None else None, task,
                                              info["metadata"].get("tag_scheme") or "IOB2")
                                for (words, offsets), p in zip(group, predictions)], task)
                for i, group in enumerate(groups)]

    @bentoml.api(input_spec=TagRequest, output_spec=TagResponse)
    async def tag(self, sentences: list[list[str]] | None = None,
                  texts: list[str] | None = None) -> TagResponse | JSONResponse:
        """Tag pre-tokenised `sentences` or raw `texts`: text, tag and probability per token (and, for
        texts, character offsets). Long inputs are windowed by the model, never truncated."""
        tagged = await self._tagged(sentences, texts)
        if isinstance(tagged, JSONResponse):
            return tagged
        info = await self.info()
        results = []
        for seq in tagged:
            where = seq["offsets"] or [(None, None)] * len(seq["tokens"])
            tokens = [{"text": w, "tag": tag, "score": score, "start": a, "end": b}
                      for w, tag, score, (a, b) in zip(seq["tokens"], seq["tags"], seq["scores"], where)]
            for name, answer in (seq.get("tasks") or {}).items():  # a multi-task model: every task per token
                for token, tag, score in zip(tokens, answer["tags"], answer["scores"]):
                    token.setdefault("tasks", {})[name] = {"tag": tag, "score": score}
            results.append({"tokens": tokens})
        # validated in one call (pydantic-core), not one model per token: the per-token objects showed in the profile
        return TagResponse.model_validate({"model": info["tag"], "task": info["metadata"]["task"], "results": results})

    @bentoml.api(input_spec=TagRequest, output_spec=EntitiesResponse)
    async def entities(self, sentences: list[list[str]] | None = None,
                       texts: list[str] | None = None) -> EntitiesResponse | JSONResponse:
        """Entity spans {text, label, start, end, score} of an NER model (of a multi-task model: of its first entity
        task)."""
        info = await self.info()
        kinds = _task_kinds(info["metadata"]) or {}
        if info["metadata"].get("task") != "ner" and "ner" not in {kind for kind, _ in kinds.values()}:
            return _reject(f"/entities needs an NER model; {info['tag']} is a {info['metadata'].get('task')} "
                           "tagger (use /tag)", ["model"], status=404)
        tagged = await self._tagged(sentences, texts)
        if isinstance(tagged, JSONResponse):
            return tagged
        results = [EntitySequence(entities=[Entity(**span) for span in seq["spans"]]) for seq in tagged]
        return EntitiesResponse(model=info["tag"], results=results)

    @bentoml.api(input_spec=AttentionRequest, output_spec=AttentionResponse)
    async def attention(self, tokens: list[str] | None = None,
                        text: str | None = None) -> AttentionResponse | JSONResponse:
        """Attention weights of one sentence, per layer and head (self-attention models only)."""
        info = await self.info()
        if not info["metadata"].get("supports_attention"):
            return _reject(f"{info['tag']} has no attention weights to show (its encoder is "
                           f"{info['config']['model']['_target_'].rsplit('.', 1)[-1]})", ["model"], status=404)
        limit = min(LIMITS.attention_tokens, info["window"])
        if text is not None:
            tokenized = await anyio.to_thread.run_sync(_tokenize_all, [text], "text", info.get("tokenizer", "ud"))
            if isinstance(tokenized, JSONResponse):
                return tokenized
            toks = [AttentionToken(text=w, start=a, end=b) for sent in tokenized[0] for w, a, b in sent]
        else:
            toks = [AttentionToken(text=w) for w in tokens]
        if len(toks) > limit:
            return _reject(f"{'text' if text is not None else 'tokens'} has {len(toks)} tokens; attention is shown "
                           f"for at most {limit} tokens (TAGGER_MAX_ATTENTION_TOKENS / model window)",
                           ["text" if text is not None else "tokens"])
        weights = await self.batcher.run_exclusive(self._attention, [t.text for t in toks])
        return AttentionResponse(model=info["tag"], tokens=toks, layers=len(weights),
                                 heads=len(weights[0]) if weights else 0, weights=weights)


TaggingService.add_asgi_middleware(BodyLimit, max_bytes=LIMITS.body_bytes, paths=API_PATHS)
TaggingService.add_asgi_middleware(ServeContract, spec=lambda: openapi_document(TaggingService))
TaggingService.add_asgi_middleware(DirectAPIs, service=TaggingService, apis=("tag", "entities"))
