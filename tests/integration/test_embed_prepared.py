"""The query-time embedder (ONNX Runtime, tokenizers, numpy; no torch) against the real
bundled model: encode()'s vectors, batch invariance, a manifest trusted only while every
hash matches, models it cannot reproduce left to torch, and two first runs at once."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import embed, embed_prepared
from pipeline.config import Settings
from pipeline.embed import (
    Embedder,
    PreparedEmbedder,
    embed_prompts,
    get_embedder,
    resolve_model,
)
from pipeline.embed_prepared import MANIFEST, ONNX_FILE, NotPrepared, plan_for
from pipeline.errors import EmbedderError

pytestmark = [pytest.mark.model]

QUESTIONS = (
    "why did we choose redis for the warm cache",
    "pgbouncer transaction mode pooling",
    "  Miért választottuk a Redis-t a meleg gyorsítótárhoz?  ",
    "Kafka consumer group rebalancing stalls when a broker restarts " * 40,  # truncated
    "ünïcödé — 漢字 🙂",
    "x",
)


@pytest.fixture(scope="module")
def bundled() -> Path:
    source, _ = resolve_model("all-MiniLM-L6-v2")
    return Path(source)


@pytest.fixture(scope="module")
def torch_model() -> Embedder:
    return Embedder(runtime="torch")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prepared-cache")


@pytest.fixture(scope="module")
def prepared(bundled: Path, torch_model: Embedder, cache: Path) -> embed_prepared.PreparedModel:
    plan = plan_for(bundled)
    assert isinstance(plan, embed_prepared.Plan)
    return embed_prepared.prepare(torch_model._encoder, bundled, plan, root=cache)


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty user cache, and no model remembered by this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(embed, "_PREPARED", {})
    return tmp_path / "xdg" / "vault-ko" / "onnx"


def model_copy(bundled: Path, dest: Path) -> Path:
    shutil.copytree(bundled, dest)
    return dest


def settings_for(tmp_path: Path, model: str = "all-MiniLM-L6-v2", **kw: Any) -> Settings:
    return Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko", embed_model=model, **kw)


# -- the same vectors ---------------------------------------------------------------------------


def test_its_vectors_equal_encode_to_1e_5(
    prepared: embed_prepared.PreparedModel, torch_model: Embedder
) -> None:
    texts = [*QUESTIONS, *embed_prepared.agreement_texts()]
    ours = PreparedEmbedder(prepared, model_id="m").embed(texts)
    theirs = torch_model.embed(texts)
    assert float(np.max(np.abs(ours - theirs))) <= 1e-5


def test_the_manifest_records_the_agreement_measured_at_preparation(
    prepared: embed_prepared.PreparedModel,
) -> None:
    agreement = prepared.manifest["agreement"]
    assert agreement["texts"] >= 50
    assert agreement["truncated_texts"] >= 3 and agreement["non_ascii_texts"] >= 10
    assert 0 <= agreement["max_difference"] <= 1e-5
    assert agreement["batch_equals_single"] is True
    assert any("ő" in t or "á" in t for t in embed_prepared.agreement_texts())
    assert set(prepared.manifest["model_files"]) >= {"model.safetensors", "tokenizer.json"}
    for name in ("onnxruntime", "tokenizers", "torch", "transformers", "sentence-transformers"):
        assert prepared.manifest["versions"][name]


def test_a_question_alone_and_in_a_padded_batch_give_the_same_vector(
    prepared: embed_prepared.PreparedModel,
) -> None:
    model = PreparedEmbedder(prepared, model_id="m")
    singles = np.stack([model.embed_one(q) for q in QUESTIONS])
    assert np.array_equal(model.embed(list(QUESTIONS)), singles)
    grouped, _ = embed_prompts(model, list(QUESTIONS))
    assert np.array_equal(grouped, singles)


def test_token_counts_are_the_models_own(
    prepared: embed_prepared.PreparedModel, torch_model: Embedder
) -> None:
    model = PreparedEmbedder(prepared, model_id="m")
    assert model.token_lengths(list(QUESTIONS)) == torch_model.token_lengths(list(QUESTIONS))
    assert max(model.token_lengths(list(QUESTIONS))) == 256


# -- trusting the manifest ------------------------------------------------------------------------


def test_an_edited_model_folder_is_not_trusted_and_is_prepared_again(
    bundled: Path, fresh_cache: Path, tmp_path: Path
) -> None:
    folder = model_copy(bundled, tmp_path / "model")
    settings = settings_for(tmp_path, model=str(folder))
    first = get_embedder(settings)
    assert isinstance(first, PreparedEmbedder)
    manifest = json.loads((first.prepared_dir / MANIFEST).read_text())
    plan = plan_for(folder)
    assert isinstance(plan, embed_prepared.Plan)

    config = folder / "config_sentence_transformers.json"
    config.write_text(config.read_text() + "\n")  # same model, other bytes
    with pytest.raises(NotPrepared, match="model folder's files changed"):
        embed_prepared.open_prepared(folder, plan)

    embed._PREPARED.clear()
    second = get_embedder(settings)
    assert isinstance(second, PreparedEmbedder)
    rebuilt = json.loads((second.prepared_dir / MANIFEST).read_text())
    key = "config_sentence_transformers.json"
    assert rebuilt["model_files"][key] != manifest["model_files"][key]
    assert (
        rebuilt["model_files"]["model.safetensors"] == manifest["model_files"]["model.safetensors"]
    )
    staging = [p.name for p in fresh_cache.iterdir() if ".prepared." in p.name]
    assert [n for n in staging if not n.endswith(".lock")] == []


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_onnx_file_is_never_used(
    bundled: Path,
    fresh_cache: Path,
    tmp_path: Path,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = settings_for(tmp_path)
    model = get_embedder(settings)
    assert isinstance(model, PreparedEmbedder)
    onnx = model.prepared_dir / ONNX_FILE
    data = bytearray(onnx.read_bytes())
    if damage == "truncate":
        onnx.write_bytes(data[: len(data) // 2])
        reason = "model.onnx is missing or incomplete"
    else:
        data[len(data) // 2] ^= 0x40  # one bit in the weights, same size
        onnx.write_bytes(bytes(data))
        reason = "model.onnx is corrupt"
    plan = plan_for(bundled)
    assert isinstance(plan, embed_prepared.Plan)
    with pytest.raises(NotPrepared, match=reason):
        embed_prepared.open_prepared(bundled, plan)

    # A process that must not load torch (the hook) gets one error saying why ...
    embed._PREPARED.clear()
    with pytest.raises(EmbedderError, match=reason):
        get_embedder(settings, torch_allowed=False)

    # ... and one that may prepares it again; should that fail, torch embeds, said once.
    embed._PREPARED.clear()
    rebuilt = get_embedder(settings)
    assert isinstance(rebuilt, PreparedEmbedder)
    assert (rebuilt.prepared_dir / ONNX_FILE).stat().st_size == len(data)

    onnx.write_bytes(bytes(data[:1000]))
    embed._PREPARED.clear()

    def failing_export(*args: object, **kwargs: object) -> None:
        raise RuntimeError("export failed in this test")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("pipeline.embed_onnx._export", failing_export)
        with caplog.at_level(logging.INFO, logger="pipeline.embed"):
            fallback = get_embedder(settings)
    assert isinstance(fallback, Embedder)
    assert "embedding in torch, not the query-time model: preparing it failed" in caplog.text


# -- models it cannot reproduce ------------------------------------------------------------------


def test_a_model_with_a_default_prompt_keeps_torch_and_says_why(
    bundled: Path, fresh_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = model_copy(bundled, tmp_path / "prompted")
    config = folder / "config_sentence_transformers.json"
    data = json.loads(config.read_text())
    data.update(prompts={"query": "query: "}, default_prompt_name="query")
    config.write_text(json.dumps(data))
    with caplog.at_level(logging.INFO, logger="pipeline.embed"):
        model = get_embedder(settings_for(tmp_path, model=str(folder)))
    assert isinstance(model, Embedder)
    lines = [r.getMessage() for r in caplog.records if "not the query-time model" in r.getMessage()]
    assert lines == [
        "embedding in torch, not the query-time model: the model adds a default prompt ('query')"
    ]
    assert not fresh_cache.exists() or not any(fresh_cache.glob("*.prepared"))


def test_unknown_modules_and_pooling_modes_are_named_without_torch(
    bundled: Path, tmp_path: Path
) -> None:
    folder = model_copy(bundled, tmp_path / "dense")
    modules = json.loads((folder / "modules.json").read_text())
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (folder / "modules.json").write_text(json.dumps([*modules, dense]))
    assert (
        plan_for(folder) == "module 3 (sentence_transformers.models.Dense) is not one it reproduces"
    )

    (folder / "modules.json").write_text(json.dumps(modules))
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(
        json.dumps({"word_embedding_dimension": 384, "pooling_mode": "weightedmean"})
    )
    assert plan_for(folder) == "pooling mode 'weightedmean' is not one it reproduces"

    pooling.write_text(json.dumps({"embedding_dimension": 384, "pooling_mode": ["cls", "max"]}))
    plan = plan_for(folder)
    assert isinstance(plan, embed_prepared.Plan) and plan.pooling == ("cls", "max")

    (folder / "tokenizer.json").unlink()
    assert plan_for(folder) == "the transformer has no tokenizer.json (no fast tokenizer)"


def test_without_torch_allowed_an_unprepared_model_is_one_clear_error(
    fresh_cache: Path, tmp_path: Path
) -> None:
    with pytest.raises(EmbedderError, match=r"not prepared \(run `vault-ko model prepare`"):
        get_embedder(settings_for(tmp_path), torch_allowed=False)
    assert not fresh_cache.exists() or not any(fresh_cache.glob("*.prepared"))


# -- two first runs at once --------------------------------------------------------------------


PREPARE = """
import json, sys
from pathlib import Path
from pipeline.config import Settings
from pipeline.embed import get_embedder
s = Settings(vault=Path(sys.argv[1]), state_dir=Path(sys.argv[1]) / ".vault-ko")
e = get_embedder(s)
v = e.embed(["why did we choose redis for the warm cache?"])[0]
print(json.dumps({"runtime": e.runtime, "dir": str(e.prepared_dir), "v": [float(x) for x in v]}))
"""


def test_two_first_runs_at_once_both_get_one_good_prepared_model(
    tmp_path: Path, torch_model: Embedder
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PREPARE, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert [r["runtime"] for r in results] == ["onnx", "onnx"]
    assert results[0]["dir"] == results[1]["dir"]
    expected = torch_model.embed_one("why did we choose redis for the warm cache?")
    for r in results:
        assert float(np.max(np.abs(np.asarray(r["v"]) - expected))) <= 1e-5
    root = tmp_path / "xdg" / "vault-ko" / "onnx"
    leftovers = sorted(p.name for p in root.iterdir() if not p.name.endswith((".lock", ".onnx")))
    assert leftovers == [Path(results[0]["dir"]).name]
    bundled_dir, _ = resolve_model("all-MiniLM-L6-v2")
    plan = plan_for(Path(bundled_dir))
    assert isinstance(plan, embed_prepared.Plan)
    embed_prepared.open_prepared(Path(bundled_dir), plan, root=root)  # trusted as written
