from __future__ import annotations

import pytest

from tagger.data.vocab import PAD, UNK, UNK_ID, Vocab


def test_build_from_train_with_min_freq_and_normalisation(tmp_path):
    sents = [["The", "cat", "sat", "in", "1999"], ["the", "cat", "ran", "in", "2004"]]
    v = Vocab.build(sents, ["DET", "NOUN"], "pos", min_freq=2, lowercase=True, normalize_digits=True)
    assert v.words[:2] == [PAD, UNK]
    assert set(v.words[2:]) == {"the", "cat", "in", "0000"}  # "sat"/"ran" seen once: below min_freq
    assert v.word_id("THE") == v.word_id("the") != UNK_ID
    assert v.word_id("1234") == v.word_id("1999")
    assert v.word_id("sat") == UNK_ID and v.is_unseen("sat") and not v.is_unseen("Cat")
    assert "T" in v.chars and "t" in v.chars  # characters keep case for the char CNN
    assert dict(zip(v.words, v.counts)) == {PAD: 0, UNK: 0, "the": 2, "cat": 2, "in": 2, "0000": 2}
    v.save(tmp_path / "v.json")
    loaded = Vocab.load(tmp_path / "v.json")
    assert loaded == v and loaded.word_id("cat") == v.word_id("cat")


def test_without_lowercasing_case_is_kept():
    v = Vocab.build([["The", "the"]], ["X"], "pos")
    assert v.word_id("The") != v.word_id("the")


def test_bad_min_freq_and_corrupt_vocab_are_refused():
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.build([["a"]], ["X"], "pos", min_freq=0)
    with pytest.raises(ValueError, match="must start with"):
        Vocab(["a", "b"], [PAD, UNK], ["X"])
    with pytest.raises(ValueError, match="counts has 2 entries for 3 words"):
        Vocab([PAD, UNK, "a"], [PAD, UNK], ["X"], counts=[0, 0])


def test_a_vocab_saved_before_counts_still_loads(tmp_path):
    v = Vocab.build([["a", "b", "a"]], ["X"], "pos")
    old = v.to_dict()
    del old["counts"]
    loaded = Vocab.from_dict(old)
    assert loaded.counts is None and loaded.word_id("a") == v.word_id("a")


def test_case_fallback_maps_an_unseen_casing_to_the_most_frequent_seen_one():
    sents = [["Kennedy", "said", "Studying", "studying", "studying", "US", "us", "us"]]
    plain = Vocab.build(sents, ["X"], "pos")
    v = Vocab.build(sents, ["X"], "pos", case_fallback=True)
    assert plain.word_id("KENNEDY") == UNK_ID and plain.is_unseen("KENNEDY")
    assert v.word_id("KENNEDY") == v.word_id("kennedy") == v.word_id("Kennedy") != UNK_ID
    assert not v.is_unseen("KENNEDY") and v.is_unseen("Nixon") and v.word_id("Nixon") == UNK_ID
    assert v.word_id("STUDYING") == v.word_id("studying") != v.word_id("Studying")  # 2 x "studying" > 1 x "Studying"
    assert v.word_id("Us") == v.word_id("us") and v.word_id("US") != v.word_id("us")  # exact casing first
    assert Vocab.from_dict(v.to_dict()).word_id("KENNEDY") == v.word_id("Kennedy")  # saved with the model


def test_to_dict_holds_the_saved_fields_as_asdict_gives_them_and_does_not_alias_the_vocab():
    from dataclasses import asdict

    v = Vocab.build([["The", "cat", "sat"], ["the", "Cat"]], ["X"], "pos", lowercase=True, case_fallback=True)
    d = v.to_dict()
    assert d == {k: x for k, x in asdict(v).items() if not k.startswith("_")}
    assert list(d) == [k for k in asdict(v) if not k.startswith("_")]  # same keys in the same order
    d["words"].append("dog")
    d["counts"][0] = 7
    assert "dog" not in v.words and v.counts[0] == 0
    assert Vocab.from_dict(v.to_dict()) == v
