"""The Embedder with the real bundled all-MiniLM-L6-v2 (loaded once per test session)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.config import Settings
from pipeline.embed import BUNDLED_MODEL_ID, Embedder, PreparedEmbedder, get_embedder
from pipeline.errors import EmbedderError

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real default model in torch (the prepared model's tests are in
    test_embed_prepared.py); get_embedder's process cache makes it one load per session."""
    root = tmp_path_factory.mktemp("vault")
    embedder = get_embedder(
        Settings(vault=root, state_dir=root / ".vault-ko", embed_runtime="torch")
    )
    assert isinstance(embedder, Embedder)
    return embedder


def test_bundled_model_reports_its_id_dims_and_sequence_length(minilm: Embedder) -> None:
    assert minilm.model_id == BUNDLED_MODEL_ID
    assert minilm.dims == 384
    assert minilm.max_seq_length == 256


def test_vectors_are_unit_float32_and_rank_by_meaning(minilm: Embedder) -> None:
    texts = [
        "How do I fail over the Redis primary?",
        "Runbook: promoting a Redis replica when the primary dies",
        "Quarterly cloud budget review for the finance team",
    ]
    vectors = minilm.embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    related, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert related > unrelated + 0.2


def test_batch_size_does_not_change_the_vectors(minilm: Embedder) -> None:
    texts = [f"note {i} about {'caching' if i % 2 else 'billing'}" for i in range(7)]
    small = Embedder.from_encoder(minilm._encoder, model_id=minilm.model_id, batch_size=2)
    np.testing.assert_allclose(small.embed(texts), minilm.embed(texts), atol=1e-5)


def test_text_past_the_max_sequence_length_is_truncated(minilm: Embedder) -> None:
    head = " ".join(f"paragraph{i} about the gateway routing table" for i in range(80))
    a, b = minilm.embed([head + " tail about Kafka", head + " a wholly different tail"])
    np.testing.assert_allclose(a, b, atol=1e-6)  # only the head counts
    short_a, short_b = minilm.embed(["gateway tail about Kafka", "gateway a different tail"])
    assert float(short_a @ short_b) < 0.999


def test_get_embedder_shares_one_loaded_model(minilm: Embedder, tmp_path: Path) -> None:
    settings = Settings(
        vault=tmp_path, state_dir=tmp_path / ".vault-ko", embed_batch_size=4, embed_runtime="torch"
    )
    other = get_embedder(settings)
    assert isinstance(other, Embedder)
    assert other._encoder is minilm._encoder
    assert other.batch_size == 4
    prepared = get_embedder(settings.replace(embed_runtime="auto"))
    again = get_embedder(settings.replace(embed_runtime="auto", embed_batch_size=8))
    assert isinstance(prepared, PreparedEmbedder) and isinstance(again, PreparedEmbedder)
    assert prepared._model is again._model and again.batch_size == 8


def test_a_model_not_available_offline_is_one_clear_error() -> None:
    with pytest.raises(EmbedderError) as info:
        Embedder("vault-ko-tests/no-such-model")
    message = str(info.value)
    assert "\n" not in message
    assert "vault-ko-tests/no-such-model" in message
    assert "embed_model" in message


QUESTIONS = (
    "why did we choose redis for the warm cache?",
    "Gyorsítótár kulcsok verziózása — miért?",
    'a_b 50% "quoted" back\\\\slash',
    "word " * 400,  # truncated at 256 tokens
    "🙂",
)


@pytest.fixture(scope="session")
def minilm_torch(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real default model with the transformer in torch (setting embed_runtime)."""
    root = tmp_path_factory.mktemp("vault")
    return get_embedder(Settings(vault=root, state_dir=root / ".vault-ko", embed_runtime="torch"))


def test_a_single_question_in_torch_is_embedded_bit_for_bit_as_encode_embeds_it(
    minilm_torch: Embedder,
) -> None:
    minilm = minilm_torch
    assert minilm.runtime == "torch"
    encoder = minilm._encoder
    for question in QUESTIONS:
        got = minilm.embed([question])
        raw = np.asarray(
            encoder.encode([question], convert_to_numpy=True, show_progress_bar=False),
            dtype=np.float32,
        )
        expected = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        assert np.array_equal(got, expected.astype(np.float32)), question[:40]
    assert callable(minilm._forward_one)  # the checked single-text forward answered them


def test_a_model_whose_encode_adds_a_prompt_keeps_encode(tmp_path: Path) -> None:
    """A default prompt changes what encode() embeds: the single-text forward, which does
    not add it, fails its check and is never used."""
    embedder = Embedder(batch_size=8, runtime="torch")
    encoder = embedder._encoder
    encoder.prompts = {"query": "query: "}
    encoder.default_prompt_name = "query"
    got = embedder.embed([QUESTIONS[0]])
    assert embedder._forward_one is None
    again = embedder.embed([QUESTIONS[0]])
    raw = np.asarray(encoder.encode([QUESTIONS[0]], show_progress_bar=False), dtype=np.float32)
    assert np.array_equal(got, again)
    assert np.array_equal(got, raw / np.linalg.norm(raw, axis=1, keepdims=True))
