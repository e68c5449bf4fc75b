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
  (``[start, end)`` token ranges) too, its sentences in one line. A multi-task model's lines add ``"tasks"``: per
  task its ``"tags"``, ``"scores"`` and, for an entity task, ``"spans"``;
* ``conll`` — ``token<TAB>tag`` lines (a multi-task model: a tag column per task, in order), a blank line after each
  sentence;
* ``conllu`` — CoNLL-U: the tag in UPOS for a POS tagger, ``NER=tag`` in MISC for an entity tagger (a multi-task
  model: both; a third task's as ``NAME=tag`` in MISC), ``SpaceAfter=No`` from the offsets of raw text.

The same weights give the same tags here, through :func:`tagger.load` and through the service.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, TextIO

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


def _columns(out: dict[str, Any], task: str, tasks: Mapping[str, str] | None) -> list[tuple[str, list[str]]]:
    """(where the tag goes, tags over the record) per task: ``UPOS`` for the first POS task, ``NER`` for the first
    entity task, the task's name for any other (a MISC key in CoNLL-U)."""
    kinds = tasks if tasks is not None else {task: task}
    tags = {name: out["tasks"][name]["tags"] for name in kinds} if tasks is not None else {task: out["tags"]}
    first = {kind: next((n for n, k in kinds.items() if k == kind), None) for kind in ("pos", "ner")}
    return [("UPOS" if name == first["pos"] else "NER" if name == first["ner"] else name, tags[name])
            for name in kinds]


def _sentence_rows(out: dict[str, Any], columns: list[tuple[str, list[str]]]) -> Iterator[
        tuple[list[str], list[tuple[str, list[str]]], list[list[int]] | None]]:
    """(tokens, each column's tags, offsets or None) of each sentence of one output record."""
    for a, b in out.get("sentences") or [(0, len(out["tokens"]))]:
        if b > a:
            yield (out["tokens"][a:b], [(key, tags[a:b]) for key, tags in columns],
                   out["offsets"][a:b] if out.get("offsets") else None)


def write_record(out: dict[str, Any], fmt: str, task: str, fout: TextIO, tasks: Mapping[str, str] | None = None) -> None:
    """One output record in ``fmt`` (jsonl, conll or conllu). ``tasks``: a multi-task model's task names and kinds
    (pos, ner): the conll format writes one tag column per task, in order; CoNLL-U the first POS task's tag as UPOS,
    the first entity task's as ``NER=`` in MISC and any other task's as ``NAME=`` in MISC."""
    if fmt == "jsonl":
        fout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    for tokens, columns, offsets in _sentence_rows(out, _columns(out, task, tasks)):
        if fmt == "conll":
            fout.write("".join("\t".join([t, *row]) + "\n" for t, *row in zip(tokens, *(c for _, c in columns))) + "\n")
            continue
        if offsets:
            fout.write(f"# text = {out['text'][offsets[0][0]:offsets[-1][1]]}\n")
        for j, t in enumerate(tokens):
            misc = [f"{key}={tags[j]}" for key, tags in columns if key != "UPOS"]
            if offsets and j + 1 < len(offsets) and offsets[j][1] == offsets[j + 1][0]:
                misc.append("SpaceAfter=No")
            upos = next((tags[j] for key, tags in columns if key == "UPOS"), "_")
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
    kinds = {name: pipeline.vocab.for_task(name).task for name in pipeline.tasks} \
        if pipeline.vocab.tasks is not None else None
    try:
        with _output(args.output) as fout:
            lines = input_lines(args.input, args.encoding)
            for out in predict_records(pipeline, read_sentences(lines, args.format, args.tokenize, source)):
                write_record(out, args.output_format, pipeline.task, fout, kinds)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
