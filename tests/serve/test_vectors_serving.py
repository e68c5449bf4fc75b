"""A model trained with pretrained vectors, served: a word that only the vectors know reaches the model through its
vector over /tag, as it does through tagger.load."""
from __future__ import annotations

import pytest

from tagger.inference.backends import DEFAULT_BACKEND
from tests.conftest import train_tiny
from tests.serve.conftest import package_into, start, stop, wait_ready
from tests.data.test_vectors import DIM, write_vectors

# "zebra" is in the vectors file and never in the tiny corpora; "okapi" is in neither
KNOWN_BY_VECTORS = ["the", "zebra", "sees", "a", "cat"]
UNKNOWN = ["the", "okapi", "sees", "a", "cat"]


@pytest.fixture(scope="module")
def vectors_server(tmp_path_factory, tiny_data):
    tmp = tmp_path_factory.mktemp("vectors_serving")
    vec = write_vectors(tmp / "v.txt")
    run = train_tiny(tmp / "run", tiny_data, [f"embedder.vectors={vec}", f"embedder.word_dim={DIM}",
                                              "model=self_attention", "model.d_model=32", "model.heads=2",
                                              "model.ffn_dim=32", "trainer.max_epochs=6"])
    home = tmp / "bentoml"
    tag = package_into(home, run, "tagger-vectors")
    server = start(home, "tagger-vectors:latest", "vectors", backend=DEFAULT_BACKEND)  # as the service runs by default
    try:
        wait_ready(server)
        server.model = tag
        yield server, run
    finally:
        stop(server)


def test_a_word_only_the_vectors_know_is_tagged_through_its_vector(vectors_server):
    import tagger

    server, run = vectors_server
    nlp = tagger.load(run, backend=DEFAULT_BACKEND)
    assert nlp.vocab.is_unseen("zebra") and nlp.vocab.word_id("zebra") > 1  # a vector row, not UNK
    assert nlp.vocab.word_id("okapi") == 1
    response = server.post("/tag", json={"sentences": [KNOWN_BY_VECTORS, UNKNOWN]})
    assert response.status_code == 200, response.text
    zebra, okapi = ([t["score"] for t in s["tokens"]] for s in response.json()["results"])
    # through UNK, both sentences would be the same input and get the same scores
    assert zebra != pytest.approx(okapi, abs=1e-4)
    local = nlp.tag_sentences([KNOWN_BY_VECTORS, UNKNOWN])  # one batch of the two, as the service ran them
    assert zebra == pytest.approx(local[0].scores, abs=1e-4)
    assert okapi == pytest.approx(local[1].scores, abs=1e-4)
    assert [t["tag"] for t in response.json()["results"][0]["tokens"]] == local[0].tags
