"""Evaluate a trained tagger on a split (whole sentences, one process).

``tagger evaluate MODEL --input FILE --format conll|conllu [--word-column N] [--tag-column C] [--scheme S]
[--output FILE.json]`` scores a model (run dir, best.json, .ckpt or BentoML model-store tag) on any labelled
file: token accuracy per tag for a POS tagger, strict entity precision/recall/F1 per type for an entity
tagger. ``--task NAME`` picks the task of a multi-task model the file is labelled for (a POS file for its POS
head, an entity file for its entity head). The file's tags are read in its own ``--scheme`` and converted to the
model's. Labels come from the
model: a gold tag the model never saw is an error naming it and where it first occurs, unless
``--unknown-tags wrong`` counts its tokens (and entities) as mistakes.

``tagger evaluate RUN_DIR [--data-dir DIR] [--write]`` scores a run again on its own corpus's dev and test splits
(a multi-task run: each task on its own corpus's).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets

from tagger.data.vocab import Vocab
from tagger.inference.scoring import evaluate_split, evaluate_tasks, load_corpus
from tagger.limits import BATCH_SIZE
from tagger.schemes import map_label


class UnknownTagsError(ValueError):
    """The labelled file has tags the model was never trained on."""


def read_labelled(path: str | Path, fmt: str, vocab: Vocab, word_column: int = 0, tag_column: str | None = None,
                  scheme: str | None = None, separator: str | None = None,
                  empty_words: str = "error", encoding: str = "utf-8") -> list[dict[str, Any]]:
    """The sentences of a labelled file, tags in the model's scheme. ``fmt``: ``conllu`` (``tag_column`` upos or
    xpos, default upos) or ``conll`` (columns; ``tag_column`` an index, default -1; entity tags converted from
    ``scheme``, default IOB2 for an entity tagger, none for POS). ``encoding``: the file's."""
    from tagger.data.readers import read_conll_columns, read_conllu
    from tagger.fileio import check_encoding

    check_encoding(encoding, "--encoding")
    if fmt == "conllu":
        return read_conllu(path, tag_column=tag_column or "upos", encoding=encoding)
    if fmt != "conll":
        raise ValueError(f"unknown format {fmt!r} (conll or conllu)")
    try:
        column = int(tag_column) if tag_column is not None else -1
    except ValueError:
        raise ValueError(f"--tag-column of a conll file is a column number, got {tag_column!r}") from None
    if scheme is None:
        scheme = "IOB2" if vocab.tag_scheme else "none"
    if vocab.tag_scheme is None and scheme.lower() != "none":
        raise ValueError(f"--scheme {scheme}: the model is a {vocab.task} tagger without an entity scheme; use --scheme none")
    return read_conll_columns(path, word_column=word_column, tag_column=column, separator=separator, scheme=scheme,
                              target_scheme=vocab.tag_scheme or "IOB2", empty_words=empty_words, encoding=encoding)


def as_split(sentences: list[dict[str, Any]], vocab: Vocab, unknown_tags: str = "error",
             label_map: dict[str, str] | None = None) -> datasets.Dataset:
    """Sentences as a split for :func:`evaluate_split`. A gold tag outside the model's labels raises
    :class:`UnknownTagsError` naming each and its first sentence (``unknown_tags="error"``) or stays in the gold
    tags, where no prediction can match it (``"wrong"``)."""
    from tagger.data.readers import build_dataset_dict

    if unknown_tags not in ("error", "wrong"):
        raise ValueError(f"unknown_tags must be 'error' or 'wrong', got {unknown_tags!r}")
    known = {map_label(label, label_map or {}) for label in vocab.labels}
    first: dict[str, str] = {}
    for sent in sentences:
        for tag in sent["tags"]:
            if tag not in known:
                first.setdefault(tag, sent["id"])
    if first and unknown_tags == "error":
        where = ", ".join(f"{tag!r} (first in sentence {sid})" for tag, sid in sorted(first.items()))
        raise UnknownTagsError(f"tags the model was not trained on: {where}; the model knows {vocab.labels} "
                               "(--unknown-tags wrong counts them as mistakes)")
    return build_dataset_dict({"input": sentences}, label_source="input")["input"]


def parse_label_map(text: str | None) -> dict[str, str]:
    """``--label-map A=B,C=D`` as a dict; a pair without ``=`` is an error naming it."""
    pairs = [p.strip() for p in (text or "").split(",") if p.strip()]
    bad = [p for p in pairs if p.count("=") != 1 or not all(p.split("="))]
    if bad:
        raise ValueError(f"--label-map: expected NAME=NAME pairs separated by commas, got {bad}")
    return dict(p.split("=") for p in pairs)


def _print_lineage(metrics: dict[str, Any]) -> None:
    """The source a run started from (``init_from``), one line."""
    init = metrics.get("init_from")
    if init:
        print(f"started from {init['source']} ({init.get('task')} {init.get('model')} on {init.get('data')}, "
              f"dev {init.get('dev')} / test {init.get('test')} {init.get('main_metric')})")


def _print_scores(metrics: dict[str, Any], task: str) -> None:
    if task == "ner":
        print(f"entity F1 {metrics['f1']:.2f} (precision {metrics['precision']:.2f}, recall {metrics['recall']:.2f}, "
              f"{metrics['n_gold']} gold entities); token accuracy {metrics['acc']:.2f}")
        rows = [(t, m["f1"], m["precision"], m["recall"], m["support"]) for t, m in metrics["per_type"].items()]
        print(f"{'type':<10} {'F1':>6} {'P':>6} {'R':>6} {'gold':>6}")
    else:
        print(f"accuracy {metrics['acc']:.2f} over {metrics['n_tokens']} tokens"
              + (f" (unseen words: {metrics['acc_unseen']:.2f})" if metrics.get("acc_unseen") is not None else ""))
        rows = [(t, m["acc"], None, None, m["support"]) for t, m in sorted(metrics["per_tag"].items())]
        print(f"{'tag':<10} {'acc':>6} {'':>6} {'':>6} {'gold':>6}")
    for name, main, p, r, n in rows:
        cells = [f"{x:6.2f}" if x is not None else " " * 6 for x in (main, p, r)]
        print(f"{name:<10} {' '.join(cells)} {n:>6}")


def evaluate_file(argv: list[str]) -> int:
    """``tagger evaluate MODEL --input FILE ...``: see the module docstring."""
    import argparse
    import sys

    from tagger.api import LoadError, load_model
    from tagger.artifacts import runs
    from tagger.artifacts.checkpoint import CheckpointError
    from tagger.data.readers import CorpusFormatError
    from tagger.fileio import write_json

    parser = argparse.ArgumentParser(prog="tagger evaluate", description="Score a model on a labelled file.")
    parser.add_argument("model", help="run dir, best.json, .ckpt file or BentoML model-store tag")
    parser.add_argument("--input", required=True, help="labelled file")
    parser.add_argument("--format", required=True, choices=["conll", "conllu"], help="file format")
    parser.add_argument("--word-column", type=int, default=0, help="conll: column of the words (default: 0)")
    parser.add_argument("--tag-column", default=None, help="conll: column of the tags (default: -1, the last); "
                        "conllu: upos (default) or xpos")
    parser.add_argument("--scheme", default=None, help="conll: the file's entity tag scheme, IOB1 | IOB2 | BIOES | "
                        "none (default: IOB2 for an entity tagger, none for POS)")
    parser.add_argument("--separator", default=None, help="conll: column separator (default: any whitespace; "
                        "'\\t' or TAB for tabs)")
    parser.add_argument("--empty-words", default="error", choices=["error", "keep"],
                        help="conll: an empty word (tab-separated files) is an error (default) or kept, as "
                        "data.corpus.empty_words")
    parser.add_argument("--encoding", default="utf-8", help="the file's encoding, as data.corpus.encoding "
                        "(default: %(default)s)")
    parser.add_argument("--label-map", default=None, metavar="A=B,C=D",
                        help="rename the model's labels or entity types before scoring (MISC=O drops the model's "
                        "MISC entities): a model scored on a corpus whose names differ")
    parser.add_argument("--unknown-tags", default="error", choices=["error", "wrong"],
                        help="a gold tag the model does not know: stop with an error (default), or count it wrong")
    parser.add_argument("--task", default=None, metavar="NAME",
                        help="a multi-task model: the task the file is labelled for (e.g. pos or ner)")
    parser.add_argument("--output", default=None, help="write the scores as JSON to this file")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    args = parser.parse_args(argv)
    separator = "\t" if args.separator in ("\\t", "TAB", "tab") else args.separator

    import torch

    torch.set_num_threads(args.threads)
    try:
        label_map = parse_label_map(args.label_map)
        model, model_vocab, name = load_model(args.model)
        if args.task is None and model_vocab.tasks is not None:
            raise ValueError(f"--task: {name} has the tasks {', '.join(model_vocab.task_names)}; name the one "
                             f"{args.input} is labelled for")
        task = args.task or model_vocab.task
        try:
            vocab = model_vocab.for_task(task)  # the task's labels, kind and scheme
        except ValueError as e:
            raise ValueError(f"--task: {e}") from None
        sentences = read_labelled(args.input, args.format, vocab, args.word_column, args.tag_column, args.scheme,
                                  separator, args.empty_words, args.encoding)
        if not sentences:
            raise ValueError(f"{args.input}: no sentences")
        split = as_split(sentences, vocab, args.unknown_tags, label_map)
        lineage = runs.resolve(args.model).metrics.get("init_from")
    except (LoadError, CheckpointError, CorpusFormatError, UnknownTagsError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    metrics = evaluate_split(model, model_vocab, split, args.batch_size, label_map, task=task)
    _print_lineage({"init_from": lineage})
    _print_scores(metrics, vocab.task)
    if args.output:
        write_json(args.output, {"model": name, "input": str(Path(args.input).resolve()), "format": args.format,
                                 "task": vocab.task, "tag_scheme": vocab.tag_scheme, "sentences": len(sentences),
                                 **({"model_task": task} if model_vocab.tasks is not None else {}),
                                 "unknown_tags": args.unknown_tags, "label_map": label_map, "init_from": lineage,
                                 "metrics": metrics})
        print(f"scores written to {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``tagger evaluate RUN_DIR [--data-dir DIR] [--write]``: the run's best checkpoint scored again on its
    corpus's dev and test splits with today's prediction code; ``--write`` puts the new figures into its
    metrics.json (the old main metric kept under ``reevaluated.previous``). With ``--input FILE``: the model
    scored on that file (:func:`evaluate_file`)."""
    import argparse
    import sys

    from tagger.artifacts import runs
    from tagger.artifacts.checkpoint import CheckpointError
    from tagger.fileio import write_json

    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--input" or a.startswith("--input=") for a in argv):
        return evaluate_file(argv)
    parser = argparse.ArgumentParser(prog="tagger evaluate", description=main.__doc__.split(":")[0],
                                     epilog="tagger evaluate MODEL --input FILE --format conll|conllu [--word-column N] "
                                     "[--tag-column C] [--scheme S] [--unknown-tags error|wrong] [--output FILE.json]: "
                                     "score a model on any labelled file (tagger evaluate X --input F -h for more)")
    parser.add_argument("run", help=f"what to score: {runs.KINDS} (the corpus is the one its metrics name)")
    parser.add_argument("--data-dir", default=None, help="where the corpus files are (default: the run's data_dir)")
    parser.add_argument("--write", action="store_true", help="update the run's metrics.json")
    args = parser.parse_args(argv)
    try:
        source = runs.resolve(args.run)
        metrics = source.metrics
        if not metrics.get("config"):
            raise runs.RunError(f"{args.run}: no metrics.json with the run's config (which corpus to score on)")
        if args.write and source.run_dir is None:
            raise runs.RunError(f"{args.run}: --write needs a run dir whose metrics.json to update")
        loaded = runs.load(source)
    except (OSError, ValueError, KeyError, TypeError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    _print_lineage(metrics)
    main_metric = metrics["main_metric"]
    if loaded.vocab.tasks is not None:  # each task on its own corpus (the run's tasks.NAME.data)
        corpora = {name: load_corpus(metrics["config"]["tasks"][name]["data"]["corpus"], args.data_dir)
                   for name in loaded.vocab.task_names}
        fresh = {key: evaluate_tasks(loaded.tagger, loaded.vocab, {n: d[split] for n, d in corpora.items() if split in d})
                 for split, key in (("validation", "dev"), ("test", "test"))}
    else:
        data = load_corpus(metrics["config"]["data"]["corpus"], args.data_dir)
        fresh = {key: evaluate_split(loaded.tagger, loaded.vocab, data[split])
                 for split, key in (("validation", "dev"), ("test", "test")) if split in data}
    print(json.dumps({key: round(m[main_metric], 2) for key, m in fresh.items()} | {"metric": main_metric, "run_dir": args.run}))
    if args.write:
        previous = {key: (metrics.get(key) or {}).get(main_metric) for key in fresh}
        metrics |= fresh | {"reevaluated": {"command": " ".join(["tagger evaluate", *(argv or sys.argv[1:])]),
                                            "previous": previous}}
        write_json(source.run_dir / "metrics.json", metrics)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
