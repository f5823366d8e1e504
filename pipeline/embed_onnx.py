"""ONNX Runtime for a sentence-transformers model's transformer, torch for the rest.

One question on one CPU thread is about twice as fast through ONNX Runtime as through
torch, with the same vectors to float rounding; notes in batches cost the same in both
(bench/onnx_forward.py; figures in docs/benchmarks-history.md). The service answers on
one thread, so the forward was most of a warm answer.

The model's first module (a Hugging Face transformer) is exported once from the local
weights with ``torch.onnx.export`` into the user's cache (``$XDG_CACHE_HOME/vault-ko/onnx``,
else ``~/.cache/...``), under a key of the model folder's files and the library versions,
written to a temporary name and renamed, so concurrent first runs never see half a file.
Its later modules (pooling, normalisation, dense layers) run in torch as the model defines
them. ``OnnxTransformer.check`` compares its vectors with ``encode()``'s before anyone uses
it; the Embedder keeps torch when they differ, when ONNX Runtime is missing, or when the
export fails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: The tokenizer outputs a BERT-family transformer takes, in the exported model's order.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17
#: Largest difference from encode()'s unit vectors that still counts as the same model
#: (float32 rounding in another kernel order is ~1e-7).
MAX_DIFFERENCE = 1e-5
#: Texts of several lengths (one padded batch) for the check against encode().
CHECK_TEXTS = (
    "dimension probe",
    "How do we invalidate the warm cache after a deploy?",
    "Kafka consumer group rebalancing stalls when a broker restarts during a partition move",
)

_EXPORT_LOCK = threading.Lock()


def cache_root(env: dict[str, str] | None = None) -> Path:
    """Where exported models are kept: ``$XDG_CACHE_HOME/vault-ko/onnx`` (else ~/.cache)."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vault-ko" / "onnx"


def available() -> bool:
    """Whether ONNX Runtime imports and the exporter's ``onnx`` package is installed (found,
    not imported: importing it costs a cold query about a second, and only an export
    needs it)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return importlib.util.find_spec("onnx") is not None


class OnnxTransformer:
    """texts -> unnormalised sentence embeddings, the transformer in ONNX Runtime.

    The session is made on first use with the thread count torch has then (the service
    sets one thread after loading), and made anew after ``set_threads``.
    """

    def __init__(self, encoder: Any, path: Path, inputs: Sequence[str]) -> None:
        self._encoder = encoder
        self._later = list(encoder)[1:]
        self._inputs = tuple(inputs)
        self.path = path
        self._session: Any = None
        self._threads = 0

    def _session_now(self) -> Any:
        import torch

        threads = max(1, torch.get_num_threads())
        if self._session is None or threads != self._threads:
            self._session = cpu_session(self.path, threads)
            self._threads = threads
        return self._session

    def __call__(self, texts: list[str]) -> np.ndarray:
        import torch

        features = _tokenize(self._encoder, texts)
        feed = {n: np.ascontiguousarray(features[n].numpy(), dtype=np.int64) for n in self._inputs}
        hidden = self._session_now().run(None, feed)[0]
        features["token_embeddings"] = torch.from_numpy(hidden)
        with torch.inference_mode():
            for module in self._later:
                features = module(features)
        return features["sentence_embedding"].float().numpy()

    def check(self, expected: np.ndarray, texts: Sequence[str] = CHECK_TEXTS) -> float:
        """Largest absolute difference between this runtime's unit vectors of ``texts`` and
        ``expected`` (encode()'s vectors of the same texts, not normalised)."""
        ours = _unit(self(list(texts)))
        theirs = _unit(np.asarray(expected, dtype=np.float32))
        if ours.shape != theirs.shape:
            return float("inf")
        return float(np.max(np.abs(ours - theirs)))


def cpu_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session of ``path`` on the CPU with ``threads`` threads per call (0:
    ONNX Runtime's default, one per physical core)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # warnings about unused initialisers are noise
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load(encoder: Any, source: str) -> OnnxTransformer | None:
    """The ONNX runtime of this loaded encoder (``source``: the folder it was loaded from),
    exported now if the cache lacks it; None when the model is not one it can export (not
    a local folder, not a plain transformer first module). Raises what the export raises."""
    folder = Path(source)
    first = _first_transformer(encoder)
    if first is None or not folder.is_dir():
        return None
    probe = _tokenize(encoder, ["probe"])
    inputs = [n for n in INPUT_NAMES if n in probe]
    if inputs[:2] != ["input_ids", "attention_mask"]:
        return None
    path = cache_root() / f"{_cache_key(folder, inputs)}.onnx"
    with _EXPORT_LOCK:
        if not path.is_file():
            _export(first, probe, inputs, path)
    return OnnxTransformer(encoder, path, inputs)


def _first_transformer(encoder: Any) -> Any:
    """The Hugging Face model inside the encoder's first module, or None."""
    try:
        first = next(iter(encoder), None)
    except TypeError:  # not a module list: a wrapped or fake encoder
        return None
    model = getattr(first, "auto_model", None)
    return model if model is not None and hasattr(model, "forward") else None


def _tokenize(encoder: Any, texts: list[str]) -> dict[str, Any]:
    # sentence-transformers 6 renamed tokenize to preprocess.
    prepare = getattr(encoder, "preprocess", None) or encoder.tokenize
    return dict(prepare(texts))


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _cache_key(folder: Path, inputs: Sequence[str]) -> str:
    """The model folder's files (name, size, mtime) and the versions the export depends on
    (torch's exporter writes the file; the onnx package's version is not read, since
    importing it is too slow for a cold query)."""
    import sentence_transformers
    import torch
    import transformers

    files = sorted(
        (str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    )
    identity = {
        "folder": str(folder.resolve()),
        "files": files,
        "inputs": list(inputs),
        "opset": OPSET,
        "versions": [
            torch.__version__,
            transformers.__version__,
            sentence_transformers.__version__,
        ],
    }
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]
    return f"{folder.name}-{digest}"


def _export(model: Any, probe: dict[str, Any], inputs: Sequence[str], path: Path) -> None:
    """Export the transformer's last hidden state to ``path`` (written whole, then renamed)."""
    import torch

    class Hidden(torch.nn.Module):
        """Keyword arguments: forward()'s positional order differs between versions."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            out = self.model(**dict(zip(inputs, tensors, strict=True)), return_dict=True)
            return out.last_hidden_state

    path.parent.mkdir(parents=True, exist_ok=True)
    axes = {n: {0: "batch", 1: "tokens"} for n in (*inputs, "hidden")}
    fd, tmp = tempfile.mkstemp(prefix=path.stem, suffix=".tmp", dir=path.parent)
    os.close(fd)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about the model's Python branches
            torch.onnx.export(
                Hidden(),
                tuple(probe[n] for n in inputs),
                tmp,
                input_names=list(inputs),
                output_names=["hidden"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        os.replace(tmp, path)
        log.info("exported the embedding model to %s", path)
    finally:
        model.train(was_training)
        Path(tmp).unlink(missing_ok=True)
