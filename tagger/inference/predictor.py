"""In-process prediction for a trained tagger: used by evaluation, reports, packaging and the service.

Long inputs are never truncated: a sentence longer than ``window`` tokens is cut into overlapping
windows, each token taking its tag from the window where it sits farthest from an edge. A model
trained with document context tags whole documents the same way, in windows of its ``doc_window``.
"""
from __future__ import annotations

import functools
import itertools
import logging
from typing import Callable, Hashable, Iterable, NamedTuple, Sequence

import torch
import torch.nn as nn

from tagger.data.encoding import clip_word, collate, document_runs, encode_sentence, padded, sentence_starts
from tagger.data.vocab import PAD_ID, Vocab
from tagger.inference.pass_threads import PassThreads, PassThreadsError
from tagger.inference.passes import plan_passes
from tagger.inference.word_features import WordFeatures
from tagger.limits import BATCH_SIZE, MAX_TOKENS, PASS_COST
from tagger.models.tagger import Tagger
from tagger.schemes import close_entities

log = logging.getLogger(__name__)


def windows(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Cover 0..n with [start, end) spans of at most ``size`` tokens overlapping by ``overlap``."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    if n <= size:
        return [(0, n)]
    spans, start, stride = [], 0, size - overlap
    while True:
        end = min(start + size, n)
        spans.append((start, end))
        if end == n:
            return spans
        start += stride


class TokenPrediction(NamedTuple):  # a tuple: made once per token, so it should cost no more than one
    tag: str
    score: float


def _predictions(tags: Iterable[str], scores: Iterable[float]) -> list[TokenPrediction]:
    """TokenPredictions made by tuple.__new__ in C: the named tuple's own __new__ is a Python call, and one is made
    per token of every answer."""
    return list(map(tuple.__new__, itertools.repeat(TokenPrediction), zip(tags, scores)))


def _streams(count: int) -> PassThreads | None:
    """``count`` streams, or None (passes one after another, with a warning) where this torch build cannot give each
    thread its own intra-op thread count."""
    try:
        return PassThreads(count)
    except PassThreadsError as e:
        log.warning("passes run one after another: %s", e)
        return None


TypeLookup = Callable[[str], "tuple[int, list[int]]"]


def type_lookup(vocab: Vocab, max_word_chars: int = 40, cache_size: int | None = None) -> TypeLookup:
    """word -> (word id, clipped character ids); with ``cache_size`` memoised in an LRU cache of that many words
    (the vocabulary never changes after training, and a few thousand frequent words make most running text)."""
    def lookup(word: str) -> tuple[int, list[int]]:
        return vocab.word_id(word), clip_word(vocab.char_ids(word), max_word_chars)

    return functools.lru_cache(maxsize=cache_size)(lookup) if cache_size else lookup


def encode_batch(vocab: Vocab, sentences: list[list[str]], max_word_chars: int = 40,
                 lookup: TypeLookup | None = None) -> dict[str, torch.Tensor]:
    """Sentences -> the inputs of :class:`InferenceGraph`, each word type looked up once (by ``lookup``, default
    :func:`type_lookup` of ``vocab`` uncached).

    Returns words (B,T) word ids, types (B,T) row of each token in ``type_chars`` (0 on padding),
    type_chars (U,L) character ids of each distinct token (row 0: the empty word of padding), mask (B,T).
    """
    lookup = lookup or type_lookup(vocab, max_word_chars)
    index: dict[str, int] = {}
    types, mask = padded([[index.setdefault(t, len(index) + 1) for t in s] for s in sentences])  # (B,T), (B,T)
    looked_up = [lookup(t) for t in index]  # in row order 1..U-1
    type_words = torch.tensor([PAD_ID] + [w for w, _ in looked_up])  # (U,)
    type_chars, _ = padded([[]] + [c for _, c in looked_up], PAD_ID, min_width=1)  # (U,L)
    return {"words": type_words[types], "types": types, "type_chars": type_chars, "mask": mask}


class InferenceGraph(nn.Module):
    """``Tagger.encode`` in eval mode, with the character CNN run once per distinct word of the batch
    instead of once per padded token position: most of a padded (B,T,L) character grid is padding (in a batch of
    256 EWT sentences ~9% of it is real characters), and a word type recurs across the batch.

    forward(words (B,T), types (B,T), type_chars (U,L), mask (B,T)) -> h (B,T,H), the encoder output the
    tag head decodes. What the Predictor runs, and what ``tagger export`` writes to ONNX.
    ``tests/inference/test_export.py`` checks it equals ``Tagger.encode`` on the padded batch.

    ``char_buckets`` (widths, ascending): the distinct words are grouped by length and each group's characters
    cut to the group's width, so one long token (a URL) does not widen every word's character grid to
    ``max_word_chars``. Exact: padding characters are masked out of the CNN's max. The grouping reads the
    lengths in Python, so the ONNX export builds the graph without it (``()``).
    """

    def __init__(self, tagger: Tagger, char_buckets: Sequence[int] = (8, 16)):
        super().__init__()
        self.embedder, self.encoder = tagger.embedder, tagger.encoder
        self.char_buckets = sorted(char_buckets)

    def forward(self, words: torch.Tensor, types: torch.Tensor, type_chars: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        feats = []
        if self.embedder.word is not None:
            feats.append(self.embedder.lookup(words))  # (B,T,word_dim)
        per_type = self._spelling(type_chars)  # (U,char_filters+case_dim) or None
        if per_type is not None:
            feats.append(per_type[types])  # (B,T,char_filters+case_dim)
        return self.encode(torch.cat(feats, dim=-1), mask)  # (B,T,H)

    def features(self, type_words: torch.Tensor, type_chars: torch.Tensor) -> torch.Tensor:
        """The embedder output of each distinct word: type_words (U,), type_chars (U,L) -> (U,F), the rows that
        ``forward`` gathers per token (what :class:`tagger.inference.word_features.WordFeatures` keeps between
        calls)."""
        feats = [self.embedder.lookup(type_words)] if self.embedder.word is not None else []  # (U,word_dim)
        per_type = self._spelling(type_chars)  # (U,char_filters+case_dim) or None
        return torch.cat(feats + ([per_type] if per_type is not None else []), dim=-1)  # (U,F)

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B,T,F) token features, mask (B,T) -> h (B,T,H)."""
        return self.encoder(x, mask)

    def _spelling(self, type_chars: torch.Tensor) -> torch.Tensor | None:
        """type_chars (U,L) -> (U,char_filters+case_dim), or None for an embedder without character features."""
        U, L = type_chars.shape
        widths = [w for w in self.char_buckets if w < L]
        if not widths:
            out = self.embedder.spelling(type_chars.unsqueeze(0))  # (1,U,F) or None
            return None if out is None else out.squeeze(0)
        lengths = (type_chars != PAD_ID).sum(dim=1)  # (U,)
        order = torch.argsort(lengths)  # (U,) shortest first
        cuts = torch.searchsorted(lengths[order], torch.tensor(widths), right=True).tolist() + [U]
        parts, start = [], 0
        for cut, width in zip(cuts, widths + [L]):
            if cut > start:  # the words of length <= width not in an earlier group, cut to width characters
                part = self.embedder.spelling(type_chars[order[start:cut], :width].unsqueeze(0))  # (1,n,F) or None
                if part is None:
                    return None
                parts.append(part.squeeze(0))
                start = cut
        grouped = torch.cat(parts)  # (U,F) in length order
        return torch.empty_like(grouped).index_copy_(0, order, grouped)  # (U,F) in row order


# a backend maps encode_batch's tensors to the encoder output h (B,T,H): the InferenceGraph itself in
# torch fp32, or another way to compute it (tagger.inference.backends)
Backend = Callable[[dict[str, torch.Tensor]], torch.Tensor]


class TorchBackend:
    """encode_batch's tensors -> h (B,T,H) float32, by a torch module with InferenceGraph's methods (the graph itself,
    or a copy in another precision: tagger.inference.backends). ``rows_to_tags``: (word table (N,F), row ids (B,T)) ->
    (tag ids (B,T), probabilities (B,T)) in one call (:class:`tagger.inference.capture.RowsToTags`), or None."""

    def __init__(self, graph: nn.Module, name: str, rows_to_tags: Callable | None = None):
        self.graph, self.name, self.rows_to_tags = graph.eval(), name, rows_to_tags

    def __call__(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.graph(batch["words"], batch["types"], batch["type_chars"], batch["mask"]).float()

    def features(self, type_words: torch.Tensor, type_chars: torch.Tensor) -> torch.Tensor:
        """(U,), (U,L) -> (U,F) in the graph's dtype: the rows a :class:`tagger.inference.word_features.WordFeatures`
        keeps."""
        return self.graph.features(type_words, type_chars)

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B,T,F), mask (B,T) -> h (B,T,H) float32."""
        return self.graph.encode(x, mask).float()


class _Cut(NamedTuple):
    """The sentences of one predict call as token streams, cut into the pieces forward passes tag
    (:meth:`Predictor._cut`)."""

    runs: list[list[int]]  # the sentences of each token stream, in order
    streams: list[list[str]]  # the tokens of each stream
    offsets: list[list[int]]  # where each sentence of a stream starts in it (the CRF's sentence edges)
    pieces: list[tuple[int, int, int]]  # (stream, start, end): a whole stream, or a window of a long one
    joined: bool  # some stream holds several sentences, so a piece may too


# what a forward pass gives back for merging: (piece, decoder, tag ids, probabilities) of each piece that is not a lone
# sentence tagged whole, per decoder (Predictor._tag_pass)
_TaggedPieces = list[tuple[int, int, list[int], list[float]]]


class Decoder(NamedTuple):
    """One tag head the predictor runs on the encoder output, and what its tag ids name."""

    task: str  # the task's name (a single-task model's: its kind, pos or ner)
    head: nn.Module
    labels: list[str]
    tag_scheme: str | None


def task_decoders(tagger: nn.Module, vocab: Vocab, tasks: Sequence[str] | None = None) -> list[Decoder]:
    """The decoders of ``tasks`` (default: every task of the model, in order): a single-task model's one ``head``, a
    multi-task model's ``heads[NAME]`` (:class:`tagger.models.multitask.MultiTaskTagger`). ValueError for a task the
    model does not have."""
    names = vocab.task_names if tasks is None else list(tasks)
    if not names:
        raise ValueError("tasks: name at least one task of the model")
    views = [vocab.for_task(name) for name in names]  # ValueError naming an unknown task
    if vocab.tasks is None:
        return [Decoder(vocab.task, tagger.head, list(vocab.labels), vocab.tag_scheme)]
    return [Decoder(name, tagger.heads[name], view.labels, view.tag_scheme) for name, view in zip(names, views)]


def _merge_windows(cut: _Cut, pieces: list[tuple[int, list[int], list[float]]]) -> dict[int, tuple[list[int], list[float]]]:
    """Stream -> its tag ids and probabilities, from its pieces in piece order: each token keeps the prediction of the
    window where it is most central (the first on a tie)."""
    merged: dict[int, tuple[list[int], list[float]]] = {}
    margins: dict[int, list[int]] = {}  # streams cut into several windows: each token's best margin so far
    for p, tags, probs in pieces:
        u, a, b = cut.pieces[p]
        n = len(cut.streams[u])
        if b - a == n:  # a document's whole stream in one window
            merged[u] = (tags, probs)
            continue
        if u not in margins:
            margins[u], merged[u] = [-1] * n, ([0] * n, [0.0] * n)
        best, (best_tags, best_probs) = margins[u], merged[u]
        for j in range(b - a):
            margin = min(j, b - a - 1 - j)
            if margin > best[a + j]:
                best[a + j], best_tags[a + j], best_probs[a + j] = margin, tags[j], probs[j]
    return merged


class Predictor:
    """Tags lists of tokens with a trained tagger.

    A model of several tasks (:class:`tagger.models.multitask.MultiTaskTagger`) is run once per pass: the encoder
    output of each pass goes to every head of ``tasks`` (default: all of them, in the model's order). ``predict``
    gives the first of those tasks' tags, ``predict_tasks`` every task's.

    ``backend`` computes the encoder output of a batch (default: the :class:`InferenceGraph` in
    torch); the tag head (softmax or CRF Viterbi + marginals) always runs in torch. A forward pass holds at
    most ``batch_size`` windows and ``max_tokens`` padded positions (None: no token limit); within those limits a
    call is cut into passes where the padding saved is worth more than ``pass_cost`` positions. ``cache_size``:
    words remembered between calls (0: none): on a torch backend each word's encoder input
    (:class:`tagger.inference.word_features.WordFeatures`), on another its id and characters. ``streams`` > 1: a call
    with several passes runs that many at once, each on a thread of its own with its share of torch's intra-op threads
    (:mod:`tagger.inference.pass_threads`); the passes are the same batches, so the tags are the same (a score may
    differ in its last bits where a kernel sums in another order on one thread).
    """

    def __init__(self, tagger: Tagger, vocab: Vocab, batch_size: int = BATCH_SIZE, window: int | None = None,
                 overlap: int = 32, max_word_chars: int = 40, backend: Backend | None = None,
                 max_tokens: int | None = MAX_TOKENS, cache_size: int = 2**16, streams: int = 1,
                 pass_cost: int = PASS_COST, tasks: Sequence[str] | None = None):
        if batch_size < 1 or (max_tokens is not None and max_tokens < 1) or pass_cost < 0:
            raise ValueError(f"need batch_size >= 1, max_tokens >= 1 or None and pass_cost >= 0, got {batch_size}, "
                             f"{max_tokens}, {pass_cost}")
        self.tagger, self.vocab = tagger.eval(), vocab
        self.decoders = task_decoders(self.tagger, vocab, tasks)
        self.task_names = [d.task for d in self.decoders]
        self.batch_size, self.max_word_chars, self.max_tokens = batch_size, max_word_chars, max_tokens
        self.pass_cost = pass_cost  # what one more pass costs, in padded positions (tagger.inference.passes)
        self.graph = InferenceGraph(self.tagger).eval()
        self.backend: Backend = backend or TorchBackend(self.graph, "fp32")
        self.backend_name: str = getattr(self.backend, "name", type(self.backend).__name__)
        split = cache_size and hasattr(self.backend, "encode")  # a backend split at the encoder's input
        # the word table remembers what a word costs, so its lookups need no cache of their own
        self.lookup = type_lookup(vocab, max_word_chars, None if split else cache_size)
        self.words = WordFeatures(self.backend, self.lookup, cache_size) if split else None
        # the word table's rows to tags in one call, where the backend has it (tagger.inference.capture.RowsToTags):
        # traced with a single-task model's one head
        self.rows_to_tags = getattr(self.backend, "rows_to_tags", None) \
            if self.words is not None and vocab.tasks is None else None
        limit = tagger.max_len
        self.window = min(window or limit or 512, limit or 10**9)
        self.overlap = min(overlap, self.window // 4)
        self.doc_window = min(tagger.doc_window, self.window) if tagger.doc_window else None
        # passes side by side on threads of their own, torch's intra-op threads shared out between them
        self.streams = _streams(streams) if streams > 1 else None

    @torch.inference_mode()
    def predict(self, sentences: list[list[str]], docs: Sequence[Hashable] | None = None) -> list[list[TokenPrediction]]:
        """Tags of each sentence. ``docs``: the document of each sentence; for a model trained with
        document context (``Tagger.doc_window``) adjacent sentences of one document are tagged as one
        token stream, in windows of ``doc_window`` tokens overlapping by half, so each sentence sees its
        neighbours as it did in training. Without ``docs``, or for other models, each sentence alone.
        For a model of several tasks: the tags of the predictor's first task (:meth:`predict_tasks`: all)."""
        return self._predict(sentences, docs)[0]

    @torch.inference_mode()
    def predict_tasks(self, sentences: list[list[str]],
                      docs: Sequence[Hashable] | None = None) -> dict[str, list[list[TokenPrediction]]]:
        """Task name -> the tags of each sentence, for every task of the predictor, from one encoder pass."""
        return dict(zip(self.task_names, self._predict(sentences, docs)))

    def _predict(self, sentences: list[list[str]],
                 docs: Sequence[Hashable] | None) -> list[list[list[TokenPrediction]]]:
        """Per decoder, the tags of each sentence."""
        cut = self._cut(sentences, docs)
        passes = self._plan(cut)
        outs: list[list[list[TokenPrediction]]] = [[[] for _ in sentences] for _ in self.decoders]
        pieces = self._run(cut, passes, outs)
        self._merge(cut, pieces, outs)
        return outs

    def _cut(self, sentences: list[list[str]], docs: Sequence[Hashable] | None) -> _Cut:
        """The sentences as token streams (a run of one document's adjacent sentences for a model trained with
        document context, else each sentence alone) and the pieces of them that forward passes tag: a whole stream,
        or the overlapping windows of a stream longer than the window."""
        if self.doc_window and docs is not None:
            runs, size, overlap = document_runs(docs, len(sentences)), self.doc_window, self.doc_window // 2
        else:
            runs, size, overlap = [[s] for s in range(len(sentences))], self.window, self.overlap
        # a lone sentence is its own stream (no copy)
        streams = [sentences[run[0]] if len(run) == 1 else [t for s in run for t in sentences[s]] for run in runs]
        offsets = [[0] if len(run) == 1 else list(itertools.accumulate((len(sentences[s]) for s in run[:-1]), initial=0))
                   for run in runs]
        pieces = []
        for u, tokens in enumerate(streams):
            if len(tokens) > size:
                pieces += [(u, a, b) for a, b in windows(len(tokens), size, overlap)]
            elif tokens:
                pieces.append((u, 0, len(tokens)))
        return _Cut(runs, streams, offsets, pieces, joined=any(len(run) > 1 for run in runs))

    def _plan(self, cut: _Cut) -> list[list[int]]:
        """The pieces of each forward pass (:meth:`_batches`); on several streams the largest passes first, so that no
        stream is left with a large one when the others are done."""
        passes = self._batches([b - a for _, a, b in cut.pieces])
        if self.streams is not None and len(passes) > 1:
            passes.sort(key=lambda c: -len(c) * (cut.pieces[c[-1]][2] - cut.pieces[c[-1]][1]))
        return passes

    def _run(self, cut: _Cut, passes: list[list[int]],
             outs: list[list[list[TokenPrediction]]]) -> list[_TaggedPieces]:
        """Run the passes, side by side on the pass threads where there are several, else in turn; each fills the
        slots of ``outs`` (one list per decoder) of the lone sentences it tags whole and gives back its other pieces
        (:meth:`_tag_pass`)."""
        tag_pass = functools.partial(self._tag_pass, cut, outs)
        if self.streams is not None and len(passes) > 1:
            return self.streams.map(tag_pass, passes)
        return list(map(tag_pass, passes))

    def _tag_pass(self, cut: _Cut, outs: list[list[list[TokenPrediction]]], chunk: list[int]) -> _TaggedPieces:
        """One forward pass over the pieces ``chunk``, on a pass thread, decoded by every decoder. A lone sentence that
        is one piece (nearly every sentence) gets its predictions here, in its own slot of each decoder's ``outs``,
        which no other pass writes: the pass threads make predictions side by side. Every other piece comes back as
        (piece, decoder, tag ids, probabilities) for :meth:`_merge`."""
        runs, streams = cut.runs, cut.streams
        spans = [cut.pieces[p] for p in chunk]
        texts = [streams[u] if b - a == len(streams[u]) else streams[u][a:b] for u, a, b in spans]
        rest = []
        for k, (decoder, (pred, prob)) in enumerate(zip(self.decoders, self._tag_ids(cut, spans, texts))):  # (B,T)
            out, labels = outs[k], decoder.labels
            for p, (u, a, b), tags, probs in zip(chunk, spans, pred.tolist(), prob.tolist()):
                tags, probs = tags[: b - a], probs[: b - a]
                if len(runs[u]) == 1 and b - a == len(streams[u]):
                    out[runs[u][0]] = _predictions(map(labels.__getitem__, tags), probs)
                else:
                    rest.append((p, k, tags, probs))
        return rest

    def _tag_ids(self, cut: _Cut, spans: list[tuple[int, int, int]],
                 texts: list[list[str]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per decoder, tag ids (B,T) and probabilities (B,T) of one pass's pieces: from the word table's rows in one
        traced call where the backend has it (one head) and no piece holds several sentences, else the encoder output,
        computed once, decoded by each tag head, each sentence inside a piece its own chain."""
        if self.rows_to_tags is not None and not cut.joined:  # traced without sentence edges
            return [self.words.tag(texts, self.rows_to_tags)]  # (B,T), (B,T)
        h, mask = self._encode(texts)  # (B,T,H), (B,T)
        starts = sentence_starts([[o - a for o in cut.offsets[u] if a < o < b] for u, a, b in spans],
                                 mask.shape[1]) if cut.joined else None  # (B,T) or None
        return [decoder.head.decode(h, mask, starts) for decoder in self.decoders]  # each (B,T), (B,T)

    def _merge(self, cut: _Cut, pieces: list[_TaggedPieces], outs: list[list[list[TokenPrediction]]]) -> None:
        """The sentences of the pieces the passes gave back, into each decoder's ``outs``: each stream's windows
        merged (:func:`_merge_windows`), then the stream cut back into its sentences, an entity cut at a sentence edge
        made whole (:func:`tagger.schemes.close_entities`)."""
        in_order = sorted(itertools.chain.from_iterable(pieces), key=lambda r: r[0])
        for k, (decoder, out) in enumerate(zip(self.decoders, outs)):
            labels = decoder.labels
            mine = [(p, tags, probs) for p, d, tags, probs in in_order if d == k]
            for u, (tags, probs) in _merge_windows(cut, mine).items():
                run, offsets = cut.runs[u], cut.offsets[u]
                if len(run) == 1:  # a sentence alone, cut into windows
                    out[run[0]] = _predictions(map(labels.__getitem__, tags), probs)
                    continue
                for s, start, end in zip(run, offsets, offsets[1:] + [len(cut.streams[u])]):
                    sentence_tags = close_entities([labels[t] for t in tags[start:end]], decoder.tag_scheme, labels)
                    out[s] = _predictions(sentence_tags, probs[start:end])

    def _encode(self, texts: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token lists -> encoder output h (B,T,H) and mask (B,T)."""
        if self.words is not None:
            return self.words.encode(texts)
        batch = encode_batch(self.vocab, texts, lookup=self.lookup)
        return self.backend(batch), batch["mask"]

    def forget_words(self) -> None:
        """Empty the word cache (a pass over new text then costs what a first pass costs)."""
        if self.words is not None:
            self.words.clear()
        if hasattr(self.lookup, "cache_clear"):
            self.lookup.cache_clear()

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices of the pieces, shortest first, cut into forward passes of at most ``batch_size`` pieces and
        ``max_tokens`` padded positions (pieces x longest piece), where the padding saved is worth more than another
        pass costs (:func:`tagger.inference.passes.plan_passes`): a batch of short sentences is not padded to the length
        of one long one, and a batch of long windows stays small. A piece longer than ``max_tokens`` is a pass of its
        own."""
        return plan_passes(lengths, self.batch_size, self.max_tokens, self.pass_cost)

    def tags(self, sentences: list[list[str]], docs: Sequence[Hashable] | None = None) -> list[list[str]]:
        return [[tp.tag for tp in sent] for sent in self.predict(sentences, docs)]

    @torch.inference_mode()
    def attention(self, tokens: list[str]) -> list[list[list[list[float]]]]:
        """Attention weights of one sentence: [layer][head][query][key] (raises AttentionNotSupported)."""
        if len(tokens) > self.window:
            raise ValueError(f"attention is shown for sentences of at most {self.window} tokens, got {len(tokens)}")
        batch = collate([encode_sentence(self.vocab, tokens)], self.max_word_chars)
        return [w[0].tolist() for w in self.tagger.attention(batch)]  # each (heads,T,T)
