"""Start a training from a trained tagger (``init_from=SOURCE`` on ``tagger train``).

What matches is copied, what does not starts fresh and is listed (as ``from_pretrained(...,
ignore_mismatched_sizes=True)`` does), except the encoder, whose shape must match:

* the vocabulary (:meth:`Vocab.build` with ``base``): the source's training words first, then the new
  training words, then the vector words; characters likewise. A word row the source trained is copied, a new
  word gets its vector (when the embedder has vectors) or a fresh row;
* the character encoder, the casing embedding and the encoder: copied whole. A parameter whose shape differs
  from the source's is an error naming the config keys where the two configs differ;
* the head: the output rows of labels present in both label sets (matched by name, or through ``label_map``),
  and the CRF's start/end scores and transitions between such labels. New labels get fresh rows.

A POS model can start an NER model: embedder and encoder come along, the head starts fresh.

A multi-task source (:class:`tagger.models.multitask.MultiTaskTagger`) starts a single-task model as the model of
one of its tasks (:func:`task_source`): its embedder and encoder, and the head of the task named by
``transfer.task``, else of the task whose labels share the most with this corpus's (a task of the same kind first on a
tie). A multi-task model started from any source takes its embedder and encoder; its heads start fresh.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from tagger.data.vocab import Vocab
from tagger.models.multitask import MultiTaskTagger
from tagger.models.tagger import Tagger
from tagger.schemes import map_label

log = logging.getLogger(__name__)

# config keys of the embedder that decide the shape or meaning of a copied parameter
EMBEDDER_KEYS = ("word_dim", "char_dim", "char_filters", "char_kernel", "case_dim", "vectors", "finetune_vectors")


class TransferError(ValueError):
    """The source model cannot start this model (the message names the differing config keys)."""


def differing_keys(source: Mapping[str, Any], target: Mapping[str, Any], prefix: str) -> list[str]:
    """``prefix.key: source -> config`` for every key whose value differs (a key missing on one side: None)."""
    keys = sorted(set(source) | set(target))
    return [f"{prefix}.{k}: source {source.get(k)!r}, config {target.get(k)!r}"
            for k in keys if source.get(k) != target.get(k)]


def check_compatible(source: Mapping[str, Any], target: Mapping[str, Any]) -> None:
    """The embedder settings that shape copied parameters must be the source's (TransferError naming them)."""
    problems = differing_keys(*({k: config["embedder"].get(k) for k in EMBEDDER_KEYS} for config in (source, target)),
                              "embedder")
    if problems:
        raise TransferError("init_from: the embedder differs from the source's in " + "; ".join(problems))


def task_source(source: Tagger | MultiTaskTagger, source_vocab: Vocab, source_config: Mapping[str, Any],
                target_vocab: Vocab, task: str | None = None, label_map: Mapping[str, str] | None = None,
                ) -> tuple[Tagger, Vocab, dict[str, Any], str | None]:
    """A multi-task source as the single-task model of one task (module docstring): (tagger sharing the source's
    modules, that task's vocabulary, its config, the task's name). A single-task source comes back as it is, with
    None. ``task``: ``transfer.task``; a name the source does not have is a TransferError naming its tasks."""
    if source_vocab.tasks is None:
        if task is not None:
            raise TransferError(f"transfer.task={task!r}: the source has one task ({source_vocab.task}); set it to null")
        return source, source_vocab, dict(source_config), None
    if task is None:
        wanted = set(target_vocab.labels)

        def fit(name: str) -> tuple[int, bool]:
            view = source_vocab.for_task(name)
            return len({map_label(label, dict(label_map or {})) for label in view.labels} & wanted), \
                view.task == target_vocab.task

        task = max(source_vocab.task_names, key=fit)  # the first of the best on a tie
    elif task not in source_vocab.task_names:
        raise TransferError(f"transfer.task={task!r}: the source's tasks are {', '.join(source_vocab.task_names)}")
    view = Tagger(source.embedder, source.encoder, source.heads[task])
    config = {"embedder": source_config["embedder"], "model": source_config["model"],
              "head": source_config["tasks"][task]["head"]}
    log.info("init_from: the source's task %s (its embedder, encoder and head)", task)
    return view, source_vocab.for_task(task), config, task


@dataclass
class TransferReport:
    """What :func:`copy_parameters` did: parameters copied whole, in part (rows of shared words, characters or
    labels: ``name: copied/total``), and left fresh."""

    copied: list[str] = field(default_factory=list)
    partial: dict[str, str] = field(default_factory=dict)
    fresh: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"copied": len(self.copied), "partial": self.partial, "fresh": self.fresh}


def _rows(target: list[str], source: list[str | None], limit_t: int, limit_s: int) -> tuple[list[int], list[int]]:
    """Row pairs (target ids, source ids) of the items both lists hold, within the first ``limit_*`` rows."""
    index = {item: i for i, item in enumerate(source[:limit_s]) if item is not None}
    pairs = [(i, index[item]) for i, item in enumerate(target[:limit_t]) if item in index]
    return [t for t, _ in pairs], [s for _, s in pairs]


def copy_parameters(target: Tagger, target_vocab: Vocab, source: Tagger, source_vocab: Vocab,
                    target_config: Mapping[str, Any], source_config: Mapping[str, Any],
                    label_map: Mapping[str, str] | None = None) -> TransferReport:
    """Copy into ``target`` what it shares with ``source`` (module docstring); the report lists what was done."""
    label_map = dict(label_map or {})
    check_compatible(source_config, target_config)
    src = source.state_dict()
    report = TransferReport()
    # a source label mapped to O (a dropped type) lends its row to nothing: O keeps the source's own O row
    labels = [None if (name := map_label(label, label_map)) == "O" and label != "O" else name
              for label in source_vocab.labels]
    # (target ids, source ids) of the rows that correspond, per kind of table
    words = _rows(target_vocab.words, source_vocab.words, target.embedder.word.num_embeddings,
                  source.embedder.word.num_embeddings) if target.embedder.word is not None else ([], [])
    chars = _rows(target_vocab.chars, source_vocab.chars, len(target_vocab.chars), len(source_vocab.chars))
    tags = _rows(target_vocab.labels, labels, len(target_vocab.labels), len(labels))
    by_rows = {"embedder.word.weight": words, "embedder.char.embed.weight": chars,
               "head.proj.weight": tags, "head.proj.bias": tags, "head.crf.start": tags, "head.crf.end": tags}
    mismatched = []
    with torch.no_grad():
        for name, param in target.named_parameters():
            if name not in src:
                report.fresh.append(name)
            elif src[name].shape[1:] != param.shape[1:] and name in by_rows:  # rows of another width
                mismatched.append(f"{name} {tuple(src[name].shape)} vs {tuple(param.shape)}")
            elif name == "head.crf.transitions":
                t, s = (torch.tensor(ids, dtype=torch.long) for ids in tags)
                param[t[:, None], t] = src[name][s[:, None], s]  # (n, n) scores between shared labels
                report.partial[name] = f"{len(t) ** 2}/{param.shape[0] ** 2}"
            elif name in by_rows:
                t, s = by_rows[name]
                if t:
                    param[torch.tensor(t)] = src[name][torch.tensor(s)].to(param.dtype)
                report.partial[name] = f"{len(t)}/{param.shape[0]}"
            elif name.startswith(("head.", "heads.")):
                # a head of another kind (softmax source, CRF target), or a multi-task model's (its labels are matched
                # to none of the source's)
                report.fresh.append(name)
            elif src[name].shape != param.shape:
                mismatched.append(f"{name} {tuple(src[name].shape)} vs {tuple(param.shape)}")
            else:
                param.copy_(src[name])
                report.copied.append(name)
    if mismatched:
        # the embedder's shaping keys already match (check_compatible above): only the model's can differ
        keys = differing_keys(source_config["model"], target_config["model"], "model")
        raise TransferError("init_from: the model config differs from the source's in "
                            + ("; ".join(keys) or "no config key (another encoder class?)")
                            + f" (parameters of another shape: {', '.join(mismatched)}); set the model config "
                            "to the source's, e.g. model=" + str(source_config["model"].get("_target_", "?")))
    log.info("init_from: %d parameters copied whole, %s in part, fresh: %s", len(report.copied),
             ", ".join(f"{k} {v}" for k, v in report.partial.items()) or "none", ", ".join(report.fresh) or "none")
    return report


def lineage(arg: str, source: Any, loaded: Any, report: TransferReport, label_map: Mapping[str, str]) -> dict[str, Any]:
    """What a run records of its source in ``metrics.json`` (and so in its package): where it came from, what it
    scored, its config and commit, and what was copied. ``source``: a :class:`tagger.artifacts.runs.Source`."""
    metrics = source.metrics or {}
    main = metrics.get("main_metric")
    score = {key: (metrics.get(key) or {}).get(main) for key in ("dev", "test")} if main else {}
    return {
        "source": str(arg),
        "checkpoint": str(source.checkpoint) if source.checkpoint else None,
        "store_tag": source.store_tag,
        "run_dir": str(source.run_dir) if source.run_dir else None,
        "task": "multitask" if loaded.vocab.tasks is not None else loaded.vocab.task,  # the task: source_task
        "data": metrics.get("data"),
        "model": metrics.get("model"),
        "main_metric": main,
        **score,
        "commit": (metrics.get("git") or {}).get("commit"),
        "config": loaded.config,
        "label_map": dict(label_map),
        "transferred": report.to_dict(),
    }
