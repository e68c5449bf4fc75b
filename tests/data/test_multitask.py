"""The batch schedule of several tasks and the shared vocabulary (tagger/data/multitask.py)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from hydra.utils import instantiate
from torch.utils.data import DataLoader

from tagger.data.multitask import TaskBatches, task_batch_counts
from tests.conftest import MULTITASK, compose


def test_temperature_one_gives_each_task_its_own_batch_count():
    assert task_batch_counts({"pos": 10, "ner": 3}, 1.0) == {"pos": 10, "ner": 3}


@pytest.mark.parametrize("temperature", [0.5, 2.0, 5.0, 1e6])
def test_temperature_keeps_the_epoch_length_and_moves_the_shares(temperature):
    counts = task_batch_counts({"big": 90, "small": 10}, temperature)
    assert sum(counts.values()) == 100
    if temperature > 1:  # towards uniform: the small corpus gets more than its share, never more than half
        assert 10 < counts["small"] <= 50
    else:  # below 1 the large corpus gets more than its share
        assert counts["small"] < 10
    if temperature == 1e6:
        assert counts == {"big": 50, "small": 50}


def test_a_task_with_batches_is_never_left_out():
    assert task_batch_counts({"big": 1000, "tiny": 1}, 0.1)["tiny"] >= 1


@pytest.mark.parametrize("temperature", [0, -1.0])
def test_a_bad_temperature_names_its_key(temperature):
    with pytest.raises(ValueError, match="data.temperature"):
        task_batch_counts({"a": 1}, temperature)


def _loaders(sizes: dict[str, int], batch_size: int = 2) -> dict[str, DataLoader]:
    """Loaders whose items say which task and which example they are."""
    return {name: DataLoader([{"task_id": torch.tensor(t), "example": torch.tensor(i)} for i in range(n)],
                             batch_size=batch_size)
            for t, (name, n) in enumerate(sizes.items())}


def test_every_batch_holds_one_tasks_sentences_and_temperature_one_uses_each_batch_once():
    batches = TaskBatches(_loaders({"pos": 7, "ner": 4}), temperature=1.0, seed=3)
    assert len(batches) == 4 + 2
    seen = list(batches)
    assert len(seen) == len(batches)
    ids = {"pos": 0, "ner": 1}
    for batch in seen:  # one task per batch, named by the batch's task key
        assert set(batch["task_id"].tolist()) == {ids[batch["task"]]}
    for name, n in (("pos", 7), ("ner", 4)):
        examples = sorted(e for b in seen if b["task"] == name for e in b["example"].tolist())
        assert examples == list(range(n))


def test_the_task_order_is_shuffled_by_the_seed_and_epoch():
    batches = TaskBatches(_loaders({"pos": 40, "ner": 40}), temperature=1.0, seed=0)
    first = batches.order()
    assert batches.order() == first  # the same epoch, the same order
    batches.set_epoch(1)
    assert batches.order() != first and Counter(batches.order()) == Counter(first)
    # Lightning sets a training loader's epoch through its sampler
    assert batches.sampler is batches


def test_upsampled_task_starts_its_loader_again_within_an_epoch():
    batches = TaskBatches(_loaders({"big": 40, "small": 4}), temperature=1e6, seed=0)
    seen = list(batches)
    small = [b for b in seen if b["task"] == "small"]
    assert len(small) == batches.counts["small"] > 2  # more batches than the small loader has
    assert {e for b in small for e in b["example"].tolist()} == set(range(4))


def test_the_vocabulary_is_built_once_from_every_tasks_training_split(tmp_path, tiny_data):
    from tagger.training.multitask import multitask_datamodule

    cfg = compose([f"data_dir={tiny_data}", *MULTITASK], tmp_path)
    module = multitask_datamodule(cfg)
    module.setup("fit")
    vocab = module.vocab
    assert {"cat", "sees"} <= set(vocab.words) and {"Paris", "John"} <= set(vocab.words)  # EWT-like and CoNLL-like
    assert list(vocab.tasks) == ["pos", "ner"] and vocab.task_names == ["pos", "ner"]
    pos, ner = vocab.for_task("pos"), vocab.for_task("ner")
    assert pos.task == "pos" and "NOUN" in pos.labels and pos.tag_scheme is None
    assert ner.task == "ner" and "B-PER" in ner.labels and ner.tag_scheme == "IOB2"  # IOB1 read as IOB2
    assert pos.words is vocab.words and ner.words is vocab.words  # one word table
    assert vocab.tokenizer == cfg.data.tokenizer
    # each task's data module encodes with the shared vocabulary; its labels are the task's
    assert module.tasks["ner"].vocab.labels == ner.labels
    with pytest.raises(ValueError, match="other"):
        vocab.for_task("other")


def test_document_context_in_a_task_names_its_key(tmp_path, tiny_data):
    from tagger.training.multitask import multitask_datamodule

    cfg = compose([f"data_dir={tiny_data}", *MULTITASK, "tasks.ner.data.doc_window=64"], tmp_path)
    with pytest.raises(ValueError, match="tasks.ner.data.doc_window"):
        multitask_datamodule(cfg)


def test_data_multitask_without_tasks_says_what_it_needs(tmp_path, tiny_data):
    from hydra.errors import InstantiationException

    cfg = compose([f"data_dir={tiny_data}", "data=multitask"], tmp_path)
    with pytest.raises(InstantiationException, match="tasks.NAME.data"):
        instantiate(cfg.data)
