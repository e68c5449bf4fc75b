"""Offline prediction with a trained tagger.

``python -m tagger.predict RUN_DIR|best.json|CKPT|NAME:VERSION [--input FILE|-] [--format tokens|conll|jsonl]
[--tokenize] [--output FILE|-]``

Input (``--format``, default ``tokens``):

* ``tokens`` — one pre-tokenised sentence per line, tokens separated by whitespace; with
  ``--tokenize`` each line is raw text, split by :func:`tagger.tokenize.tokenize`;
* ``conll`` — one token per line (first column), a blank line between sentences, ``#`` comments
  skipped; a ``-DOCSTART-`` line starts a new document;
* ``jsonl`` — one JSON object per line, ``{"tokens": [...]}`` or ``{"text": "..."}``, optionally with
  ``"doc": "..."`` (adjacent lines with one ``doc`` are one document).

A model trained with document context (``data.doc_window``) tags each document's sentences together;
sentences without a document (``tokens`` format, jsonl lines without ``doc``) are tagged alone.

Output: one JSON line per input sentence, ``{"tokens": [...], "tags": [...], "scores": [...]}``
(plus ``"text"`` and ``"offsets": [[start, end], ...]`` for raw text). The same weights give the
same tags here and through the service, which is how the service is tested.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

from tagger.tokenize import tokenize

CHUNK = 1024  # sentences predicted at a time: bounded memory on any input size


class InputError(ValueError):
    """A malformed input line; the message starts with ``source:line:``."""


def read_sentences(lines: Iterable[str], fmt: str, raw_text: bool, source: str = "<input>") -> Iterator[dict[str, Any]]:
    """Yield ``{"tokens": [...]}`` (plus ``"text"``, ``"offsets"`` for raw text) per sentence."""
    if fmt == "tokens":
        for line in lines:
            line = line.rstrip("\r\n")
            yield _from_text(line) if raw_text else {"tokens": line.split()}
    elif fmt == "conll":
        tokens: list[str] = []
        doc = f"{source}:0"
        for lineno, line in enumerate(lines, 1):
            fields = line.split()
            if fields and fields[0] == "-DOCSTART-":
                if tokens:
                    yield {"tokens": tokens, "doc": doc}
                tokens, doc = [], f"{source}:{lineno}"
            elif not fields:
                if tokens:
                    yield {"tokens": tokens, "doc": doc}
                tokens = []
            elif not line.startswith("#"):
                tokens.append(fields[0])
        if tokens:
            yield {"tokens": tokens, "doc": doc}
    elif fmt == "jsonl":
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{source}:{lineno}: not JSON: {e}") from None
            if isinstance(obj, dict) and "doc" in obj and not isinstance(obj["doc"], str):
                raise InputError(f'{source}:{lineno}: "doc" must be a string, got {type(obj["doc"]).__name__}')
            doc = {"doc": obj["doc"]} if isinstance(obj, dict) and "doc" in obj else {}
            if isinstance(obj, dict) and isinstance(obj.get("text"), str):
                yield _from_text(obj["text"]) | doc
            elif isinstance(obj, dict) and isinstance(obj.get("tokens"), list) and all(isinstance(t, str) for t in obj["tokens"]):
                yield {"tokens": obj["tokens"]} | doc
            else:
                raise InputError(f'{source}:{lineno}: expected {{"tokens": [strings]}} or {{"text": string}}')
    else:
        raise ValueError(f"unknown input format {fmt!r} (tokens, conll or jsonl)")


def _from_text(text: str) -> dict[str, Any]:
    toks = tokenize(text)
    return {"text": text, "tokens": [t for t, _, _ in toks], "offsets": [[a, b] for _, a, b in toks]}


def _chunks(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """Lists of about ``size`` records, cut between documents where one ends within 8 x ``size``."""
    chunk: list[dict[str, Any]] = []
    for item in items:
        doc = item.get("doc")
        if len(chunk) >= 8 * size or (len(chunk) >= size and (doc is None or doc != chunk[-1].get("doc"))):
            yield chunk
            chunk = []
        chunk.append(item)
    if chunk:
        yield chunk


def predict_records(predictor, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Add ``tags`` and ``scores`` to each ``{"tokens": [...]}`` record (``doc``: its document, if any)."""
    for chunk in _chunks(records, CHUNK):
        # a record without "doc" is a document of its own
        docs = [r.get("doc", (None, i)) for i, r in enumerate(chunk)]
        for record, preds in zip(chunk, predictor.predict([r["tokens"] for r in chunk], docs)):
            yield {**record, "tags": [p.tag for p in preds], "scores": [p.score for p in preds]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tagger.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="run dir, best.json, .ckpt file or model store tag NAME:VERSION")
    parser.add_argument("--input", default="-", help="input file, - for stdin (default)")
    parser.add_argument("--format", default="tokens", choices=["tokens", "conll", "jsonl"], help="input format")
    parser.add_argument("--tokenize", action="store_true", help="tokens format: lines are raw text to tokenise")
    parser.add_argument("--output", default="-", help="output JSONL file, - for stdout (default)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch

    from tagger import runs
    from tagger.checkpoint import CheckpointError
    from tagger.inference import Predictor

    torch.set_num_threads(args.threads)
    try:
        loaded = runs.load(args.model)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    predictor = Predictor(loaded.tagger, loaded.vocab, batch_size=args.batch_size)

    source = "<stdin>" if args.input == "-" else args.input
    fin: TextIO = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    fout: TextIO = sys.stdout if args.output == "-" else open(Path(args.output), "w", encoding="utf-8")
    try:
        records = read_sentences(fin, args.format, args.tokenize, source)
        for out in predict_records(predictor, records):
            fout.write(json.dumps(out, ensure_ascii=False) + "\n")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if fin is not sys.stdin:
            fin.close()
        if fout is not sys.stdout:
            fout.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
