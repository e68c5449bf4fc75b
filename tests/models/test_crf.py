"""CRF checked against brute-force enumeration of all C^T tag paths on tiny cases."""

import itertools
import math

import pytest
import torch

from tagger.models.crf import CRF

IOB2_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


# ----------------------------------------------------------------------------- helpers

def make_crf(C: int, seed: int, labels=None, scheme=None) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(C, labels, scheme).double()
    # the default init is tiny; spread the scores so paths really differ
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0.0, 1.0)
    return crf


def make_batch(lengths: list[int], C: int, seed: int):
    """Random emissions (B, T, C), left-aligned mask (B, T), random tags with -100 padding."""
    g = torch.Generator().manual_seed(seed)
    B, T = len(lengths), max(lengths)
    emissions = torch.randn(B, T, C, generator=g, dtype=torch.float64) * 2
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
    tags = torch.randint(0, C, (B, T), generator=g).masked_fill(~mask, -100)
    return emissions, mask, tags


def path_score(crf: CRF, em: torch.Tensor, path) -> float:
    """Score of one path for one sentence em (L, C), written as the textbook sum."""
    start, trans, end = (x.detach() for x in crf._potentials())
    s = start[path[0]] + em[0, path[0]]
    for t in range(1, len(path)):
        s = s + trans[path[t - 1], path[t]] + em[t, path[t]]
    return float(s + end[path[-1]])


def brute_force(crf: CRF, em: torch.Tensor):
    """(log Z, best path, best score, marginals (L, C)) of one sentence em (L, C) by enumeration."""
    L, C = em.shape
    paths = list(itertools.product(range(C), repeat=L))
    scores = torch.tensor([path_score(crf, em, p) for p in paths], dtype=torch.float64)
    log_z = torch.logsumexp(scores, dim=0)
    probs = torch.exp(scores - log_z)
    marg = torch.zeros(L, C, dtype=torch.float64)
    for p, pr in zip(paths, probs):
        for t, y in enumerate(p):
            marg[t, y] += pr
    best = int(scores.argmax())
    return float(log_z), list(paths[best]), float(scores[best]), marg


def valid_iob2(tags: list[str]) -> bool:
    """Independent IOB2 check: every I-X continues a B-X or I-X of the same type."""
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and prev[2:] != tag[2:]:
            return False
        prev = tag
    return True


CASES = [  # (C, lengths in one batch, seed)
    (3, [1], 0),
    (3, [4, 1, 3, 2], 1),
    (4, [3, 3], 2),
    (4, [2, 4, 1], 3),
    (3, [4, 4, 4], 4),
]


# ----------------------------------------------------------------------------- exactness vs brute force

@pytest.mark.parametrize("C,lengths,seed", CASES)
def test_log_partition_matches_brute_force(C, lengths, seed):
    crf = make_crf(C, seed)
    emissions, mask, _ = make_batch(lengths, C, seed)
    log_z = crf.log_partition(emissions, mask)
    assert log_z.shape == (len(lengths),)
    for b, L in enumerate(lengths):
        expected, *_ = brute_force(crf, emissions[b, :L])
        assert log_z[b].item() == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("C,lengths,seed", CASES)
def test_decode_matches_brute_force(C, lengths, seed):
    crf = make_crf(C, seed)
    emissions, mask, _ = make_batch(lengths, C, seed)
    tags, scores = crf.decode(emissions, mask)
    assert tags.shape == mask.shape and tags.dtype == torch.long
    assert (tags[~mask] == 0).all()
    for b, L in enumerate(lengths):
        _, best_path, best_score, _ = brute_force(crf, emissions[b, :L])
        assert tags[b, :L].tolist() == best_path
        assert scores[b].item() == pytest.approx(best_score, abs=1e-9)


@pytest.mark.parametrize("C,lengths,seed", CASES)
def test_score_matches_path_sum(C, lengths, seed):
    crf = make_crf(C, seed)
    emissions, mask, tags = make_batch(lengths, C, seed)  # tags padded with -100
    scores = crf.score(emissions, tags, mask)
    for b, L in enumerate(lengths):
        expected = path_score(crf, emissions[b, :L], tags[b, :L].tolist())
        assert scores[b].item() == pytest.approx(expected, abs=1e-9)


def test_score_by_hand():
    crf = CRF(2)
    with torch.no_grad():
        crf.start.copy_(torch.tensor([0.5, -1.0]))
        crf.end.copy_(torch.tensor([0.25, 2.0]))
        crf.transitions.copy_(torch.tensor([[0.1, 0.2], [0.3, 0.4]]))
    emissions = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                              [[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])  # (2, 3, 2)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    tags = torch.tensor([[0, 1, 1], [1, 0, -100]])
    # row 0, path 0 -> 1 -> 1: start[0] + e(1, 4, 6) + trans[0,1] + trans[1,1] + end[1]
    #   = 0.5 + (1 + 4 + 6) + 0.2 + 0.4 + 2.0 = 14.1
    # row 1, path 1 -> 0 (length 2): start[1] + e(2, 3) + trans[1,0] + end[0]
    #   = -1.0 + (2 + 3) + 0.3 + 0.25 = 4.55
    assert crf.score(emissions, tags, mask).tolist() == pytest.approx([14.1, 4.55])


@pytest.mark.parametrize("C,lengths,seed", CASES)
def test_marginals_match_brute_force(C, lengths, seed):
    crf = make_crf(C, seed)
    emissions, mask, _ = make_batch(lengths, C, seed)
    marg = crf.marginals(emissions, mask)
    assert marg.shape == emissions.shape
    assert torch.allclose(marg.sum(-1), mask.double())  # 1 at real tokens, 0 at padding
    assert (marg[~mask] == 0).all()
    for b, L in enumerate(lengths):
        *_, expected = brute_force(crf, emissions[b, :L])
        assert torch.allclose(marg[b, :L], expected, atol=1e-9)


@pytest.mark.parametrize("C,lengths,seed", CASES)
def test_nll_is_log_z_minus_score_and_reductions(C, lengths, seed):
    crf = make_crf(C, seed)
    emissions, mask, tags = make_batch(lengths, C, seed)
    per_sentence = crf.log_partition(emissions, mask) - crf.score(emissions, tags, mask)
    assert (per_sentence > 0).all()  # a single path never has all the probability mass here
    assert torch.allclose(crf.nll(emissions, tags, mask, "none"), per_sentence)
    assert crf.nll(emissions, tags, mask).item() == pytest.approx(per_sentence.mean().item())
    assert crf.nll(emissions, tags, mask, "sum").item() == pytest.approx(per_sentence.sum().item())
    assert crf.nll(emissions, tags, mask, "token_mean").item() == pytest.approx(
        per_sentence.sum().item() / sum(lengths))
    with pytest.raises(ValueError, match="bogus"):
        crf.nll(emissions, tags, mask, "bogus")


# ----------------------------------------------------------------------------- constraints

def test_constructor_errors():
    with pytest.raises(ValueError, match="labels"):
        CRF(4, IOB2_LABELS, "IOB2")
    with pytest.raises(ValueError, match="labels"):
        CRF(5, None, "IOB2")


def test_constraint_mask_is_a_fixed_buffer():
    crf = CRF(5, IOB2_LABELS, "IOB2")
    trainable = {name for name, _ in crf.named_parameters()}
    assert trainable == {"start", "end", "transitions"}
    state = crf.state_dict()
    assert state["trans_penalty"][0, 2] == -1e4 and state["trans_penalty"][1, 2] == 0
    assert state["start_penalty"].tolist() == [0, 0, -1e4, 0, -1e4]


@pytest.mark.parametrize("seed", range(5))
def test_constrained_decode_is_always_valid_iob2(seed):
    C = len(IOB2_LABELS)
    crf = make_crf(C, seed, IOB2_LABELS, "IOB2")
    lengths = [1, 2, 5, 8, 8, 3]
    emissions, mask, _ = make_batch(lengths, C, seed)
    # push the I- tags far above everything else: an unconstrained CRF would emit them
    emissions[..., 2] += 30.0
    emissions[..., 4] += 25.0
    unconstrained = CRF(C).double()
    with torch.no_grad():
        unconstrained.load_state_dict(
            {k: v for k, v in crf.state_dict().items() if "penalty" not in k}, strict=False)
    loose, _ = unconstrained.decode(emissions, mask)
    assert not all(valid_iob2([IOB2_LABELS[i] for i in loose[b, :L].tolist()])
                   for b, L in enumerate(lengths))

    tags, _ = crf.decode(emissions, mask)
    for b, L in enumerate(lengths):
        seq = [IOB2_LABELS[i] for i in tags[b, :L].tolist()]
        assert valid_iob2(seq), seq


def test_constrained_log_partition_ignores_invalid_paths():
    """With the penalty, Z is (numerically) the sum over valid IOB2 paths only."""
    labels = ["O", "B-PER", "I-PER"]
    crf = make_crf(3, 7, labels, "IOB2")
    em = torch.randn(1, 4, 3, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    scores = [path_score(crf, em[0], p) for p in itertools.product(range(3), repeat=4)
              if valid_iob2([labels[i] for i in p])]
    expected = float(torch.logsumexp(torch.tensor(scores, dtype=torch.float64), 0))
    assert crf.log_partition(em, mask).item() == pytest.approx(expected, abs=1e-9)


# ----------------------------------------------------------------------------- training & padding

def test_gradients_flow():
    torch.manual_seed(0)
    crf = CRF(5, IOB2_LABELS, "IOB2")
    lengths = [4, 2, 3]
    emissions, mask, tags = make_batch(lengths, 5, 0)
    emissions = emissions.float().requires_grad_(True)
    for reduction in ("mean", "sum", "token_mean"):
        crf.zero_grad()
        emissions.grad = None
        loss = crf.nll(emissions, tags, mask, reduction)
        loss.backward()
        assert torch.isfinite(loss)
        for name, p in crf.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
            assert p.grad.abs().sum() > 0, name
        assert torch.isfinite(emissions.grad).all()
        assert (emissions.grad[~mask] == 0).all()  # padding must not influence the loss
        assert emissions.grad[mask].abs().sum() > 0


def test_padding_does_not_change_results():
    C = 4
    crf = make_crf(C, 11)
    lengths = [3, 6, 1, 4]
    emissions, mask, tags = make_batch(lengths, C, 11)
    # garbage in the padding must be ignored
    emissions = emissions.masked_fill(~mask.unsqueeze(2), 1e3)

    batch_z = crf.log_partition(emissions, mask)
    batch_score = crf.score(emissions, tags, mask)
    batch_tags, batch_best = crf.decode(emissions, mask)
    batch_marg = crf.marginals(emissions, mask)
    for b, L in enumerate(lengths):
        em = emissions[b:b + 1, :L]
        m = torch.ones(1, L, dtype=torch.bool)
        assert crf.log_partition(em, m).item() == pytest.approx(batch_z[b].item(), abs=1e-9)
        assert crf.score(em, tags[b:b + 1, :L], m).item() == pytest.approx(batch_score[b].item(), abs=1e-9)
        alone_tags, alone_best = crf.decode(em, m)
        assert alone_tags[0].tolist() == batch_tags[b, :L].tolist()
        assert alone_best.item() == pytest.approx(batch_best[b].item(), abs=1e-9)
        assert torch.allclose(crf.marginals(em, m)[0], batch_marg[b, :L], atol=1e-12)


def test_rejects_bad_mask_and_shapes():
    crf = CRF(3)
    emissions = torch.randn(2, 3, 3)
    with pytest.raises(ValueError, match="mask"):
        crf.log_partition(emissions, torch.tensor([[True, True, True], [False, True, True]]))
    with pytest.raises(ValueError, match="emissions"):
        crf.log_partition(torch.randn(2, 3, 4), torch.ones(2, 3, dtype=torch.bool))


def test_long_sequence_is_numerically_stable():
    crf = CRF(5)
    emissions = torch.randn(2, 500, 5) * 20
    mask = torch.ones(2, 500, dtype=torch.bool)
    tags, _ = crf.decode(emissions, mask)
    nll = crf.nll(emissions, tags, mask)
    assert math.isfinite(nll.item()) and nll.item() >= -1e-3
    assert torch.allclose(crf.marginals(emissions, mask).sum(-1), torch.ones(2, 500), atol=1e-5)


# ----------------------------------------------------------------------------- sentence edges inside a row

def _rows_of_sentences(C: int, seed: int):
    """Two rows of several sentences each (lengths per row), their emissions/tags/mask/starts, and the
    same sentences as a batch of their own."""
    layout = [[2, 3, 1], [4, 2]]  # sentence lengths per row
    g = torch.Generator().manual_seed(seed)
    T = max(sum(r) for r in layout)
    emissions = torch.randn(len(layout), T, C, generator=g, dtype=torch.float64) * 2
    mask = torch.arange(T)[None, :] < torch.tensor([sum(r) for r in layout])[:, None]
    tags = torch.randint(0, C, (len(layout), T), generator=g).masked_fill(~mask, 0)
    starts = torch.zeros(len(layout), T, dtype=torch.bool)
    pieces = []  # (row, start, length)
    for b, row in enumerate(layout):
        offset = 0
        for n in row:
            starts[b, offset] = offset > 0
            pieces.append((b, offset, n))
            offset += n
    L = max(n for _, _, n in pieces)
    s_em = torch.zeros(len(pieces), L, C, dtype=torch.float64)
    s_tags = torch.zeros(len(pieces), L, dtype=torch.long)
    s_mask = torch.zeros(len(pieces), L, dtype=torch.bool)
    for i, (b, a, n) in enumerate(pieces):
        s_em[i, :n], s_tags[i, :n], s_mask[i, :n] = emissions[b, a:a + n], tags[b, a:a + n], True
    return emissions, tags, mask, starts, pieces, (s_em, s_tags, s_mask)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_with_sentence_starts_equal_their_sentences_one_by_one(seed):
    """log Z and gold scores add up over a row's sentences, Viterbi and marginals are those of each sentence."""
    C = len(IOB2_LABELS)
    crf = make_crf(C, seed, IOB2_LABELS, "IOB2")
    emissions, tags, mask, starts, pieces, (s_em, s_tags, s_mask) = _rows_of_sentences(C, seed)
    rows = torch.tensor([b for b, _, _ in pieces])
    per_row = lambda v: torch.zeros(emissions.shape[0], dtype=v.dtype).index_add_(0, rows, v)  # noqa: E731
    assert torch.allclose(crf.log_partition(emissions, mask, starts), per_row(crf.log_partition(s_em, s_mask)))
    assert torch.allclose(crf.score(emissions, tags, mask, starts), per_row(crf.score(s_em, s_tags, s_mask)))
    best, _ = crf.decode(emissions, mask, starts)
    s_best, _ = crf.decode(s_em, s_mask)
    marg, s_marg = crf.marginals(emissions, mask, starts), crf.marginals(s_em, s_mask)
    for i, (b, a, n) in enumerate(pieces):
        assert best[b, a:a + n].tolist() == s_best[i, :n].tolist()
        assert torch.allclose(marg[b, a:a + n], s_marg[i, :n])
    # without the starts the row is one chain: transitions cross the edges and the figures differ
    assert not torch.allclose(crf.log_partition(emissions, mask), crf.log_partition(emissions, mask, starts))


def test_no_entity_is_carried_into_a_sentence_start():
    """I- tags pushed up everywhere: a constrained row decode still opens each sentence validly."""
    C = len(IOB2_LABELS)
    crf = make_crf(C, 3, IOB2_LABELS, "IOB2")
    emissions, _, mask, starts, pieces, _ = _rows_of_sentences(C, 3)
    emissions[..., 2] += 30.0  # I-PER
    best, _ = crf.decode(emissions, mask, starts)
    for b, a, n in pieces:
        assert valid_iob2([IOB2_LABELS[i] for i in best[b, a:a + n].tolist()])
    carried, _ = crf.decode(emissions, mask)  # one chain: I-PER runs straight through every edge
    assert any(IOB2_LABELS[carried[b, a]] == "I-PER" for b, a, _ in pieces if a > 0)


def test_starts_must_be_a_bool_of_the_batch_shape():
    crf = make_crf(3, 0)
    emissions, mask, _ = make_batch([3, 2], 3, 0)
    with pytest.raises(ValueError, match="starts"):
        crf.decode(emissions, mask, torch.zeros(2, 2, dtype=torch.bool))


# ----------------------------------------------------------------------------- the batched recursion against a plain loop

def reference_log_partition(crf: CRF, emissions: torch.Tensor, mask: torch.Tensor, starts=None) -> torch.Tensor:
    """log Z per row by the textbook recursion, one row and one sentence at a time (B,): each sentence's
    alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + trans[i, j]) + e_t[j], the sentences of a row summed."""
    start, trans, end = crf._potentials()
    out = []
    for b in range(emissions.shape[0]):
        n = int(mask[b].sum())
        edges = [0] + [t for t in range(1, n) if starts is not None and starts[b, t]] + [n]
        total = 0.0
        for a, z in zip(edges, edges[1:]):
            alpha = start + emissions[b, a]
            for t in range(a + 1, z):
                alpha = torch.logsumexp(alpha.unsqueeze(1) + trans, dim=0) + emissions[b, t]
            total = total + torch.logsumexp(alpha + end, dim=0)
        out.append(total)
    return torch.stack(out)


@pytest.mark.parametrize("with_starts", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_log_partition_and_its_gradients_equal_the_plain_loop(with_starts, seed):
    """float32, as in training: the same log Z and gradients (emissions, start, end, transitions) to 1e-5,
    with garbage in the padding and, with starts, several sentences per row."""
    C = len(IOB2_LABELS)
    crf = make_crf(C, seed, IOB2_LABELS, "IOB2").float()
    lengths = [9, 4, 1, 7]
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(len(lengths), 9, C, generator=g) * 2
    mask = torch.arange(9) < torch.tensor(lengths).unsqueeze(1)  # (B,T)
    emissions = emissions.masked_fill(~mask.unsqueeze(2), 50.0).requires_grad_()
    starts = ((torch.arange(9) % 3 == 0) & (torch.arange(9) > 0)).expand(len(lengths), 9) & mask if with_starts else None
    results = []
    for log_z in (crf.log_partition, lambda *a: reference_log_partition(crf, *a)):
        crf.zero_grad()
        emissions.grad = None
        z = log_z(emissions, mask, starts)  # (B,)
        (z * torch.arange(1.0, len(lengths) + 1)).sum().backward()
        results.append((z.detach(), emissions.grad.clone(), {n: p.grad.clone() for n, p in crf.named_parameters()}))
    (z, grad, params), (ref_z, ref_grad, ref_params) = results
    torch.testing.assert_close(z, ref_z, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5)
    assert (grad[~mask] == 0).all()  # the recursion past a row's end reaches nothing
    for name in ref_params:
        torch.testing.assert_close(params[name], ref_params[name], rtol=1e-5, atol=1e-5, msg=name)
