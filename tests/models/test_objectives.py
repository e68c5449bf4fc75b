from __future__ import annotations

import pytest
import torch

from tagger.data.vocab import PAD_ID, UNK_ID
from tagger.models.embedder import Embedder
from tagger.models.heads import SoftmaxHead
from tagger.models.objectives import Adversarial, MaskedWords
from tagger.models.self_attention import SelfAttentionEncoder
from tagger.models.tagger import Tagger


def _tagger(num_words: int = 12, aux: torch.nn.Module | None = None, d: int = 32) -> Tagger:
    emb = Embedder(num_words, 6, word_dim=16, char_dim=4, char_filters=4, dropout=0.0, word_dropout=0.0)
    enc = SelfAttentionEncoder(emb.output_dim, d_model=d, heads=2, layers=1, ffn_dim=d, dropout=0.0, attn_dropout=0.0,
                               pos_encoding="sinusoidal")
    head = SoftmaxHead(enc.output_dim, labels=["A", "B"])
    return Tagger(emb, enc, head, aux=aux)


def _batch(words: torch.Tensor) -> dict[str, torch.Tensor]:
    mask = words != PAD_ID
    chars = torch.where(mask, 2 + words % 4, PAD_ID).unsqueeze(-1).repeat(1, 1, 3)  # (B,T,3) some characters
    return {"words": words, "chars": chars, "mask": mask, "tags": (words % 2) * mask}


def test_only_real_known_tokens_are_hidden_at_rate_p():
    aux = MaskedWords(8, 4, p=0.3)
    words = torch.randint(2, 12, (200, 50))
    words[:, 40:] = PAD_ID
    words[:, 0] = UNK_ID
    hidden = aux.choose(words, words != PAD_ID)
    assert not hidden[:, 40:].any() and not hidden[:, 0].any()
    assert hidden[:, 1:40].float().mean().item() == pytest.approx(0.3, abs=0.02)


def test_hidden_tokens_lose_word_and_characters_and_the_rest_is_untouched():
    words = torch.tensor([[3, 4, 5, 0]])
    chars = torch.tensor([[[2, 3], [4, 5], [6, 7], [0, 0]]])
    hidden = torch.tensor([[False, True, False, False]])
    out = MaskedWords.hide({"words": words, "chars": chars}, hidden)
    assert out["words"].tolist() == [[3, UNK_ID, 5, 0]]
    assert out["chars"].tolist() == [[[2, 3], [PAD_ID, PAD_ID], [6, 7], [0, 0]]]
    # the distinct-word form: a hidden token points at row 0, the empty word; the table is left as it is
    type_chars = torch.tensor([[0, 0], [2, 3], [4, 5], [6, 7]])
    out = MaskedWords.hide({"words": words, "types": torch.tensor([[1, 2, 3, 0]]), "type_chars": type_chars}, hidden)
    assert out["words"].tolist() == [[3, UNK_ID, 5, 0]] and out["types"].tolist() == [[1, 0, 3, 0]]
    assert out["type_chars"] is type_chars and "chars" not in out
    assert out["type_chars"][out["types"]].tolist() == [[[2, 3], [PAD_ID, PAD_ID], [6, 7], [0, 0]]]


def test_tagging_pass_sees_the_whole_input_and_the_second_pass_hides_words():
    torch.manual_seed(0)
    tagger = _tagger(aux=MaskedWords(32, 16, p=0.5)).train()
    seen = []
    hook = tagger.embedder.word.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
    words = torch.randint(2, 12, (4, 10))
    tagger.loss(_batch(words))
    hook.remove()
    tagging, masked = seen
    assert torch.equal(tagging, words)  # (the embedder's word dropout is 0 here)
    assert (masked == UNK_ID).any() and ((masked == words) | (masked == UNK_ID)).all()


def test_evaluation_loss_and_predictions_ignore_the_objective():
    torch.manual_seed(0)
    with_aux = _tagger(aux=MaskedWords(32, 16, p=0.5)).eval()
    plain = _tagger().eval()
    plain.load_state_dict({k: v for k, v in with_aux.state_dict().items() if not k.startswith("aux.")})
    batch = _batch(torch.randint(2, 12, (3, 7)))
    assert torch.equal(with_aux.loss(batch), plain.loss(batch))
    assert torch.equal(with_aux.predict(batch)[0], plain.predict(batch)[0])


def test_hidden_words_are_learned_from_their_context():
    """Sequences count up (w, w+1, w+2, ...): a hidden word is its left neighbour + 1, so the objective's
    loss must fall far below guessing among the 10 words."""
    torch.manual_seed(0)
    tagger = _tagger(aux=MaskedWords(32, 16, p=0.15, weight=1.0)).train()
    opt = torch.optim.Adam(tagger.parameters(), lr=3e-3)

    def counting() -> torch.Tensor:
        return 2 + (torch.randint(0, 10, (32, 1)) + torch.arange(12)) % 10  # (32,12) words 2..11, counting up

    def aux_loss() -> torch.Tensor:
        batch = _batch(counting())
        hidden = tagger.aux.choose(batch["words"], batch["mask"])
        h = tagger.encode(tagger.aux.hide(batch, hidden))
        return tagger.aux.loss(h, batch["words"], hidden, tagger.embedder.word.weight)

    first = aux_loss().item()
    for _ in range(300):
        opt.zero_grad()
        tagger.loss(_batch(counting())).backward()
        opt.step()
    with torch.no_grad():
        last = sum(aux_loss().item() for _ in range(5)) / 5
    assert first > 2.0 and last < 0.5, (first, last)  # log(10) = 2.3


@pytest.mark.parametrize("kwargs, key", [({"p": 0.0}, "aux.p"), ({"p": 1.0}, "aux.p"), ({"weight": 0.0}, "aux.weight"),
                                         ({"word_dim": 0}, "embedder.word_dim")])
def test_bad_values_name_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        MaskedWords(**{"input_dim": 8, "word_dim": 4, **kwargs})


# -- adversarial training ------------------------------------------------------------------------
def _embedded(tagger: Tagger, words: torch.Tensor):
    batch = _batch(words)
    x = tagger.embedder(batch["words"], batch["chars"])  # (B,T,D)
    loss = tagger.head.loss(tagger.encoder(x, batch["mask"]), batch["tags"], batch["mask"])
    return batch, x, loss


def test_adversarial_step_is_epsilon_of_each_rows_norm_and_zero_on_padding():
    torch.manual_seed(0)
    aux = Adversarial(epsilon=0.1)
    tagger = _tagger(aux=aux).eval()
    words = torch.randint(2, 12, (3, 8))
    words[1, 5:] = PAD_ID
    batch, x, loss = _embedded(tagger, words)
    r = aux.perturbation(x, loss, batch["mask"])
    assert not r.requires_grad and r.shape == x.shape
    assert torch.all(r[1, 5:] == 0)
    x_norm = (x.detach() * batch["mask"].unsqueeze(-1)).flatten(1).norm(dim=1)
    assert torch.allclose(r.flatten(1).norm(dim=1), 0.1 * x_norm, rtol=1e-5)


def test_adversarial_step_raises_the_loss_more_than_a_random_step_of_the_same_size():
    torch.manual_seed(0)
    aux = Adversarial(epsilon=0.05)
    tagger = _tagger(aux=aux).eval()
    batch, x, loss = _embedded(tagger, torch.randint(2, 12, (4, 9)))
    r = aux.perturbation(x, loss, batch["mask"])
    noise = torch.randn_like(r) * batch["mask"].unsqueeze(-1)
    noise = noise * (r.flatten(1).norm(dim=1) / noise.flatten(1).norm(dim=1))[:, None, None]

    def loss_at(y):
        return tagger.head.loss(tagger.encoder(y, batch["mask"]), batch["tags"], batch["mask"]).item()

    clean, adversarial, random = loss_at(x.detach()), loss_at(x.detach() + r), loss_at(x.detach() + noise)
    assert adversarial > clean and adversarial - clean > 3 * abs(random - clean), (clean, adversarial, random)


def test_adversarial_training_adds_the_second_pass_in_training_only():
    torch.manual_seed(0)
    tagger = _tagger(aux=Adversarial(epsilon=0.05, weight=0.5))
    batch = _batch(torch.randint(2, 12, (3, 7)))
    tagger.eval()
    clean = tagger.loss(batch)
    tagger.train()  # no dropout in _tagger: the training loss is the clean one + 0.5 x the perturbed one
    _, x, loss = _embedded(tagger, batch["words"])
    perturbed = tagger.head.loss(tagger.encoder(x + tagger.aux.perturbation(x, loss, batch["mask"]), batch["mask"]),
                                 batch["tags"], batch["mask"])
    assert torch.isclose(tagger.loss(batch), clean + 0.5 * perturbed, rtol=1e-5)
    assert perturbed > clean


@pytest.mark.parametrize("kwargs, key", [({"epsilon": 0.0}, "aux.epsilon"), ({"epsilon": 1.0}, "aux.epsilon"),
                                         ({"weight": -1.0}, "aux.weight")])
def test_adversarial_bad_values_name_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        Adversarial(**kwargs)
