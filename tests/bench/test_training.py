"""The training-speed bench against spaCy: its corpus conversion, its reading of spaCy's log, its arithmetic and its
report; one tiny end-to-end run (slow)."""
from __future__ import annotations

import json

import pytest

from bench.training import (EWT, SPLITS, first_reaching, main, parse_spacy_log, render, shown_command, subset_corpus,
                            summarise, to_docbin, whole_fit_rate)
from tagger.data.readers import read_conllu

CONLLU = """# sent_id = s1
# text = Dogs bark.
1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\tSpaceAfter=No
3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

# sent_id = s2
1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_

"""

# spaCy 3.8's own output of `python -m spacy train` (efficiency tagger, eval_frequency 5), colours and all
SPACY_LOG = [
    "\x1b[38;5;2m✔ Initialized pipeline\x1b[0m",
    "\x1b[1m",
    "============================= Training pipeline =============================\x1b[0m",
    "\x1b[38;5;4mℹ Pipeline: ['tok2vec', 'tagger']\x1b[0m",
    "\x1b[38;5;4mℹ Initial learn rate: 0.001\x1b[0m",
    "E    #       LOSS TOK2VEC  LOSS TAGGER  TAG_ACC  POS_ACC  SCORE ",
    "---  ------  ------------  -----------  -------  -------  ------",
    "  0       0          0.00        78.59    31.42     0.00    0.31",
    "  0       5          0.21       353.53    44.97     0.00    0.45",
    "  2     135          2.69        38.25    84.83     0.00    0.85",
    "\x1b[38;5;2m✔ Saved pipeline to output directory\x1b[0m",
    "out/model-last",
]


def test_ewt_to_docbin_round_trips_words_and_tags(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    sentences = read_conllu(path)
    assert to_docbin(sentences, tmp_path / "tiny.spacy") == 6  # syntactic words: the range line 1-2 is not one
    docs = list(DocBin().from_disk(tmp_path / "tiny.spacy").get_docs(spacy.blank("en").vocab))
    assert [[t.text for t in d] for d in docs] == [["Dogs", "bark", "."], ["do", "n't", "go"]]
    assert [[t.tag_ for t in d] for d in docs] == [["NOUN", "VERB", "PUNCT"], ["AUX", "PART", "VERB"]]


def test_subset_corpus_keeps_the_first_sentences_of_every_split(tmp_path):
    source = tmp_path / "data"
    (source / EWT).mkdir(parents=True)
    for name in SPLITS.values():
        (source / EWT / name).write_text(CONLLU, encoding="utf-8")
    out = subset_corpus(source, tmp_path / "subset", 1)
    for name in SPLITS.values():
        assert [s["tokens"] for s in read_conllu(out / EWT / name)] == [["Dogs", "bark", "."]]


def test_spacy_log_parser_reads_the_table_and_the_fit_bounds():
    log = parse_spacy_log([(float(i), line) for i, line in enumerate(SPACY_LOG)])
    assert (log["fit_start"], log["fit_end"]) == (2.0, 10.0)
    assert [(r["E"], r["#"], r["TAG_ACC"], r["SCORE"], r["at"]) for r in log["evals"]] == [
        (0, 0, 31.42, 0.31, 7.0), (0, 5, 44.97, 0.45, 8.0), (2, 135, 84.83, 0.85, 9.0)]
    assert log["evals"][1]["LOSS TAGGER"] == 353.53 and log["evals"][1]["LOSS TOK2VEC"] == 0.21


def test_spacy_log_parser_rejects_a_row_that_does_not_fit_the_header():
    with pytest.raises(ValueError, match="has 5 values"):
        parse_spacy_log([(0.0, SPACY_LOG[5]), (1.0, "  0       0          0.00        78.59    31.42")])


def test_whole_fit_rate_counts_every_epoch_over_the_fit_seconds():
    assert whole_fit_rate(3, 204_000, 60.0) == 10_200.0
    with pytest.raises(ValueError):
        whole_fit_rate(0, 204_000, 60.0)


def test_time_to_threshold_is_the_first_evaluation_that_reaches_it():
    curve = [(10.0, 90.0), (20.0, 94.3), (30.0, 93.0), (40.0, 95.0)]
    assert first_reaching(curve, 94.3) == 20.0
    assert first_reaching(curve, 96.0) is None


def sample(side: str, tokens_per_s: float, round_: int = 1) -> dict:
    return {"round": round_, "side": side, "tokens_per_s": tokens_per_s, "epochs": 2, "split_tokens": 1000,
            "trained_tokens": 2000, "fit_seconds": 2000 / tokens_per_s, "process_seconds": 9.0, "evaluations": 2,
            "best_dev_acc": 94.5, "seconds_to_threshold": 1.5,
            "machine_state": {"loadavg_1m": 0.1, "cpu_busy": 0.01, "other_training_processes": 0, "quiet": True}}


def test_report_renders_both_sides_and_the_ratio_of_the_medians():
    runs = [sample("ours", 3000.0), sample("spacy", 1000.0), sample("spacy", 1500.0, 2), sample("ours", 2000.0, 2)]
    summary = summarise({side: [r for r in runs if r["side"] == side] for side in ("ours", "spacy")})
    assert summary["ours_over_spacy"] == round(2500 / 1250, 2)
    report = render({
        "date": "today", "command": "python -m bench.training", "threads": 1, "rounds": 2, "quick": True,
        "sentences": 300, "threshold": 94.3, "note": None,
        "cpu": {"model": "a CPU", "cores": 2, "simd": "avx2"},
        "versions": {"torch": "t", "spacy": "s", "thinc": "th"},
        "commands": {"ours": "python -m tagger.train experiment=pos", "spacy": "python -m spacy train config.cfg"},
        "spacy_config": "init config", "machine_state": [r["machine_state"] for r in runs],
        "summary": summary, "runs": runs})
    rows = [line for line in report.splitlines() if line.startswith("| POS self-attention") or line.startswith("| spaCy")]
    assert len(rows) == 2
    assert rows[0].startswith("| POS self-attention (`experiment=pos`) | 2,500 |") and "`python -m tagger.train" in rows[0]
    assert rows[1].startswith("| spaCy efficiency tagger | 1,250 |") and "`python -m spacy train" in rows[1]
    assert "**2.00x**" in report and "not figures to quote" in report and "s to dev acc >= 94.3" in report


def test_report_command_names_folders_by_placeholders():
    assert shown_command(["--quick", "--data-dir", "/home/me/data", "--out=/tmp/r", "trainer.max_epochs=3"]) == (
        "python -m bench.training --quick --data-dir DATA_DIR --out=OUT trainer.max_epochs=3")


@pytest.mark.slow
def test_quick_bench_trains_both_sides_and_writes_the_report(tiny_data, tmp_path):
    out = tmp_path / "reports"
    assert main(["--quick", "--sentences", "40", "--data-dir", str(tiny_data), "--out", str(out),
                 "--runs-dir", str(tmp_path / "runs"), "embedder=default", "model.d_model=32", "model.heads=2",
                 "model.ffn_dim=32"]) == 0
    res = json.loads((out / "bench_training.json").read_text())
    ours, spacy = (res["summary"]["sides"][side] for side in ("ours", "spacy"))
    assert ours["epochs"] == spacy["epochs"] == 2 and ours["split_tokens"] == spacy["split_tokens"] > 0
    assert ours["evaluations"] == 2 and spacy["evaluations"] >= 1
    assert all(r["tokens_per_s"] > 0 and r["fit_seconds"] > 0 for r in res["runs"])
    assert str(tmp_path) not in (out / "bench_training.md").read_text()
