"""Offline prediction with a trained tagger.

``tagger predict MODEL [--input FILE|-] [--format tokens|conll|conllu|jsonl] [--tokenize]
[--output FILE|-] [--output-format jsonl|conll|conllu]``. MODEL is a run dir, a ``best.json``, a ``.ckpt``
file or a BentoML model-store tag, loaded by :func:`tagger.load`.

Input (``--format``, default ``tokens``):

* ``tokens`` — one pre-tokenised sentence per line, tokens separated by whitespace; with
  ``--tokenize`` each line is raw text, split into sentences and tokens by the model's tokenizer
  convention (:mod:`tagger.tokenize`);
* ``conll`` — one token per line (first column), a blank line between sentences, ``#`` comments
  skipped; a ``-DOCSTART-`` line starts a new document;
* ``conllu`` — CoNLL-U: the FORM of each word line (multi-word token ranges and empty nodes skipped);
  ``# newdoc`` starts a new document;
* ``jsonl`` — one JSON object per line, ``{"tokens": [...]}`` or ``{"text": "..."}``, optionally with
  ``"doc": "..."`` (adjacent lines with one ``doc`` are one document).

A model trained with document context (``data.doc_window``) tags each document's sentences together;
sentences without a document (``tokens`` format, jsonl lines without ``doc``) are tagged alone, and the
sentences of one raw text are one document.

Output (``--output-format``, default ``jsonl``):

* ``jsonl`` — one JSON line per input line or sentence, ``{"tokens", "tags", "scores"}`` (plus ``"spans"`` for
  an entity tagger); a raw text gives ``"text"``, ``"offsets"`` (``[start, end]`` per token) and ``"sentences"``
  (``[start, end)`` token ranges) too, its sentences in one line;
* ``conll`` — ``token<TAB>tag`` lines, a blank line after each sentence;
* ``conllu`` — CoNLL-U: the tag in UPOS for a POS tagger, ``NER=tag`` in MISC for an entity tagger,
  ``SpaceAfter=No`` from the offsets of raw text.

The same weights give the same tags here, through :func:`tagger.load` and through the service.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TextIO

from tagger.fileio import UndecodableError, check_encoding, text_lines
from tagger.limits import BATCH_SIZE

if TYPE_CHECKING:
    from tagger.api import Pipeline

CHUNK = 1024  # sentences predicted at a time: bounded memory on any input size


class InputError(ValueError):
    """A malformed input line; the message starts with ``source:line:``."""


def read_sentences(lines: Iterable[str], fmt: str, raw_text: bool, source: str = "<input>") -> Iterator[dict[str, Any]]:
    """Yield ``{"tokens": [...]}`` (plus ``"text"``, ``"offsets"`` for raw text) per sentence."""
    if fmt == "tokens":
        for line in lines:
            line = line.rstrip("\r\n")
            yield {"text": line} if raw_text else {"tokens": line.split()}
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
                yield {"text": obj["text"]} | doc
            elif isinstance(obj, dict) and isinstance(obj.get("tokens"), list) and all(isinstance(t, str) for t in obj["tokens"]):
                if "" in obj["tokens"]:
                    raise InputError(f'{source}:{lineno}: token {obj["tokens"].index("")} is an empty string')
                yield {"tokens": obj["tokens"]} | doc
            else:
                raise InputError(f'{source}:{lineno}: expected {{"tokens": [strings]}} or {{"text": string}}')
    elif fmt == "conllu":
        tokens = []
        doc = f"{source}:0"
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if tokens:
                    yield {"tokens": tokens, "doc": doc}
                tokens = []
            elif line.startswith("#"):
                if line[1:].strip().startswith("newdoc"):
                    doc = f"{source}:{lineno}"
            else:
                columns = line.split("\t")
                if len(columns) != 10:
                    raise InputError(f"{source}:{lineno}: expected 10 tab-separated columns, found {len(columns)}")
                if columns[0].isdigit():  # not a multi-word token range (3-4) or an empty node (8.1)
                    if not columns[1]:
                        raise InputError(f"{source}:{lineno}: empty FORM column")
                    tokens.append(columns[1])
        if tokens:
            yield {"tokens": tokens, "doc": doc}
    else:
        raise ValueError(f"unknown input format {fmt!r} (tokens, conll, conllu or jsonl)")


def input_lines(path: str, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of a file, or of stdin for ``-``, decoded with ``encoding``; bytes it cannot decode are an
    :class:`InputError` naming them (and, in a file, their line)."""
    hint = "(--encoding names the input's encoding)"
    if path != "-":
        try:
            for _, line in text_lines(path, encoding):
                yield line
        except UndecodableError as e:
            raise InputError(f"{e} {hint}") from None
        return
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(encoding=encoding)
    try:
        yield from sys.stdin
    except UnicodeDecodeError as e:
        raise InputError(f"<stdin>: bytes {e.object[e.start:e.end]!r} are not valid {encoding} {hint}") from None


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


def predict_records(pipeline: Pipeline, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each ``{"tokens": [...]}`` record with its tags, scores (and spans); each ``{"text": ...}`` record with its
    sentences joined (:func:`tagger.api.join_sentences`). ``doc``: the record's document, if any."""
    from tagger.api import join_sentences

    for chunk in _chunks(records, CHUNK):
        sentences, docs, offsets, texts, owner = [], [], [], [], []
        for i, record in enumerate(chunk):
            doc = record.get("doc", (None, i))  # a record without "doc" is a document of its own
            split = pipeline.tokenize(record["text"]) if "text" in record else [[(t, 0, 0) for t in record["tokens"]]]
            for sent in split:
                sentences.append([t for t, _, _ in sent])
                offsets.append([(a, b) for _, a, b in sent] if "text" in record else None)
                texts.append(record.get("text"))
                docs.append(doc)
                owner.append(i)
        groups: list[list] = [[] for _ in chunk]
        for sentence, i in zip(pipeline.tag(sentences, docs, offsets, texts), owner):
            groups[i].append(sentence)
        for record, mine in zip(chunk, groups):
            if "text" in record:
                yield record | join_sentences(mine, pipeline.task)
            else:
                yield record | (mine[0].to_dict() if mine else {"tokens": [], "tags": [], "scores": []})


def _sentence_rows(out: dict[str, Any]) -> Iterator[tuple[list[str], list[str], list[list[int]] | None]]:
    """(tokens, tags, offsets or None) of each sentence of one output record."""
    for a, b in out.get("sentences") or [(0, len(out["tokens"]))]:
        if b > a:
            yield out["tokens"][a:b], out["tags"][a:b], out["offsets"][a:b] if out.get("offsets") else None


def write_record(out: dict[str, Any], fmt: str, task: str, fout: TextIO) -> None:
    """One output record in ``fmt`` (jsonl, conll or conllu)."""
    if fmt == "jsonl":
        fout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    for tokens, tags, offsets in _sentence_rows(out):
        if fmt == "conll":
            fout.write("".join(f"{t}\t{g}\n" for t, g in zip(tokens, tags)) + "\n")
            continue
        if offsets:
            fout.write(f"# text = {out['text'][offsets[0][0]:offsets[-1][1]]}\n")
        for j, (t, g) in enumerate(zip(tokens, tags)):
            misc = [f"NER={g}"] if task == "ner" else []
            if offsets and j + 1 < len(offsets) and offsets[j][1] == offsets[j + 1][0]:
                misc.append("SpaceAfter=No")
            upos = g if task == "pos" else "_"
            fout.write(f"{j + 1}\t{t}\t_\t{upos}\t_\t_\t_\t_\t_\t{'|'.join(misc) or '_'}\n")
        fout.write("\n")


@contextlib.contextmanager
def _output(path: str) -> Iterator[TextIO]:
    """stdout for ``-``; else a text file written whole or not at all (:func:`tagger.fileio.atomic_open`)."""
    if path == "-":
        yield sys.stdout
        return
    from tagger.fileio import atomic_open

    with atomic_open(Path(path)) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        yield text
        text.flush()
        text.detach()  # atomic_open closes the file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagger predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="run dir, best.json, .ckpt file or BentoML model-store tag NAME:VERSION")
    parser.add_argument("--input", default="-", help="input file, - for stdin (default)")
    parser.add_argument("--format", default="tokens", choices=["tokens", "conll", "conllu", "jsonl"],
                        help="input format (default: %(default)s)")
    parser.add_argument("--tokenize", action="store_true", help="tokens format: lines are raw text to tokenise")
    parser.add_argument("--encoding", default="utf-8", help="the input's encoding (default: %(default)s)")
    parser.add_argument("--output", default="-", help="output file, - for stdout (default)")
    parser.add_argument("--output-format", default="jsonl", choices=["jsonl", "conll", "conllu"],
                        help="output format (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    args = parser.parse_args(argv)

    from tagger.api import LoadError, load
    from tagger.artifacts.checkpoint import CheckpointError
    try:
        pipeline = load(args.model, threads=args.threads, batch_size=args.batch_size)
    except (LoadError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    try:
        check_encoding(args.encoding, "--encoding")
        if args.input != "-":
            Path(args.input).open("rb").close()  # a missing or unreadable file fails before the output is opened
    except OSError as e:
        print(f"error: {args.input}: {e.strerror}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    source = "<stdin>" if args.input == "-" else args.input
    try:
        with _output(args.output) as fout:
            lines = input_lines(args.input, args.encoding)
            for out in predict_records(pipeline, read_sentences(lines, args.format, args.tokenize, source)):
                write_record(out, args.output_format, pipeline.task, fout)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
