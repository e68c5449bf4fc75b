"""init_from a model of several tasks: the body and the head of the matching task start the new model."""
from __future__ import annotations

import json

import pytest
import torch

from tagger.artifacts.checkpoint import load_checkpoint
from tagger.models.tagger import build_tagger
from tagger.training.transfer import TransferError, copy_parameters, task_source
from tests.conftest import train_tiny, train_tiny_tasks

HEADS = {"pos": {"_target_": "tagger.models.heads.SoftmaxHead", "label_smoothing": 0.0},
         "ner": {"_target_": "tagger.models.heads.CRFHead", "constrain": True}}


def _target(source, task: str):
    """A fresh single-task model with the source's settings, for ``task``'s labels."""
    config = {"embedder": source.config["embedder"], "model": source.config["model"], "head": HEADS[task]}
    torch.manual_seed(123)
    return build_tagger(config, source.vocab.for_task(task)), config


@pytest.mark.parametrize("task, named", [("ner", None), ("pos", None), ("ner", "ner"), ("pos", "pos")])
def test_the_matching_tasks_head_and_the_body_are_copied(tiny_multitask_run, task, named):
    source = load_checkpoint(tiny_multitask_run / "checkpoints" / "best.ckpt")
    target, config = _target(source, task)
    view, view_vocab, view_config, picked = task_source(source.tagger, source.vocab, source.config,
                                                        source.vocab.for_task(task), named)
    assert picked == task  # by label overlap, or by transfer.task
    copy_parameters(target, source.vocab.for_task(task), view, view_vocab, config, view_config)
    for name, param in target.head.state_dict().items():
        assert torch.equal(param, source.tagger.heads[task].state_dict()[name]), name
    for name, param in target.encoder.state_dict().items():
        assert torch.equal(param, source.tagger.encoder.state_dict()[name]), name


def test_a_task_the_source_lacks_names_its_tasks(tiny_multitask_run):
    source = load_checkpoint(tiny_multitask_run / "checkpoints" / "best.ckpt")
    with pytest.raises(TransferError, match="transfer.task.*pos, ner"):
        task_source(source.tagger, source.vocab, source.config, source.vocab.for_task("ner"), "chunk")


def test_init_from_a_multitask_run_fine_tunes_an_ner_model(tiny_multitask_run, tiny_data, tmp_path):
    run = train_tiny(tmp_path, tiny_data, ["data=conll2003", "model=self_attention_ner", "head=crf",
                                           "model.d_model=32", "model.heads=2", "model.ffn_dim=32",
                                           "trainer.max_epochs=1", f"init_from={tiny_multitask_run}",
                                           "data.lowercase=false"])
    init = json.loads((run / "metrics.json").read_text())["init_from"]
    assert init["source_task"] == "ner" and init["task"] == "multitask"  # not the first task's kind
    assert "head.proj.weight" in init["transferred"]["partial"]  # the entity head's label rows came along
    assert not any(name.startswith("head.") for name in init["transferred"]["fresh"])


def test_a_multitask_model_starts_from_a_single_task_one_with_fresh_heads(tiny_pos_run, tiny_data, tmp_path):
    run = train_tiny_tasks(tmp_path, tiny_data, ["model=self_attention", "trainer.max_epochs=1",
                                                 f"init_from={tiny_pos_run}"])
    init = json.loads((run / "metrics.json").read_text())["init_from"]
    assert init["transferred"]["copied"] > 0
    assert {n.split(".")[1] for n in init["transferred"]["fresh"] if n.startswith("heads.")} == {"pos", "ner"}
