"""The bundled model's transformer in ONNX Runtime: the same vectors, checked before use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import embed_onnx
from pipeline.config import Settings
from pipeline.embed import Embedder, embed_prompts, get_embedder, onnx_runtime, resolve_model
from pipeline.errors import ConfigError, EmbedderError

pytestmark = [pytest.mark.model]

QUESTIONS = (
    "why did we choose redis for the warm cache",
    "pgbouncer transaction mode pooling",
    "who owns the billing service",
    "who owns the payments service",
    "Kafka consumer group rebalancing stalls when a broker restarts during a partition move "
    * 30,  # past the 256-token limit: truncated alike in both runtimes
    "ünïcödé — 漢字 🙂",
)


@pytest.fixture(scope="module")
def torch_model() -> Embedder:
    return Embedder(runtime="torch")


@pytest.fixture(scope="module")
def onnx_model(torch_model: Embedder) -> Embedder:
    source, model_id = resolve_model("all-MiniLM-L6-v2")
    onnx = onnx_runtime(torch_model._encoder, source, "onnx", device="cpu", name="test")
    return Embedder.from_encoder(torch_model._encoder, model_id=model_id, onnx=onnx)


def test_the_default_runtime_is_onnx_when_it_is_installed(tmp_path: Path) -> None:
    embedder = get_embedder(Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko"))
    assert embedder.runtime == "onnx"


def test_onnx_vectors_equal_torch_vectors_to_float_rounding(
    torch_model: Embedder, onnx_model: Embedder
) -> None:
    assert onnx_model.runtime == "onnx"
    for question in QUESTIONS:
        ours = onnx_model.embed_one(question)
        theirs = torch_model.embed_one(question)
        assert float(np.max(np.abs(ours - theirs))) < 1e-6, question[:40]
        assert float(ours @ theirs) > 0.999999


def test_onnx_batches_equal_single_questions_bit_for_bit(onnx_model: Embedder) -> None:
    """load-context embeds prompts in batches of one token length; a batch must answer
    exactly as single questions do, and padded batches do here too."""
    singles = np.stack([onnx_model.embed_one(q) for q in QUESTIONS])
    grouped, _ = embed_prompts(onnx_model, list(QUESTIONS))
    assert np.array_equal(grouped, singles)
    assert np.array_equal(onnx_model.embed(list(QUESTIONS)), singles)


def test_a_model_whose_onnx_vectors_differ_stays_in_torch(
    torch_model: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose encode() adds a prompt embeds other text than the ONNX path: the check
    against encode() catches it; ``auto`` keeps torch, ``onnx`` refuses."""
    source, _ = resolve_model("all-MiniLM-L6-v2")
    encoder = torch_model._encoder
    monkeypatch.setattr(encoder, "prompts", {"query": "query: "})
    monkeypatch.setattr(encoder, "default_prompt_name", "query")
    assert onnx_runtime(encoder, source, "auto", device="cpu", name="m") is None
    with pytest.raises(EmbedderError, match="differ from torch's"):
        onnx_runtime(encoder, source, "onnx", device="cpu", name="m")


def test_without_onnxruntime_auto_keeps_torch_and_onnx_is_one_clear_error(
    torch_model: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = resolve_model("all-MiniLM-L6-v2")
    monkeypatch.setattr(embed_onnx, "available", lambda: False)
    encoder = torch_model._encoder
    assert onnx_runtime(encoder, source, "auto", device="cpu", name="m") is None
    with pytest.raises(EmbedderError, match="pip install onnxruntime onnx"):
        onnx_runtime(encoder, source, "onnx", device="cpu", name="m")


def test_a_model_that_is_not_a_local_folder_keeps_torch(torch_model: Embedder) -> None:
    encoder = torch_model._encoder
    assert onnx_runtime(encoder, "BAAI/bge-m3", "auto", device="cpu", name="m") is None
    assert onnx_runtime(encoder, "x", "auto", device="cuda", name="m") is None
    with pytest.raises(EmbedderError, match="CPU only"):
        onnx_runtime(encoder, "x", "onnx", device="cuda", name="m")


def test_an_unknown_runtime_setting_is_a_config_error(tmp_path: Path) -> None:
    settings = Settings(vault=tmp_path, state_dir=tmp_path / "s", embed_runtime="tensorrt")
    with pytest.raises(ConfigError, match="embed_runtime"):
        get_embedder(settings)


def test_the_export_is_written_once_and_reused(
    torch_model: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source, _ = resolve_model("all-MiniLM-L6-v2")
    encoder = torch_model._encoder
    first = embed_onnx.load(encoder, source)
    assert first is not None and first.path.parent == tmp_path / "vault-ko" / "onnx"
    assert [p.name for p in first.path.parent.iterdir()] == [first.path.name]

    def no_export(*_args: Any) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(embed_onnx, "_export", no_export)
    again = embed_onnx.load(encoder, source)
    assert again is not None and again.path == first.path
    assert np.array_equal(again(["warm cache"]), first(["warm cache"]))


def test_a_failed_export_leaves_no_file_and_auto_keeps_torch(
    torch_model: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source, _ = resolve_model("all-MiniLM-L6-v2")
    import torch

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("Exporting the operator 'aten::scaled_dot_product' is not supported")

    monkeypatch.setattr(torch.onnx, "export", broken)
    encoder = torch_model._encoder
    assert onnx_runtime(encoder, source, "auto", device="cpu", name="m") is None
    with pytest.raises(EmbedderError, match="export or run failed: Exporting the operator"):
        onnx_runtime(encoder, source, "onnx", device="cpu", name="m")
    assert list((tmp_path / "vault-ko" / "onnx").iterdir()) == []


def test_the_session_follows_torch_thread_count(onnx_model: Embedder) -> None:
    """The service sets one torch thread after loading: ONNX Runtime follows it."""
    import torch

    runtime = onnx_model._onnx
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        onnx_model.embed_one(QUESTIONS[0])
        assert runtime._threads == 1
    finally:
        torch.set_num_threads(before)


def test_checking_for_onnx_runtime_does_not_import_the_exporter() -> None:
    """Importing ``onnx`` costs a cold query about a second; only an export needs it."""
    import subprocess
    import sys

    code = (
        "import sys; from pipeline import embed_onnx; "
        "assert embed_onnx.available(); print('onnx' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"
