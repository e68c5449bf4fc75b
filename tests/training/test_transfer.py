"""init_from: a training that starts from a trained tagger (tagger.training.transfer)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.data.vocab import Vocab
from tagger.models.tagger import build_tagger
from tagger.schemes import map_label
from tagger.training.transfer import TransferError, copy_parameters
from tests.conftest import train_tiny

_ORG = [["Acme", "Corp"], ["Globex"], ["Initech"]]
_PER = [["John"], ["Mary", "Smith"], ["Zoe"]]


def write_org_corpus(folder: Path, n: int, seed: int, name: str) -> Path:
    """IOB2 column file with a type (ORG) and words (hires, Zoe, ...) the tiny CoNLL corpus never had."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        org, per = rng.choice(_ORG), rng.choice(_PER)
        sent = [(w, ("B-" if i == 0 else "I-") + "ORG") for i, w in enumerate(org)] + [("hires", "O")]
        sent += [(w, ("B-" if i == 0 else "I-") + "PER") for i, w in enumerate(per)] + [(".", "O")]
        lines += [f"{w} {t}" for w, t in sent] + [""]
    path = folder / name
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def org_data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("org")
    for name, n, seed in (("train.txt", 40, 1), ("dev.txt", 10, 2), ("test.txt", 10, 3)):
        write_org_corpus(root, n, seed, name)
    return root


ORG_CORPUS = ["data=conll", "data.task=ner", "data.corpus.scheme=IOB2", 
              "data.corpus.files.train=train.txt", "data.corpus.files.validation=dev.txt",
              "data.corpus.files.test=test.txt", "head=crf"]
SMALL = ["model=self_attention", "model.d_model=32", "model.heads=2", "model.ffn_dim=32"]


def test_map_label_maps_whole_labels_and_entity_types():
    assert map_label("B-person", {"person": "PER"}) == "B-PER"
    assert map_label("I-MISC", {"MISC": "O"}) == "O"
    assert map_label("NOUN", {"NOUN": "PROPN"}) == "PROPN"
    assert map_label("B-LOC", {"person": "PER"}) == "B-LOC"


def test_vocab_extends_the_sources_in_its_order():
    source = Vocab.build([["b", "a", "b"]], ["O", "B-PER"], "ner", "IOB2", lowercase=True)
    target = Vocab.build([["c", "a", "c", "C"]], ["O", "B-ORG"], "ner", "IOB2", base=source)
    assert target.words == ["<pad>", "<unk>", "b", "a", "c"]  # source words first, then the new one
    assert target.counts == [0, 0, 0, 1, 3]  # counted in the new corpus
    assert target.lowercase and target.chars[:len(source.chars)] == source.chars
    assert target.labels == ["O", "B-ORG"]


def test_copy_keeps_shared_rows_and_leaves_new_labels_fresh(tiny_ner_run):
    source = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    labels = ["O", "B-ORG", "B-PER", "I-PER", "I-ORG"]  # ORG: a type the source never had
    vocab = Vocab.build([["Acme", "John", "hires", "."]], labels, "ner", "IOB2", base=source.vocab)
    torch.manual_seed(0)
    target = build_tagger(source.config, vocab)
    before = target.head.proj.weight.detach().clone()
    report = copy_parameters(target, vocab, source.tagger, source.vocab, source.config, source.config)
    src, new = source.tagger.state_dict(), target.state_dict()
    for name in new:
        if name.startswith("encoder.") or name.startswith("embedder.char.conv"):
            assert torch.equal(new[name], src[name]), name
    s_index = {label: i for i, label in enumerate(source.vocab.labels)}
    for i, label in enumerate(labels):
        if label in s_index:
            assert torch.equal(new["head.proj.weight"][i], src["head.proj.weight"][s_index[label]])
        else:
            assert torch.equal(new["head.proj.weight"][i], before[i])  # fresh row
    per, o = labels.index("B-PER"), labels.index("O")
    assert new["head.crf.transitions"][o, per] == src["head.crf.transitions"][s_index["O"], s_index["B-PER"]]
    john = vocab.words.index("John")
    assert torch.equal(new["embedder.word.weight"][john], src["embedder.word.weight"][source.vocab.words.index("John")])
    assert report.partial["head.proj.weight"] == "3/5"
    assert not report.fresh


def test_mismatched_encoder_config_fails_naming_the_keys(tiny_ner_run):
    source = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    config = json.loads(json.dumps(source.config))
    config["model"]["d_model"], config["model"]["ffn_dim"] = 48, 64
    target = build_tagger(config, source.vocab)
    with pytest.raises(TransferError, match=r"model\.d_model: source 32, config 48.*model\.ffn_dim"):
        copy_parameters(target, source.vocab, source.tagger, source.vocab, config, source.config)


def test_mismatched_embedder_fails_before_training(tmp_path, tiny_data, tiny_ner_run):
    with pytest.raises(TransferError, match=r"embedder\.char_filters: source 50, config 20"):
        train_tiny(tmp_path, tiny_data, ["data=conll2003", "head=crf", *SMALL, "embedder.char_filters=20",
                                         f"init_from={tiny_ner_run}"])


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, org_data, tiny_ner_run) -> Path:
    return train_tiny(tmp_path_factory.mktemp("finetuned"), org_data,
                      [*ORG_CORPUS, *SMALL, f"init_from={tiny_ner_run}", "transfer.lr_scale=0.5",
                       "trainer.max_epochs=8"])


def test_a_label_the_source_never_had_trains(finetuned, tiny_ner_run):
    metrics = json.loads((finetuned / "metrics.json").read_text())
    assert "ORG" in metrics["test"]["per_type"] and metrics["test"]["per_type"]["ORG"]["f1"] > 50
    vocab = load_checkpoint(finetuned / "checkpoints" / "best.ckpt").vocab
    source = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt").vocab
    assert vocab.words[:source.num_trained] == source.words[:source.num_trained]
    assert "Zoe" in vocab.words and "B-ORG" in vocab.labels


def test_metrics_json_names_its_source(finetuned, tiny_ner_run):
    init = json.loads((finetuned / "metrics.json").read_text())["init_from"]
    source = json.loads((tiny_ner_run / "metrics.json").read_text())
    assert init["source"] == str(tiny_ner_run)
    assert init["dev"] == source["dev"]["f1"] and init["test"] == source["test"]["f1"]
    assert init["config"]["model"]["d_model"] == 32 and init["task"] == "ner"
    assert init["commit"] == (source.get("git") or {}).get("commit")
    assert init["transferred"]["copied"] > 0 and "head.proj.weight" in init["transferred"]["partial"]


def test_frozen_body_stays_the_sources(tmp_path, org_data, tiny_ner_run):
    run = train_tiny(tmp_path, org_data, [*ORG_CORPUS, *SMALL, f"init_from={tiny_ner_run}",
                                          "transfer.freeze_epochs=5", "trainer.max_epochs=1"])
    src = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt").tagger.state_dict()
    new = load_checkpoint(run / "checkpoints" / "last.ckpt").tagger.state_dict()
    assert all(torch.equal(new[k], src[k]) for k in new if k.startswith("encoder."))
    o = src["head.proj.bias"][0]  # "O" is label 0 in both: copied, then trained
    assert new["head.proj.bias"][0] != o


def test_a_pos_model_starts_an_ner_model(tiny_ner_from_pos_run, tiny_pos_run):
    metrics = json.loads((tiny_ner_from_pos_run / "metrics.json").read_text())
    assert metrics["task"] == "ner" and metrics["init_from"]["task"] == "pos"
    assert set(metrics["init_from"]["transferred"]["fresh"]) >= {"head.crf.start", "head.crf.transitions"}
    assert metrics["init_from"]["transferred"]["partial"]["head.proj.weight"].startswith("0/")


def test_finetuning_from_a_model_store_tag(tmp_path, store, org_data, tiny_ner_run):
    from tagger.artifacts.package import package

    tag = str(package(tiny_ner_run, "tagger-src").tag)
    run = train_tiny(tmp_path, org_data, [*ORG_CORPUS, *SMALL, "init_from=tagger-src:latest", "trainer.max_epochs=1"])
    init = json.loads((run / "metrics.json").read_text())["init_from"]
    assert init["store_tag"] == tag and init["source"] == "tagger-src:latest"
    assert init["dev"] == json.loads((tiny_ner_run / "metrics.json").read_text())["dev"]["f1"]


def test_report_puts_finetuned_beside_scratch_and_zero_shot(tmp_path, finetuned, org_data):
    from tagger.report.build import main as report_main

    scratch = train_tiny(tmp_path / "scratch", org_data, [*ORG_CORPUS, *SMALL, "trainer.max_epochs=8"])
    out = tmp_path / "report"
    assert report_main([str(finetuned), str(scratch), "--out", str(out), "--threads", "1", "--no-eval"]) == 0
    text = (out / "report.md").read_text()
    section = text[text.index("Transfer: from scratch, fine-tuned, zero-shot"):]
    assert "init_from=conll2003:self_attention" in section and "from scratch" in section
    zero = next(line for line in section.splitlines() if "zero-shot (source dev " in line)
    assert "–" not in zero and "not scored" not in zero  # the source scored on dev and test
    assert "LOC→O" in section  # the source's LOC: a type this corpus does not annotate, dropped


def test_report_scores_no_zero_shot_for_a_source_of_another_task(tmp_path, tiny_ner_from_pos_run, tiny_pos_run):
    from tagger.report.build import main as report_main

    out = tmp_path / "report"
    assert report_main([str(tiny_ner_from_pos_run), "--out", str(out), "--threads", "1", "--no-eval"]) == 0
    section = (out / "report.md").read_text().split("Transfer: from scratch, fine-tuned, zero-shot")[1]
    row = next(line for line in section.splitlines() if "` zero-shot |" in line)
    assert "not scored: a pos model (cross-task)" in row and str(tiny_pos_run) not in row  # no machine path


def test_a_type_mapped_to_o_lends_no_row(tiny_ner_run):
    source = load_checkpoint(tiny_ner_run / "checkpoints" / "best.ckpt")
    labels = ["O", "B-PERSON", "I-PERSON"]
    vocab = Vocab.build([["John"]], labels, "ner", "IOB2", base=source.vocab)
    target = build_tagger(source.config, vocab)
    report = copy_parameters(target, vocab, source.tagger, source.vocab, source.config, source.config,
                             {"PER": "PERSON", "LOC": "O"})
    src = source.tagger.state_dict()
    s_index = {label: i for i, label in enumerate(source.vocab.labels)}
    for i, label in enumerate(["O", "B-PER", "I-PER"]):
        assert torch.equal(target.head.proj.weight[i], src["head.proj.weight"][s_index[label]])
    assert report.partial["head.proj.weight"] == "3/3"
