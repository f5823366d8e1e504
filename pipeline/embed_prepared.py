"""The query-time embedder: ONNX Runtime, the model's fast tokenizer and numpy; no torch.

A sentence-transformers model is a transformer followed by small modules (pooling,
normalisation). Loading it through sentence-transformers costs a fresh process seconds of
imports (torch, transformers) and hundreds of MB before the first question; this module
answers from files prepared once instead:

* ``model.onnx``: the transformer's last hidden state, exported by torch
  (``embed_onnx._export``);
* ``tokenizer.json``: the model's fast tokenizer as the loaded model configured it (its
  normaliser included), read back with the ``tokenizers`` library; truncation to the
  model's maximum sequence length is set here, padding is done here;
* ``pooling.json``: the later modules (pooling modes, normalisation, lower-casing, maximum
  length), reproduced in numpy;
* ``manifest.json``, written last: the SHA-256 of every model-folder file the model is
  loaded from, of each prepared file, the library versions, the agreement with
  ``encode()`` measured at preparation (the largest difference over ``agreement_texts()``:
  truncated and non-ASCII texts among them) and ``encode()``'s vectors of ``CHECK_TEXTS``.

A process trusts a prepared folder only when the model folder's hashes and the prepared
files' hashes match the manifest and the check texts give ``encode()``'s vectors again (to
``MAX_DIFFERENCE``); anything else raises ``NotPrepared`` and the caller prepares anew (it
has torch) or keeps the torch path (it has not, or must not spend the time): never a wrong
vector. Preparation holds a lock file and writes a temporary folder that is renamed into
place, so two first runs at once neither corrupt nor half-read each other.

Models whose modules this cannot reproduce exactly (a Dense or other module, a default
prompt, weighted-mean pooling, a transformer without ``tokenizer.json``) are named by
``plan_for`` without torch, and keep the torch path.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: The prepared folder's layout; another number is never trusted.
FORMAT = 1
MANIFEST = "manifest.json"
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
POOLING_FILE = "pooling.json"
#: Largest difference from encode()'s unit vectors that counts as the same vector (float32
#: rounding of another kernel order is ~1e-7).
MAX_DIFFERENCE = 1e-5
#: Pooling modes reproduced here, in the order sentence-transformers concatenates them.
POOLING_ORDER = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
SUPPORTED_POOLING = frozenset({"cls", "max", "mean", "mean_sqrt_len_tokens", "lasttoken"})
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
#: Texts every load runs and compares with encode()'s vectors stored at preparation.
CHECK_TEXTS = (
    "dimension probe",
    "How do we invalidate the warm cache after a deploy?",
    "Miért választottuk a Redis-t a gyorsítótárhoz?",
)
#: Weight and configuration files a model folder's top level is loaded from; other files
#: there (another framework's weights, README) and sub-folders no module names (onnx/,
#: openvino/) are not read by the model and not hashed.
_MODEL_SUFFIXES = (".json", ".txt", ".model", ".safetensors", ".bin")
_FRAMEWORK_OTHER = frozenset({"tf_model.h5", "flax_model.msgpack", "rust_model.ot"})

_THREADS_LOCK = threading.Lock()
_threads = 0  # 0: ONNX Runtime's default (one thread per physical core)


class NotPrepared(Exception):
    """The prepared folder cannot be trusted (missing, partial, stale or corrupt); ``refused``
    when a preparation found that this model cannot be reproduced here."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


@dataclass(frozen=True)
class Plan:
    """What a model folder's modules ask of the embedder, read without torch."""

    transformer_path: str  # the transformer module's folder, relative to the model folder
    pooling: tuple[str, ...]
    normalize: bool
    do_lower_case: bool
    max_seq_length: int | None  # None: the loaded model decides (stored at preparation)
    module_dirs: tuple[str, ...]  # sub-folders the modules are loaded from


def plan_for(folder: Path) -> Plan | str:
    """The plan for the sentence-transformers model in ``folder``, or why this module cannot
    reproduce it exactly (then the torch path embeds)."""
    try:
        modules = _read_json(folder / "modules.json")
    except FileNotFoundError:
        return "the folder has no modules.json (not a sentence-transformers model)"
    except (OSError, ValueError) as exc:
        return f"modules.json cannot be read ({exc})"
    if not isinstance(modules, list) or not modules:
        return "modules.json lists no modules"
    try:
        st_config = _read_json(folder / "config_sentence_transformers.json")
    except FileNotFoundError:
        st_config = {}
    except (OSError, ValueError) as exc:
        return f"config_sentence_transformers.json cannot be read ({exc})"
    if isinstance(st_config, dict) and st_config.get("default_prompt_name"):
        return f"the model adds a default prompt ({st_config['default_prompt_name']!r})"
    transformer: str | None = None
    pooling: tuple[str, ...] | None = None
    normalize = False
    do_lower_case = False
    max_seq_length: int | None = None
    dirs: list[str] = []
    for index, module in enumerate(modules):
        if not isinstance(module, dict):
            return f"modules.json entry {index} is not an object"
        kind = str(module.get("type", ""))
        path = str(module.get("path", ""))
        short = kind.rsplit(".", 1)[-1]
        if path:
            dirs.append(path)
        if index == 0:
            if short != "Transformer":
                return f"its first module is {kind!r}, not a Transformer"
            transformer = path
            cfg = _optional_json(folder / path / "sentence_bert_config.json")
            if not isinstance(cfg, dict):
                return "the transformer's sentence_bert_config.json cannot be read"
            do_lower_case = bool(cfg.get("do_lower_case", False))
            raw = cfg.get("max_seq_length")
            max_seq_length = int(raw) if isinstance(raw, int) and raw > 0 else None
            if not (folder / path / TOKENIZER_FILE).is_file():
                return "the transformer has no tokenizer.json (no fast tokenizer)"
        elif short == "Pooling" and pooling is None and not normalize:
            found = _pooling_modes(folder / path / "config.json")
            if isinstance(found, str):
                return found
            pooling = found
        elif short == "Normalize" and pooling is not None and not normalize:
            normalize = True
        else:
            return f"module {index} ({kind}) is not one it reproduces"
    if transformer is None or pooling is None:
        return "the model has no Pooling module after its transformer"
    return Plan(transformer, pooling, normalize, do_lower_case, max_seq_length, tuple(dirs))


def _pooling_modes(config_path: Path) -> tuple[str, ...] | str:
    config = _optional_json(config_path)
    if not isinstance(config, dict):
        return "the pooling config cannot be read"
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        modes: tuple[str, ...] = (mode,)
    elif isinstance(mode, list):
        modes = tuple(str(m) for m in mode)
    else:
        modes = tuple(name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key))
    if not modes:
        return "the pooling config names no pooling mode"
    unknown = [m for m in modes if m not in SUPPORTED_POOLING]
    if unknown:
        return f"pooling mode {unknown[0]!r} is not one it reproduces"
    return modes


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _optional_json(path: Path) -> Any:
    try:
        return _read_json(path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None


# -- where it is kept -------------------------------------------------------------------------


def cache_root(env: dict[str, str] | None = None) -> Path:
    """Prepared folders live beside the transformer exports (``embed_onnx.cache_root``)."""
    from pipeline.embed_onnx import cache_root as onnx_root

    return onnx_root(env)


def prepared_dir(folder: Path, root: Path | None = None) -> Path:
    """The prepared folder of the model in ``folder`` (one per model folder path)."""
    resolved = str(folder.resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:16]
    return (root or cache_root()) / f"{folder.name}-{digest}.prepared"


def model_files(folder: Path, plan: Plan) -> list[Path]:
    """The model folder's files the model is loaded from (what the manifest hashes)."""
    out = [
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix in _MODEL_SUFFIXES
        and p.name not in _FRAMEWORK_OTHER
        and not p.name.startswith(".")
    ]
    for sub in {plan.transformer_path, *plan.module_dirs} - {""}:
        base = folder / sub
        if base.is_dir():
            out.extend(p for p in base.rglob("*") if p.is_file())
    return sorted(set(out))


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hash_model(folder: Path, plan: Plan) -> dict[str, str]:
    """``{relative path: sha256}`` of the files ``model_files`` names."""
    return {str(p.relative_to(folder)): _sha256(p) for p in model_files(folder, plan)}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "sentence-transformers", "onnxruntime", "tokenizers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def available() -> bool:
    """Whether ONNX Runtime and tokenizers are installed (found, not imported)."""
    from importlib.util import find_spec

    return find_spec("onnxruntime") is not None and find_spec("tokenizers") is not None


# -- the embedder -------------------------------------------------------------------------------


def set_threads(threads: int) -> None:
    """Threads each prepared model's ONNX session uses from its next call (0: the default).
    The service answers on one thread."""
    global _threads
    with _THREADS_LOCK:
        _threads = max(0, int(threads))


class PreparedModel:
    """texts -> sentence embeddings of one prepared folder (no torch)."""

    def __init__(self, folder: Path, directory: Path, manifest: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self.folder = folder
        self.directory = directory
        self.manifest = manifest
        settings = manifest["pooling"]
        self.pooling: tuple[str, ...] = tuple(settings["modes"])
        self.normalize = bool(settings["normalize"])
        self.do_lower_case = bool(settings["do_lower_case"])
        self.max_seq_length = int(settings["max_seq_length"])
        self.dims = int(manifest["dims"])
        self.inputs: tuple[str, ...] = tuple(manifest["inputs"])
        self._tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._pad_id = int(manifest["pad_id"])
        self._session: Any = None
        self._session_threads = -1

    # The ONNX session is made on first use, and anew when the thread setting changed.
    def _session_now(self) -> Any:
        from pipeline.embed_onnx import cpu_session

        threads = _threads
        if self._session is None or threads != self._session_threads:
            self._session = cpu_session(self.directory / ONNX_FILE, threads)
            self._session_threads = threads
        return self._session

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The tokenizer's encodings (truncated to ``max_seq_length`` tokens, unpadded)."""
        prepared = [t.lower() if self.do_lower_case else t for t in texts]
        return list(self._tokenizer.encode_batch(prepared))

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self.tokenize(texts)]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings (len(texts), dims) as the model's modules compute them (normalised when
        the model ends in Normalize); a padded batch gives each text's single vector."""
        encodings = self.tokenize(texts)
        lengths = [len(e.ids) for e in encodings]
        width = max(lengths)
        rows = len(encodings)
        feed = {
            "input_ids": np.full((rows, width), self._pad_id, dtype=np.int64),
            "attention_mask": np.zeros((rows, width), dtype=np.int64),
            "token_type_ids": np.zeros((rows, width), dtype=np.int64),
        }
        for i, enc in enumerate(encodings):
            n = lengths[i]
            feed["input_ids"][i, :n] = enc.ids
            feed["attention_mask"][i, :n] = enc.attention_mask
            feed["token_type_ids"][i, :n] = enc.type_ids
        hidden = self._session_now().run(None, {k: feed[k] for k in self.inputs})[0]
        out = np.empty((rows, self.dims), dtype=np.float32)
        for i, n in enumerate(lengths):
            out[i] = self._pool(np.asarray(hidden[i, :n], dtype=np.float32))
        if self.normalize:
            norms = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
            out = (out / norms).astype(np.float32, copy=False)
        return out

    def _pool(self, tokens: np.ndarray) -> np.ndarray:
        """One text's real tokens (n, hidden) pooled: the padding never enters a sum, so a
        text pools the same alone and in a batch."""
        parts = []
        count = np.float32(max(tokens.shape[0], 1e-9))
        total: np.ndarray | None = None
        for mode in self.pooling:
            if mode == "cls":
                parts.append(tokens[0])
            elif mode == "max":
                parts.append(tokens.max(axis=0))
            elif mode == "lasttoken":
                parts.append(tokens[-1])
            else:
                if total is None:
                    total = tokens.sum(axis=0, dtype=np.float32)
                scale = count if mode == "mean" else np.sqrt(count, dtype=np.float32)
                parts.append(total / scale)
        return np.concatenate(parts).astype(np.float32, copy=False)


# -- trusting a prepared folder ----------------------------------------------------------------


def open_prepared(folder: Path, plan: Plan, *, root: Path | None = None) -> PreparedModel:
    """The prepared model of ``folder`` when every check passes; NotPrepared says why not.

    The model folder's files and the prepared files are hashed in a thread while this one
    makes the ONNX session (hashing and ONNX Runtime release the GIL), so a fresh process
    pays for the slower of the two, not their sum; one thread, not one per file, leaves a
    core to the question's own imports on a 2-core machine. The session is only used once
    every hash matched."""
    directory = prepared_dir(folder, root)
    try:
        manifest = _read_json(directory / MANIFEST)
    except FileNotFoundError:
        raise NotPrepared(f"nothing prepared in {directory}") from None
    except (OSError, ValueError) as exc:
        raise NotPrepared(f"its manifest cannot be read ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise NotPrepared("its manifest is of another format")
    if manifest.get("status") == "refused":
        if manifest.get("model_files") == hash_model(folder, plan):
            raise NotPrepared(str(manifest.get("reason", "refused")), refused=True)
        raise NotPrepared("the model folder's files changed since it was prepared")
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != {ONNX_FILE, TOKENIZER_FILE, POOLING_FILE}:
        raise NotPrepared("its manifest does not list the prepared files")
    problems: list[str] = []

    def check() -> None:
        _check_model_files(folder, plan, manifest, problems)
        if not problems:
            _check_prepared_files(directory, files, problems)

    checks = [threading.Thread(target=check, name="vault-ko-hash")]
    for thread in checks:
        thread.start()
    model: PreparedModel | None = None
    failure: str | None = None
    try:
        model = PreparedModel(folder, directory, manifest)
        model._session_now()
    except Exception as exc:  # ONNX Runtime, tokenizers and JSON errors share no base class
        failure = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for thread in checks:
        thread.join()
    if problems:
        raise NotPrepared(problems[0])
    if failure is not None or model is None:
        raise NotPrepared(f"it cannot be loaded ({failure})")
    try:
        expected = _decode_vectors(manifest["check"]["vectors"], model.dims)
        difference = _difference(model(list(manifest["check"]["texts"])), expected)
    except Exception as exc:  # a damaged check record, or a run that fails
        raise NotPrepared(f"its check texts cannot be embedded ({exc})") from exc
    if not difference <= MAX_DIFFERENCE:
        raise NotPrepared(
            f"its check texts differ from encode()'s vectors by {difference:.1e} "
            "(another ONNX Runtime or tokenizers version?)"
        )
    return model


def _check_model_files(
    folder: Path, plan: Plan, manifest: dict[str, Any], problems: list[str]
) -> None:
    try:
        same = manifest.get("model_files") == hash_model(folder, plan)
    except OSError as exc:
        problems.append(f"the model folder cannot be read ({exc})")
        return
    if not same:
        problems.append("the model folder's files changed since it was prepared")


def _check_prepared_files(directory: Path, files: dict[str, Any], problems: list[str]) -> None:
    for name, recorded in files.items():
        path = directory / name
        try:
            if not path.is_file() or path.stat().st_size != recorded.get("size"):
                problems.append(f"{name} is missing or incomplete")
            elif _sha256(path) != recorded.get("sha256"):
                problems.append(f"{name} is corrupt (its hash differs from the manifest's)")
        except (OSError, AttributeError) as exc:
            problems.append(f"{name} cannot be checked ({exc})")


def status(
    folder: Path,
    plan: Plan | str,
    *,
    root: Path | None = None,
    opened: PreparedModel | None = None,
) -> dict[str, Any]:
    """What is prepared for ``folder`` and whether it would be trusted (for `model status`);
    ``opened``: the model this process already opened and checked."""
    directory = prepared_dir(folder, root) if isinstance(plan, Plan) else None
    out: dict[str, Any] = {
        "model_folder": str(folder),
        "prepared_dir": str(directory) if directory else None,
        "supported": isinstance(plan, Plan),
        "reason": plan if isinstance(plan, str) else None,
        "ready": False,
        "bytes": _size(directory) if directory else 0,
        "manifest": None,
    }
    if isinstance(plan, Plan):
        try:
            model = opened or open_prepared(folder, plan, root=root)
            out["ready"] = True
            out["manifest"] = _public_manifest(model.manifest)
        except NotPrepared as exc:
            out["reason"] = exc.reason
    return out


def _public_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    keep = ("prepared_at", "versions", "agreement", "dims", "pooling", "files")
    return {k: manifest.get(k) for k in keep}


def _size(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


# -- preparing (needs torch) --------------------------------------------------------------------


def prepare(encoder: Any, folder: Path, plan: Plan, *, root: Path | None = None) -> PreparedModel:
    """Prepare ``folder``'s model from its loaded sentence-transformers ``encoder`` (unless
    another process did so meanwhile) and open it. Raises NotPrepared(refused=True) when
    the prepared path does not give encode()'s vectors, after recording why in the
    manifest so later processes go straight to torch."""
    directory = prepared_dir(folder, root)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(directory.with_name(directory.name + ".lock")):
        try:
            return open_prepared(folder, plan, root=root)
        except NotPrepared as exc:
            if exc.refused:
                raise
        hashes = hash_model(folder, plan)
        staging = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
        try:
            manifest = _build(encoder, folder, plan, hashes, staging)
            _replace_dir(staging, directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if manifest.get("status") == "refused":
            raise NotPrepared(str(manifest["reason"]), refused=True)
        return open_prepared(folder, plan, root=root)


def remove(folder: Path, root: Path | None = None) -> list[Path]:
    """Remove the prepared folder of ``folder``'s model (under its lock); what was removed."""
    directory = prepared_dir(folder, root)
    if not directory.exists():
        return []
    with _file_lock(directory.with_name(directory.name + ".lock")):
        shutil.rmtree(directory, ignore_errors=True)
    return [directory]


def clear(root: Path | None = None) -> list[Path]:
    """Remove every prepared folder and transformer export under the cache root."""
    base = root or cache_root()
    removed = []
    if base.is_dir():
        for path in sorted(base.iterdir()):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the OS if the holder dies
        yield
    finally:
        os.close(fd)


def _replace_dir(staging: Path, directory: Path) -> None:
    """Put ``staging`` where ``directory`` is; readers see the old folder, none, or the new
    one (a reader that finds none waits for the lock this runs under, then finds the new)."""
    old: Path | None = None
    if directory.exists():
        old = directory.with_name(f"{directory.name}.old-{os.getpid()}-{time.time_ns()}")
        os.rename(directory, old)
    os.rename(staging, directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build(
    encoder: Any, folder: Path, plan: Plan, hashes: dict[str, str], staging: Path
) -> dict[str, Any]:
    """Write the prepared files and manifest into ``staging``; the manifest's ``status`` is
    "ready", or "refused" with the reason when the result does not match encode()."""
    from pipeline import embed_onnx

    base: dict[str, Any] = {
        "format": FORMAT,
        "model_folder": str(folder.resolve()),
        "model_files": hashes,
        "versions": _versions(),
        "prepared_at": time.time(),
    }

    def refuse(reason: str) -> dict[str, Any]:
        manifest = {**base, "status": "refused", "reason": reason, "files": {}}
        _write_json(staging / MANIFEST, manifest)
        log.info("the query-time embedder cannot reproduce this model: %s", reason)
        return manifest

    loaded = _loaded_settings(encoder, plan)
    if isinstance(loaded, str):
        return refuse(loaded)
    first = embed_onnx._first_transformer(encoder)
    if first is None:
        return refuse("its first module holds no exportable transformer")
    probe = embed_onnx._tokenize(encoder, ["probe"])
    inputs = [n for n in embed_onnx.INPUT_NAMES if n in probe]
    if inputs[:2] != ["input_ids", "attention_mask"]:
        return refuse(f"its transformer takes {inputs}, not input_ids and attention_mask")
    backend = getattr(getattr(encoder, "tokenizer", None), "backend_tokenizer", None)
    if backend is None:
        return refuse("its tokenizer is not a fast tokenizer")
    embed_onnx._export(first, probe, inputs, staging / ONNX_FILE)
    (staging / TOKENIZER_FILE).write_text(backend.to_str(), encoding="utf-8")
    pad_id = getattr(encoder.tokenizer, "pad_token_id", None)
    _write_json(staging / POOLING_FILE, loaded)
    reference = _encode(encoder, list(agreement_texts()))
    check_reference = _encode(encoder, list(CHECK_TEXTS))
    dims = int(reference.shape[1])
    files = {
        name: {"size": (staging / name).stat().st_size, "sha256": _sha256(staging / name)}
        for name in (ONNX_FILE, TOKENIZER_FILE, POOLING_FILE)
    }
    manifest = {
        **base,
        "status": "ready",
        "dims": dims,
        "inputs": inputs,
        "pad_id": int(pad_id) if pad_id is not None else 0,
        "pooling": loaded,
        "files": files,
        "check": {"texts": list(CHECK_TEXTS), "vectors": _encode_vectors(check_reference)},
    }
    agreement = _agreement(encoder, PreparedModel(folder, staging, manifest), reference)
    if isinstance(agreement, str):
        return refuse(agreement)
    manifest["agreement"] = agreement
    _write_json(staging / MANIFEST, manifest)  # last: a folder without it is never trusted
    log.info(
        "prepared the query-time embedder in %s (largest difference from encode() %.1e "
        "over %d texts)",
        staging,
        agreement["max_difference"],
        agreement["texts"],
    )
    return manifest


def _agreement(encoder: Any, model: PreparedModel, reference: np.ndarray) -> dict[str, Any] | str:
    """How the prepared ``model`` agrees with ``encode()``'s ``reference`` vectors of
    ``agreement_texts()`` (one by one and as one padded batch), or why it does not."""
    texts = agreement_texts()
    ids_differ = _token_mismatch(encoder, model, texts)
    if ids_differ is not None:
        return f"its tokenizer gives other tokens than the model's for {ids_differ!r}"
    singles = np.concatenate([model([t]) for t in texts])
    batched = model(list(texts))
    difference = _difference(singles, reference)
    if not difference <= MAX_DIFFERENCE:
        return f"its vectors differ from encode()'s by {difference:.1e}"
    return {
        "texts": len(texts),
        "max_difference": difference,
        "truncated_texts": sum(n >= model.max_seq_length for n in model.token_lengths(texts)),
        "non_ascii_texts": sum(not t.isascii() for t in texts),
        "batch_equals_single": bool(np.array_equal(singles, batched)),
    }


def _loaded_settings(encoder: Any, plan: Plan) -> dict[str, Any] | str:
    """The pooling settings as the loaded model has them, or why they differ from the plan."""
    modules = list(encoder)
    if getattr(encoder, "default_prompt_name", None):
        return "the model adds a default prompt"
    max_len = getattr(encoder, "max_seq_length", None) or plan.max_seq_length
    if not max_len:
        return "the model states no maximum sequence length"
    pooling = modules[1] if len(modules) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)
    if isinstance(mode, str):
        loaded_modes: tuple[str, ...] = (mode,)
    elif isinstance(mode, (list, tuple)):
        loaded_modes = tuple(mode)
    else:  # older sentence-transformers: the legacy flags, in the same order
        loaded_modes = tuple(
            name
            for name in POOLING_ORDER
            if getattr(pooling, f"pooling_mode_{name}", False)
            or getattr(pooling, f"pooling_mode_{name}_tokens", False)
            or getattr(pooling, f"pooling_mode_{name}_token", False)
        )
    if loaded_modes and loaded_modes != plan.pooling:
        return f"the loaded model pools by {loaded_modes}, its config says {plan.pooling}"
    if len(modules) != 2 + int(plan.normalize):
        return f"the loaded model has {len(modules)} modules, its modules.json another count"
    return {
        "modes": list(plan.pooling),
        "normalize": plan.normalize,
        "do_lower_case": plan.do_lower_case,
        "max_seq_length": int(max_len),
    }


def _encode(encoder: Any, texts: list[str]) -> np.ndarray:
    return np.asarray(
        encoder.encode(
            texts,
            batch_size=16,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        ),
        dtype=np.float32,
    )


def _token_mismatch(encoder: Any, model: PreparedModel, texts: Sequence[str]) -> str | None:
    """The first text whose token ids differ between the model's tokenizer and ours."""
    from pipeline import embed_onnx

    theirs = embed_onnx._tokenize(encoder, list(texts))
    mask = np.asarray(theirs["attention_mask"])
    ids = np.asarray(theirs["input_ids"])
    for i, enc in enumerate(model.tokenize(texts)):
        n = int(mask[i].sum())
        if list(ids[i, :n]) != list(enc.ids):
            return texts[i][:60]
    return None


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _difference(ours: np.ndarray, theirs: np.ndarray) -> float:
    a, b = _unit(np.asarray(ours, dtype=np.float32)), _unit(np.asarray(theirs, dtype=np.float32))
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b)))


def _encode_vectors(vectors: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode("ascii")


def _decode_vectors(text: str, dims: int) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").reshape(-1, dims)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")


def agreement_texts() -> tuple[str, ...]:
    """The texts a preparation compares with encode(): short and long questions, notes past
    the maximum length, whitespace and case, Hungarian and other non-ASCII scripts."""
    base = [
        "why did we choose redis for the warm cache?",
        "How do we invalidate the warm cache after a deploy?",
        "pgbouncer transaction mode pooling",
        "sourdough bread hydration",
        "Kafka consumer group rebalancing stalls when a broker restarts",
        "What does the runbook say about Redis failover?",
        "ADR 0007: Use Redis as the warm cache",
        "  leading and trailing spaces  ",
        "UPPER CASE QUESTION ABOUT POSTGRES VACUUM",
        "tabs\tand\nnewlines\r\nin one text",
        "x",
        "?",
        "",
        "a" * 300,
        'C++ / Rust FFI: `unsafe extern "C" fn` and #pragma once',
        "SELECT * FROM facts WHERE subject_norm = :s -- parameters, always",
        "https://example.org/path?query=1&b=2#frag",
        "email: someone@example.com, phone +36 1 234 5678",
        "3.14159 2.71828 1e-12 0x1F 1_000_000",
        "Miért választottuk a Redis-t a meleg gyorsítótárhoz?",
        "Árvíztűrő tükörfúrógép: az ékezetes betűk próbája.",
        "A döntést a csapat a második sprint végén hozta meg, mert a késleltetés nőtt.",
        "Hogyan állítjuk helyre az adatbázist egy hibás migráció után?",
        "Über die Größe der Straßenbahn in München",
        "Ça coûte très cher, n'est-ce pas ?",
        "¿Dónde está la biblioteca? Año, niño, señor.",
        "Привет, как настроить кэш для поиска?",
        "Γειά σου κόσμε: μια δοκιμή",
        "東京の天気はどうですか",
        "数据库连接池耗尽了怎么办",
        "한국어 문장 토큰화 시험",
        "مرحبا بالعالم",
        "שלום עולם",
        "हिन्दी में एक वाक्य",
        "emoji 🚀🔥 and a cache 🧊",
        "combining: e\u0301 vs \u00e9, ﬁ ligature, ① circled",
        "zero\u200bwidth and non\u00a0breaking spaces",
        "ALL CAPS ÁRVÍZTŰRŐ TÜKÖRFÚRÓGÉP",
        "snake_case_identifier and camelCaseIdentifier and kebab-case-name",
        "[[wiki-link]] and **bold** and _emphasis_ in markdown",
        "- [ ] a task list item\n- [x] a done one",
        "> a quoted line\n> another",
        "| table | row |\n|---|---|\n| a | b |",
        "The quick brown fox jumps over the lazy dog.",
        "We will build a warm cache on our existing Redis cluster with a TTL of one hour.",
    ]
    paragraph = (
        "The warm cache holds the results of expensive queries for an hour; invalidation "
        "happens on deploy and on writes to the underlying tables, and the runbook says how "
        "to fail over when the primary Redis node is lost. "
    )
    hungarian = (
        "A meleg gyorsítótár egy órán át őrzi a drága lekérdezések eredményét; a telepítéskor "
        "és az alapul szolgáló táblák írásakor érvénytelenítjük, a futtatási kézikönyv pedig "
        "leírja, mi a teendő, ha az elsődleges Redis csomópont kiesik. "
    )
    long = [
        paragraph * 12,
        hungarian * 12,
        ("word " * 400).strip(),
        "ő" * 600,
        "東京" * 400,
        (paragraph + hungarian) * 6,
        "\n\n".join([paragraph] * 20),
    ]
    return tuple(base + long)
