"""Metrics on hand-computed cases, cross-checked against seqeval where it applies."""

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

from tagger.metrics import MAIN_METRIC, entity_scores, task_metrics, token_accuracy

approx = pytest.approx

# ----------------------------------------------------------------------------- token accuracy

POS_GOLD = [["DET", "NOUN", "VERB"], ["NOUN", "VERB"]]
POS_PRED = [["DET", "VERB", "VERB"], ["NOUN", "NOUN"]]
POS_UNSEEN = [[False, True, False], [True, False]]
# correct:  DET ok, NOUN->VERB wrong, VERB ok | NOUN ok, VERB->NOUN wrong   -> 3/5 = 60%
# unseen tokens: (0,1) wrong, (1,0) ok                                      -> 1/2 = 50%
# seen tokens:   DET ok, VERB ok, VERB wrong                                -> 2/3 = 66.67%
# per gold tag:  DET 1/1 = 100, NOUN 1/2 = 50, VERB 1/2 = 50


def test_token_accuracy_by_hand():
    r = token_accuracy(POS_GOLD, POS_PRED, POS_UNSEEN)
    assert r["acc"] == approx(60.0)
    assert r["acc_unseen"] == approx(50.0)
    assert r["acc_seen"] == approx(200 / 3)
    assert r["n_tokens"] == 5 and r["n_unseen"] == 2
    assert r["per_tag"] == {
        "DET": {"acc": approx(100.0), "support": 1},
        "NOUN": {"acc": approx(50.0), "support": 2},
        "VERB": {"acc": approx(50.0), "support": 2},
    }


def test_token_accuracy_without_unseen_tokens():
    r = token_accuracy(POS_GOLD, POS_PRED, [[False] * 3, [False] * 2])
    assert r["acc_unseen"] is None and r["n_unseen"] == 0
    assert r["acc_seen"] == approx(60.0)
    r = token_accuracy(POS_GOLD, POS_PRED)  # no mask: split unknown
    assert r["acc"] == approx(60.0) and r["acc_unseen"] is None and r["acc_seen"] is None


def test_token_accuracy_perfect():
    r = token_accuracy(POS_GOLD, POS_GOLD, POS_UNSEEN)
    assert r["acc"] == r["acc_seen"] == r["acc_unseen"] == 100.0
    assert all(v["acc"] == 100.0 for v in r["per_tag"].values())


def test_token_accuracy_length_mismatch_names_sentence():
    with pytest.raises(ValueError, match="sentence 1"):
        token_accuracy(POS_GOLD, [["DET", "NOUN", "VERB"], ["NOUN"]])
    with pytest.raises(ValueError, match="sentence 0"):
        token_accuracy(POS_GOLD, POS_PRED, [[False], [True, False]])
    with pytest.raises(ValueError, match="sentences"):
        token_accuracy(POS_GOLD, POS_PRED[:1])


# ----------------------------------------------------------------------------- entity scores

NER_GOLD = [
    ["B-PER", "I-PER", "O", "B-LOC"],  # PER[0,2)  LOC[3,4)
    ["O", "B-ORG", "O"],               # ORG[1,2)
    ["O", "B-PER", "I-PER"],           # PER[1,3)
    ["B-LOC", "O"],                    # LOC[0,1)
]
NER_PRED = [
    ["B-PER", "I-PER", "O", "B-ORG"],  # PER[0,2) correct, ORG[3,4) wrong type
    ["O", "B-ORG", "O"],               # ORG[1,2) correct
    ["O", "I-PER", "I-PER"],           # strict: no entity; conlleval: PER[1,3) correct
    ["B-LOC", "B-LOC"],                # LOC[0,1) correct, LOC[1,2) spurious
]
# strict:   gold 5 (PER 2, LOC 2, ORG 1), pred 5 (PER 1, LOC 2, ORG 2), correct 3
#           P = 3/5 = 60, R = 3/5 = 60, F1 = 60
#           PER: P 1/1 = 100, R 1/2 = 50,  F1 = 2*1*.5/1.5 = 66.67, support 2
#           LOC: P 1/2 = 50,  R 1/2 = 50,  F1 = 50,                 support 2
#           ORG: P 1/2 = 50,  R 1/1 = 100, F1 = 66.67,              support 1
# conlleval: pred 6 (the I-PER I-PER opens PER[1,3)), correct 4
#           P = 4/6, R = 4/5, F1 = 2*(2/3)*(4/5) / (2/3 + 4/5) = (16/15)/(22/15) = 16/22 = 72.73
# tokens: 12, wrong: (0,3) B-LOC->B-ORG, (2,1) B-PER->I-PER, (3,1) O->B-LOC -> 9/12 = 75


def test_entity_scores_by_hand_strict_vs_conlleval():
    r = entity_scores(NER_GOLD, NER_PRED)
    assert r["precision"] == approx(60.0)
    assert r["recall"] == approx(60.0)
    assert r["f1"] == approx(60.0)
    assert r["f1_conlleval"] == approx(1600 / 22)
    assert r["n_gold"] == 5 and r["n_pred"] == 5
    assert r["acc"] == approx(75.0)
    assert r["per_type"] == {
        "LOC": {"precision": approx(50.0), "recall": approx(50.0), "f1": approx(50.0), "support": 2},
        "ORG": {"precision": approx(50.0), "recall": approx(100.0), "f1": approx(200 / 3), "support": 1},
        "PER": {"precision": approx(100.0), "recall": approx(50.0), "f1": approx(200 / 3), "support": 2},
    }


def test_entity_scores_agree_with_seqeval():
    r = entity_scores(NER_GOLD, NER_PRED)
    strict = dict(mode="strict", scheme=IOB2)
    assert r["precision"] == approx(100 * precision_score(NER_GOLD, NER_PRED, **strict))
    assert r["recall"] == approx(100 * recall_score(NER_GOLD, NER_PRED, **strict))
    assert r["f1"] == approx(100 * f1_score(NER_GOLD, NER_PRED, **strict))
    assert r["f1_conlleval"] == approx(100 * f1_score(NER_GOLD, NER_PRED))
    report = classification_report(NER_GOLD, NER_PRED, output_dict=True, **strict)
    for etype, scores in r["per_type"].items():
        assert scores["f1"] == approx(100 * report[etype]["f1-score"])
        assert scores["support"] == report[etype]["support"]


def test_entity_scores_perfect():
    r = entity_scores(NER_GOLD, NER_GOLD)
    for key in ("precision", "recall", "f1", "f1_conlleval", "acc"):
        assert r[key] == 100.0, key
    assert all(s["f1"] == 100.0 for s in r["per_type"].values())


def test_entity_scores_bioes():
    gold = [["B-PER", "I-PER", "E-PER", "S-LOC", "O"], ["O", "B-ORG", "E-ORG"]]
    pred = [["B-PER", "I-PER", "E-PER", "O", "S-LOC"], ["O", "I-ORG", "E-ORG"]]
    # strict: gold PER, LOC, ORG; pred PER (correct), LOC[4,5) (wrong span); I-ORG after O is
    #         no entity -> P = 1/2 = 50, R = 1/3 = 33.33, F1 = 2*(1/2)*(1/3)/(5/6) = 40
    # conlleval: the I-ORG E-ORG opens ORG[1,3) which is correct -> P = 2/3, R = 2/3, F1 = 66.67
    r = entity_scores(gold, pred, scheme="BIOES")
    assert r["precision"] == approx(50.0)
    assert r["recall"] == approx(100 / 3)
    assert r["f1"] == approx(40.0)
    assert r["f1_conlleval"] == approx(200 / 3)
    assert r["n_gold"] == 3 and r["n_pred"] == 2


def test_entity_scores_errors():
    with pytest.raises(ValueError, match="sentence 2"):
        entity_scores(NER_GOLD, NER_PRED[:2] + [["O", "I-PER"]] + NER_PRED[3:])
    with pytest.raises(ValueError, match="IOBX"):
        entity_scores(NER_GOLD, NER_PRED, scheme="IOBX")


# ----------------------------------------------------------------------------- task dispatch

def test_task_metrics_pos_and_ner():
    pos = task_metrics("pos", POS_GOLD, POS_PRED, POS_UNSEEN)
    assert pos == token_accuracy(POS_GOLD, POS_PRED, POS_UNSEEN)
    assert pos[MAIN_METRIC["pos"]] == approx(60.0)

    # unseen: (0,3) wrong, (2,1) wrong, (1,1) right -> 1/3
    unseen = [[False, False, False, True], [False, True, False], [False, True, False], [False, False]]
    ner = task_metrics("ner", NER_GOLD, NER_PRED, unseen)
    assert ner[MAIN_METRIC["ner"]] == approx(60.0)
    assert ner["acc_unseen"] == approx(100 / 3) and ner["n_unseen"] == 3
    assert ner["f1_conlleval"] == approx(1600 / 22)


def test_task_metrics_unknown_task():
    with pytest.raises(ValueError, match="chunking.*'ner'.*'pos'"):
        task_metrics("chunking", POS_GOLD, POS_PRED)
