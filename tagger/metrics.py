"""
Evaluation metrics for sequence labelling: token accuracy (POS) and entity-level
precision / recall / F1 (NER). Pure functions over lists of tag strings; no torch.

All percentages are in 0..100.

Entity extraction is delegated to seqeval (through tagger.schemes) so numbers are comparable
with the literature; counting is done here so that per-type numbers, entity counts and the
two matching modes come out of one pass with consistent edge cases:
  - strict (seqeval mode="strict"): an entity must start with B-X (or S-X in
    BIOES); an I-X after O is not an entity. These are the main numbers.
  - default (conlleval-compatible): an I-X after O opens an entity.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from tagger.schemes import MODEL_SCHEMES, conlleval_entities, strict_entities

MAIN_METRIC = {"pos": "acc", "ner": "f1"}
# a model of several tasks is selected by the mean of its tasks' main metrics (tasks_mean)
SELECTION = "tasks_mean"

Tags = Sequence[Sequence[str]]


def _check_lengths(gold: Tags, pred: Tags, unseen: Sequence[Sequence[bool]] | None = None) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} sentences but pred has {len(pred)}")
    if unseen is not None and len(unseen) != len(gold):
        raise ValueError(f"gold has {len(gold)} sentences but unseen has {len(unseen)}")
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: gold has {len(g)} tags but pred has {len(p)}")
        if unseen is not None and len(unseen[i]) != len(g):
            raise ValueError(f"sentence {i}: gold has {len(g)} tags but unseen has {len(unseen[i])}")


def _pct(num: int, den: int) -> float | None:
    return 100.0 * num / den if den else None


def _prf(n_correct: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    """Precision, recall, F1 in %. 0/0 counts as 0, as in seqeval and conlleval."""
    p = n_correct / n_pred if n_pred else 0.0
    r = n_correct / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return 100.0 * p, 100.0 * r, 100.0 * f


def token_accuracy(gold: Tags, pred: Tags, unseen: Sequence[Sequence[bool]] | None = None) -> dict:
    """
    Token-level accuracy, overall, split by whether the word was seen in training,
    and per gold tag.

    Args:
        gold, pred: one list of tags per sentence, same lengths.
        unseen: optional, same shape; True where the word is not in the training vocab.
    Returns:
        {"acc": %, "acc_unseen": % or None, "acc_seen": % or None, "n_tokens": int,
         "n_unseen": int, "per_tag": {gold tag: {"acc": %, "support": int}}}
        acc_unseen / acc_seen are None when there are no such tokens, and both are
        None when `unseen` is not given (the split is unknown). acc is 0.0 on empty input.
        per_tag "acc" is the fraction of tokens with that gold tag predicted correctly.
    Raises:
        ValueError naming the sentence index if lengths differ.
    """
    _check_lengths(gold, pred, unseen)
    n = correct = n_unseen = correct_unseen = 0
    support: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for i, (g_sent, p_sent) in enumerate(zip(gold, pred)):
        u_sent = unseen[i] if unseen is not None else [False] * len(g_sent)
        for g, p, u in zip(g_sent, p_sent, u_sent):
            ok = g == p
            n += 1
            correct += ok
            support[g] += 1
            hits[g] += ok
            if u:
                n_unseen += 1
                correct_unseen += ok

    known = unseen is not None
    return {
        "acc": _pct(correct, n) if n else 0.0,
        "acc_unseen": _pct(correct_unseen, n_unseen) if known else None,
        "acc_seen": _pct(correct - correct_unseen, n - n_unseen) if known else None,
        "n_tokens": n,
        "n_unseen": n_unseen,
        "per_tag": {tag: {"acc": _pct(hits[tag], support[tag]), "support": support[tag]}
                    for tag in sorted(support)},
    }


def entity_scores(gold: Tags, pred: Tags, scheme: str = "IOB2") -> dict:
    """
    Entity-level (exact span and type match) scores, micro-averaged over entities.

    Args:
        gold, pred: one list of tags per sentence, same lengths.
        scheme: "IOB2" or "BIOES" (seqeval's IOB2 / IOBES classes in strict mode).
    Returns:
        {"precision", "recall", "f1": strict-mode %,
         "f1_conlleval": % in seqeval's default (conlleval) mode,
         "per_type": {type: {"precision", "recall", "f1": %, "support": gold count}} (strict,
                     every type seen in gold or pred),
         "n_gold", "n_pred": strict entity counts,
         "acc": token accuracy %}
        With no entities at all on either side everything is 0, as in seqeval.
    Raises:
        ValueError naming the sentence if lengths differ, or for an unknown scheme.
    """
    if scheme not in MODEL_SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; expected one of {sorted(MODEL_SCHEMES)}")
    _check_lengths(gold, pred)

    gold_ents = strict_entities(gold, scheme)
    pred_ents = strict_entities(pred, scheme)
    correct = gold_ents & pred_ents
    precision, recall, f1 = _prf(len(correct), len(pred_ents), len(gold_ents))

    per_type = {}
    for etype in sorted({e[1] for e in gold_ents | pred_ents}):
        n_c = sum(e[1] == etype for e in correct)
        n_p = sum(e[1] == etype for e in pred_ents)
        n_g = sum(e[1] == etype for e in gold_ents)
        p, r, f = _prf(n_c, n_p, n_g)
        per_type[etype] = {"precision": p, "recall": r, "f1": f, "support": n_g}

    gold_c, pred_c = conlleval_entities(gold), conlleval_entities(pred)
    *_, f1_conlleval = _prf(len(gold_c & pred_c), len(pred_c), len(gold_c))

    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "f1_conlleval": f1_conlleval,
        "per_type": per_type,
        "n_gold": len(gold_ents),
        "n_pred": len(pred_ents),
        "acc": token_accuracy(gold, pred)["acc"],
    }


def task_metrics(task: str, gold: Tags, pred: Tags,
                 unseen: Sequence[Sequence[bool]] | None = None, scheme: str = "IOB2") -> dict:
    """
    The metrics of a task: "pos" -> token_accuracy; "ner" -> entity_scores plus
    "acc_unseen" and "n_unseen" (token accuracy on words unseen in training, None
    without an `unseen` mask or unseen tokens). The task's headline number is
    result[MAIN_METRIC[task]].
    """
    if task == "pos":
        return token_accuracy(gold, pred, unseen)
    if task == "ner":
        result = entity_scores(gold, pred, scheme)
        acc = token_accuracy(gold, pred, unseen)
        result["acc_unseen"] = acc["acc_unseen"]
        result["n_unseen"] = acc["n_unseen"]
        return result
    raise ValueError(f"unknown task {task!r}; expected one of {sorted(MAIN_METRIC)}")


def tasks_mean(metrics: dict[str, dict], kinds: dict[str, str]) -> float:
    """The score that selects a model of several tasks: the unweighted mean over tasks of each one's main metric
    (accuracy, entity F1, both in percent). ``metrics``: task name -> its metrics; ``kinds``: task name -> pos|ner."""
    return sum(float(metrics[name][MAIN_METRIC[kind]]) for name, kind in kinds.items()) / len(kinds)
