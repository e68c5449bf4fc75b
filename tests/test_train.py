"""End to end through the real configs: every group instantiates, fast_dev_run per model, a real
run dir, resume, and (slow) real learning on an EWT subset."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from tests.conftest import CONF_DIR, REAL_DATA, compose, train_tiny

GROUPS = {p.name: sorted(f.stem for f in p.glob("*.yaml")) for p in Path(CONF_DIR).iterdir() if p.is_dir()}


@pytest.mark.parametrize("option", GROUPS["model"])
def test_every_model_config_trains_fast_dev_run(tmp_path, tiny_data, option):
    for data in ("ud_ewt", "conll2003"):
        out = tmp_path / data
        train_tiny(out, tiny_data, [f"model={option}", f"data={data}", "+trainer.fast_dev_run=true"])
        assert (out / "vocab.json").exists()
        assert json.loads((out / "metrics.json").read_text())["task"] == ("pos" if data == "ud_ewt" else "ner")


@pytest.mark.parametrize("group", ["data", "embedder", "head", "optimizer", "trainer", "callbacks", "logger"])
def test_every_config_group_instantiates(tmp_path, tiny_data, group):
    import torch

    for option in GROUPS[group]:
        if option == "gpu" and not torch.cuda.is_available():
            continue  # checked on the GPU machine (trainer=gpu) when one is lent
        if group == "data" and option == "multitask":  # a data module around the data configs of its tasks
            from tagger.training.multitask import multitask_datamodule

            cfg = compose([f"data_dir={tiny_data}", "experiment=multitask"], tmp_path)
            assert multitask_datamodule(cfg) is not None
            continue
        cfg = compose([f"data_dir={tiny_data}", f"{group}={option}"], tmp_path)
        node = cfg[group]
        if group in ("embedder", "model", "head"):
            continue  # need vocab sizes: covered by the fast_dev_run test
        objs = [instantiate(c) for c in node.values()] if "_target_" not in node else [instantiate(node)]
        assert all(o is not None for o in objs), (group, option)


def test_experiment_configs_compose(tmp_path, tiny_data):
    for option in GROUPS.get("experiment", []):
        cfg = compose([f"data_dir={tiny_data}", f"experiment={option}"], tmp_path)
        assert cfg.model._target_


def test_run_dir_has_metrics_and_checkpoints_and_resume(tmp_path, tiny_data):
    out = train_tiny(tmp_path / "a", tiny_data, ["model=bilstm", "model.hidden_dim=16"])
    m = json.loads((out / "metrics.json").read_text())
    for key in ("dev", "test", "params", "epochs", "train_seconds", "train_tokens_per_s", "config"):
        assert m[key] is not None, key
    assert 0 <= m["dev"]["acc"] <= 100 and "acc_unseen" in m["test"]
    assert Path(m["best_checkpoint"]).exists() and Path(m["last_checkpoint"]).exists()
    # last.ckpt: the latest epoch's state, whichever epoch was best
    last = torch.load(m["last_checkpoint"], map_location="cpu", weights_only=True)
    best = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)
    assert not Path(m["last_checkpoint"]).is_symlink()
    assert (last["epoch"], best["epoch"]) == (m["epochs"] - 1, m["best_epoch"])
    # resume: one more epoch from last.ckpt continues the epoch count instead of restarting
    out2 = train_tiny(tmp_path / "b", tiny_data, ["model=bilstm", "model.hidden_dim=16", "trainer.max_epochs=3",
                                                 f"ckpt_path={m['last_checkpoint']}"])
    m2 = json.loads((out2 / "metrics.json").read_text())
    assert m2["epochs"] == 3 and m2["global_steps"] > m["global_steps"]


def test_bad_config_value_names_the_key(tmp_path, tiny_data):
    with pytest.raises(Exception, match="model.score"):
        train_tiny(tmp_path, tiny_data, ["model=self_attention", "model.score=cosine", "+trainer.fast_dev_run=true"])
    with pytest.raises(Exception, match="model.d_model"):
        train_tiny(tmp_path, tiny_data, ["model=self_attention", "model.d_model=30", "model.heads=4",
                                         "+trainer.fast_dev_run=true"])


@pytest.mark.slow
@pytest.mark.skipif(not (REAL_DATA / "ud_english_ewt").exists(), reason="real corpora not found")
def test_learns_pos_on_real_ewt_subset(tmp_path):
    """The spine on real data: a short training (4 x 120 batches of 32, ~15k sentences drawn from train) must learn."""
    from tagger.training.run import train

    cfg = compose([f"data_dir={REAL_DATA}", "model=bilstm", "threads=1", "trainer.max_epochs=4", "+trainer.limit_train_batches=120",
                   "~callbacks.progress_bar", "+trainer.enable_progress_bar=false"], tmp_path)
    m = train(cfg)
    assert m["dev"]["acc"] > 80.0, m["dev"]["acc"]


def test_learned_positions_shorter_than_dev_sentences_validate_in_windows(tmp_path, tiny_data):
    """A learned table of 5 positions trains on short sentences and still validates whole longer ones."""
    out = train_tiny(tmp_path, tiny_data, ["model=self_attention", "model.pos_encoding=learned", "model.max_len=5",
                                           "data.max_train_len=5", "model.d_model=16", "model.heads=2"])
    m = json.loads((out / "metrics.json").read_text())
    assert m["dev"]["n_tokens"] > 0 and m["config"]["model"]["max_len"] == 5


@pytest.mark.parametrize("model, aux, key, value", [("self_attention", "masked_words", "p", 0.3),
                                                     ("bilstm", "masked_words", "p", 0.3),
                                                     ("self_attention", "adversarial", "epsilon", 0.02)])
def test_auxiliary_objective_trains_and_the_checkpoint_keeps_it(tmp_path, tiny_data, model, aux, key, value):
    """aux=... through Hydra: saved in the checkpoint config, rebuilt on load, absent from predictions."""
    from tagger.artifacts.checkpoint import load_checkpoint
    from tagger.inference.predictor import Predictor

    out = train_tiny(tmp_path, tiny_data, ["data=conll2003", f"model={model}", "head=crf", f"aux={aux}",
                                           f"aux.{key}={value}", "trainer.max_epochs=1"])
    m = json.loads((out / "metrics.json").read_text())
    assert m["config"]["aux"][key] == value
    loaded = load_checkpoint(Path(m["best_checkpoint"]))
    assert loaded.tagger.aux is not None and getattr(loaded.tagger.aux, key) == value
    sent = ["John", "lives", "in", "Paris"]
    assert len(Predictor(loaded.tagger, loaded.vocab).predict([sent])[0]) == len(sent)


def test_auxiliary_objective_bad_value_names_the_key(tmp_path, tiny_data):
    with pytest.raises(Exception, match="aux.p"):
        train_tiny(tmp_path, tiny_data, ["aux=masked_words", "aux.p=1.5", "+trainer.fast_dev_run=true"])


@pytest.mark.parametrize("recipe, overrides", [
    ("ner_self_attention_best", ["experiment=compare_ner", "model=self_attention_ner", "data.doc_window=128",
                                 "data.batch_size=5", "model.window=[3,null]", "trainer.max_epochs=25",
                                 "callbacks.early_stopping.patience=6", "aux=adversarial", "aux.epsilon=0.02"]),
    ("pos_self_attention_best", ["experiment=compare_pos", "model=self_attention", "trainer.max_epochs=25",
                                 "callbacks.early_stopping.patience=6", "aux=adversarial", "aux.epsilon=0.02"]),
    ("pos_self_attention_large", ["experiment=pos_self_attention_best", "embedder=glove", "model.d_model=192",
                                  "model.heads=6", "model.ffn_dim=384"]),
    ("ner", ["experiment=compare_ner", "model=self_attention_ner", "embedder=glove"]),
    ("ner_finetune_self_attention", ["experiment=ner_finetune", "data.doc_window=128", "data.batch_size=5",
                                     "model.window=[3,null]", "aux=adversarial", "aux.epsilon=0.02",
                                     "trainer.max_epochs=25", "callbacks.early_stopping.patience=6"]),
    ("pos", ["experiment=compare_pos", "model=self_attention", "embedder=glove"]),
])
def test_best_recipe_is_the_configuration_its_results_were_trained_with(tmp_path, tiny_data, recipe, overrides):
    """A named experiment is shorthand for the overrides its results were run with."""
    from omegaconf import OmegaConf

    def plain(overrides):
        cfg = compose([f"data_dir={tiny_data}", *overrides], tmp_path)
        d = OmegaConf.to_container(cfg, resolve=False)
        d.pop("hydra")
        return d

    composed = plain([f"experiment={recipe}"])
    assert composed == plain(overrides)
    if recipe.endswith("_best"):
        assert composed["aux"]["_target_"].endswith("Adversarial") and composed["aux"]["epsilon"] == 0.02
    else:  # the defaults chosen across corpora use the vectors
        assert composed["embedder"]["vectors"] == "glove-6b-50d" and composed["embedder"]["word_dim"] == 50
