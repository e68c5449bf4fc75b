"""Reading checkpoints: a model saved with an older config still loads as it was trained."""
from __future__ import annotations

import torch

from tagger.artifacts.checkpoint import load_checkpoint


def test_a_config_with_the_retired_pretrained_key_loads(tmp_path, tiny_pos_run):
    """Models saved before embedder.vectors existed carry embedder.pretrained: null."""
    ckpt = torch.load(tiny_pos_run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    ckpt["tagger"]["config"]["embedder"]["pretrained"] = None
    torch.save(ckpt, tmp_path / "old.ckpt")
    old, new = load_checkpoint(tmp_path / "old.ckpt"), load_checkpoint(tiny_pos_run / "checkpoints" / "best.ckpt")
    assert old.tagger.state_dict().keys() == new.tagger.state_dict().keys()
    assert all(torch.equal(v, new.tagger.state_dict()[k]) for k, v in old.tagger.state_dict().items())
