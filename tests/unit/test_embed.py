"""The Embedder without the real model: lazy import, batching, normalisation, model lookup."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.config import Settings
from pipeline.embed import (
    BUNDLED_MODEL_ID,
    Embedder,
    normalize_rows,
    resolve_model,
)
from pipeline.errors import EmbedderError

HEAVY_MODULES = ("torch", "transformers", "sentence_transformers")


class RecordingEncoder:
    """Encodes text i to a deterministic, deliberately unnormalised vector; records batches."""

    def __init__(self, dims: int = 4) -> None:
        self.dims = dims
        self.batches: list[list[str]] = []
        self.kwargs: list[dict[str, Any]] = []
        self.max_seq_length = 128

    def get_embedding_dimension(self) -> int:
        return self.dims

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        self.batches.append(list(sentences))
        self.kwargs.append(kwargs)
        rows = []
        for text in sentences:
            seed = sum(text.encode("utf-8"))
            rows.append([(seed % 7) + 1.0, len(text) + 2.0, 3.0, (seed % 5) * 10.0][: self.dims])
        return np.asarray(rows, dtype=np.float64)


def test_importing_embed_and_cli_does_not_load_torch() -> None:
    code = (
        "import sys, pipeline.embed, pipeline.cli\n"
        f"loaded = [m for m in {HEAVY_MODULES!r} if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""


def test_embed_returns_unit_float32_rows_in_input_order() -> None:
    encoder = RecordingEncoder()
    embedder = Embedder.from_encoder(encoder, model_id="fake", batch_size=3)
    texts = ["alpha", "beta", "gamma delta", "ő és ű", ""]
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, 4)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    # Same direction as the raw encoder output, row by row.
    raw = RecordingEncoder().encode(texts)
    expected = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)


def test_embed_splits_texts_into_batches_of_the_configured_size() -> None:
    encoder = RecordingEncoder()
    embedder = Embedder.from_encoder(encoder, model_id="fake", batch_size=4)
    texts = [f"note {i}" for i in range(10)]
    embedder.embed(texts)
    assert [len(b) for b in encoder.batches] == [4, 4, 2]
    assert [t for b in encoder.batches for t in b] == texts
    # The library must neither normalise (we do) nor draw its own progress bar.
    assert all(k["normalize_embeddings"] is False for k in encoder.kwargs)
    assert all(k["show_progress_bar"] is False for k in encoder.kwargs)


def test_embed_of_nothing_is_an_empty_matrix_without_calling_the_model() -> None:
    encoder = RecordingEncoder(dims=3)
    embedder = Embedder.from_encoder(encoder, model_id="fake")
    vectors = embedder.embed([])
    assert vectors.shape == (0, 3)
    assert encoder.batches == []


def test_embed_refuses_a_bare_string() -> None:
    embedder = Embedder.from_encoder(RecordingEncoder(), model_id="fake")
    with pytest.raises(TypeError):
        embedder.embed("one text")  # type: ignore[arg-type]


def test_embedder_reports_dims_and_max_sequence_length_of_the_encoder() -> None:
    embedder = Embedder.from_encoder(RecordingEncoder(dims=3), model_id="fake")
    assert (embedder.dims, embedder.max_seq_length, embedder.model_id) == (3, 128, "fake")


def test_dims_are_probed_when_the_encoder_does_not_report_them() -> None:
    class Silent(RecordingEncoder):
        def get_embedding_dimension(self) -> int:  # some models answer None
            return None  # type: ignore[return-value]

    embedder = Embedder.from_encoder(Silent(dims=2), model_id="fake")
    assert embedder.dims == 2


def test_zero_batch_size_is_refused() -> None:
    with pytest.raises(EmbedderError):
        Embedder.from_encoder(RecordingEncoder(), model_id="fake", batch_size=0)


def test_an_encoder_failure_becomes_an_embedder_error() -> None:
    class Broken(RecordingEncoder):
        def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
            if sentences == ["boom"]:
                raise RuntimeError("CUDA out of memory")
            return super().encode(sentences, **kwargs)

    embedder = Embedder.from_encoder(Broken(), model_id="fake")
    with pytest.raises(EmbedderError, match="CUDA out of memory"):
        embedder.embed(["boom"])


def test_normalize_rows_leaves_zero_rows_at_zero() -> None:
    vectors = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    assert vectors.dtype == np.float32


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_default_model_names_resolve_to_the_bundled_folder(name: str) -> None:
    source, model_id = resolve_model(name)
    assert model_id == BUNDLED_MODEL_ID
    assert (Path(source) / "modules.json").is_file()


def test_a_model_folder_relative_to_the_vault_is_loaded_from_disk(tmp_path: Path) -> None:
    (tmp_path / "models" / "mine").mkdir(parents=True)
    source, model_id = resolve_model("models/mine", base_dir=tmp_path)
    assert source == str((tmp_path / "models" / "mine").resolve())
    assert model_id == "models/mine"


def test_other_model_names_are_passed_through() -> None:
    assert resolve_model("BAAI/bge-m3") == ("BAAI/bge-m3", "BAAI/bge-m3")


def test_an_empty_model_setting_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="embed_model"):
        resolve_model("  ")


def test_settings_default_model_is_the_bundled_one(tmp_path: Path) -> None:
    settings = Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko")
    assert resolve_model(settings.embed_model)[1] == BUNDLED_MODEL_ID


def test_lazy_embedder_knows_id_and_dims_without_loading_torch() -> None:
    code = (
        "import sys\n"
        "from pipeline.config import load_settings\n"
        "from pipeline.embed import LazyEmbedder\n"
        "e = LazyEmbedder(load_settings('.', env={}))\n"
        "print(e.model_id, e.dims, e.is_loaded, 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == [BUNDLED_MODEL_ID, "384", "False", "False"]


_DIMS = 8


def _unit(seed: str) -> np.ndarray:
    """A deterministic unit vector per string."""
    rng = np.random.default_rng(int(hashlib.sha1(seed.encode()).hexdigest()[:8], 16))
    v = rng.standard_normal(_DIMS).astype(np.float32)
    return v / np.linalg.norm(v)


class _TokenizingEncoder:
    """A sentence-transformers-like encoder: preprocess gives the attention mask."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def preprocess(self, texts: list[str]) -> dict:
        longest = max(len(t.split()) for t in texts)
        rows = [[1] * len(t.split()) + [0] * (longest - len(t.split())) for t in texts]
        return {"attention_mask": np.array(rows)}

    def encode(self, batch: list[str], **_: object) -> np.ndarray:
        self.batches.append(batch)
        return np.stack([_unit(t) for t in batch])


def test_prompts_share_a_forward_batch_only_with_prompts_of_the_same_length() -> None:
    from pipeline.embed import Embedder

    encoder = _TokenizingEncoder()
    emb = Embedder.from_encoder(encoder, model_id="fake", dims=_DIMS)
    encoder.batches.clear()
    texts = ["a b", "c", "d e", "f g h", "i"]
    from pipeline.embed import embed_prompts

    vectors, batches = embed_prompts(emb, texts)
    assert batches == 3
    assert sorted(sorted(b) for b in encoder.batches) == [["a b", "d e"], ["c", "i"], ["f g h"]]
    assert np.array_equal(vectors, np.stack([emb.embed([t])[0] for t in texts]))
