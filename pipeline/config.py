"""Settings: defaults < ``<vault>/vault-ko.toml`` < ``VAULT_KO_*`` environment < flags.

The TOML file groups keys in sections (``[graph] url = …``); a section key ``url`` of
``[graph]`` is the setting ``graph_url``, which the environment spells ``VAULT_KO_GRAPH_URL``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError

CONFIG_FILE = "vault-ko.toml"
STATE_DIR = ".vault-ko"
ENV_PREFIX = "VAULT_KO_"
SECRET_FIELDS = frozenset({"graph_password"})
DEFAULT_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Settings:
    vault: Path
    state_dir: Path
    # KO-DB: SQLAlchemy URL; None means the SQLite file <state_dir>/ko.db.
    kodb_url: str | None = None
    # Graph: None means the managed local ArcadeDB recorded in the state dir.
    graph_url: str | None = None
    graph_user: str = "root"
    graph_password: str | None = None
    graph_password_file: Path | None = None
    graph_database: str | None = None
    graph_dialect: str | None = None  # memgraph | neo4j | arcadedb; None = from server agent
    graph_http_url: str | None = None  # ArcadeDB HTTP API, for its SQL-only schema commands
    graph_connect_timeout: float = 0.5  # seconds; low so a dead graph is noticed quickly
    graph_retry_deadline: float = 1.5  # seconds for all retries of one call (DESIGN §5)
    graph_retry_attempts: int = 4
    graph_breaker_cooldown: float = 30.0  # seconds the breaker skips the graph (DESIGN §5)
    # Seconds one call may wait for the graph, retries included: a server that accepts the
    # connection and never answers (hung, stopped) is declared unavailable after it. Reads
    # (ping, vector search) get graph_call_timeout; bulk reads and writes graph_write_timeout.
    graph_call_timeout: float = 2.0
    graph_write_timeout: float = 120.0
    # Vector index over-fetch before exact re-scoring. ArcadeDB's index differs from one build
    # to the next, and 800 keeps recall@10 at 1.000 where 400 did not, for a little more
    # search time (bench/ann_recall.py --sweep; figures in docs/benchmarks-history.md).
    graph_candidates: int = 800
    embed_model: str = DEFAULT_MODEL
    # Texts per model forward pass. 16 beats sentence-transformers' 32 on a CPU (sorted by
    # length, smaller batches pad less; bench/embed_throughput.py, figures in
    # docs/benchmarks-history.md); a GPU wants larger batches.
    embed_batch_size: int = 16
    embed_device: str = "cpu"
    # auto: the transformer in ONNX Runtime when it is installed and gives encode()'s vectors
    # (faster on one CPU thread, bench/onnx_forward.py), else torch;
    # onnx: ONNX Runtime or an error; torch: never ONNX Runtime.
    embed_runtime: str = "auto"
    vault_session_globs: tuple[str, ...] = ("sessions/**", "daily/**", "journal/**")
    vault_adr_globs: tuple[str, ...] = ("adr/**", "decisions/**")
    vault_exclude_globs: tuple[str, ...] = (".obsidian/**", ".trash/**", ".git/**")
    vault_max_note_bytes: int = 2_000_000
    # Processes that parse notes when an ingest reads at least ingest.PARALLEL_MIN_NOTES of
    # them: 0 = one per CPU, 1 = parse in the ingesting process.
    vault_parse_workers: int = 0
    # Notes under these globs never reach an answer (hook, MCP, service, load-context).
    vault_private_globs: tuple[str, ...] = ()
    query_top_k: int = 20
    query_hits: int = 20
    query_facts_per_subject: int = 3
    query_facts_per_predicate_cap: int = 3
    query_retrieval: str = "dense"  # dense | hybrid (dense and full-text hits fused)
    calibration_max_drift: float = 0.10  # share of notes added/removed since calibration
    calibration_max_age_days: float = 90.0
    calibration_max_pairs: int = 20_000  # note pairs sampled for μ, σ on large vaults
    freshness_max_stale: int = 0
    freshness_max_stale_ratio: float = 0.0
    # The recall hook prints nothing after this many seconds (agents wait for it).
    hook_budget: float = 1.5
    # Agents cut longer hook output to a short preview (Claude Code: 10,000 characters).
    hook_max_chars: int = 8000
    # `query` uses a running service only when its /healthz answers within this.
    service_probe_timeout: float = 0.5
    # The service answers from an in-memory copy of KO-DB's facts (about 100 bytes a fact,
    # service/warm.py) when KO-DB is a SQLite file of at most this many facts; 0: never.
    service_resident_facts: int = 5_000_000
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def effective_kodb_url(self) -> str:
        return self.kodb_url or f"sqlite:///{self.state_dir / 'ko.db'}"

    def password(self) -> str | None:
        """The graph password: explicit value, else the password file, else None."""
        if self.graph_password:
            return self.graph_password
        if self.graph_password_file:
            try:
                return self.graph_password_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read graph password file {self.graph_password_file}: {exc}"
                ) from exc
        return None

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def masked(self) -> dict[str, Any]:
        """The effective settings as plain data with secrets hidden."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS and value:
                value = "***"
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        out["kodb_url"] = mask_url(self.effective_kodb_url)
        if self.graph_url:
            out["graph_url"] = mask_url(self.graph_url)
        return out


# The password of a URL's userinfo: after "scheme://user:" up to the LAST "@" of the same
# whitespace-delimited token, so raw "@" and ":" inside a password (which users do write,
# though RFC 3986 wants them percent-encoded) are hidden too; a token holding a second URL
# or an "@" in its path is masked a bit too far, never too little.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:)\S*(?=@)")
# libpq and others also take the password as a query parameter.
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&;](?:password|passwd|pwd)=)[^&;#\s]*", re.IGNORECASE)
MASK = "***"


#: The passwords of the URLs and settings this process loaded (``remember_secrets``),
#: hidden wherever a text quotes them, whatever characters they hold.
_SECRETS: set[str] = set()
#: Shorter secrets are not searched for in free text (they would mask ordinary words);
#: the URL pattern below still hides them inside a URL.
_MIN_SECRET = 3


def url_password(url: str) -> str | None:
    """The password in ``url``'s user info, found by position: after ``scheme://`` and
    the user's colon, up to the authority's last ``@`` (a password may hold spaces, ``@``,
    ``/`` or ``#``, which no pattern over the whole URL can delimit). None for a URL with
    no user info or a file path (``sqlite:////tmp/a:b@c.db``)."""
    _, sep, rest = url.partition("://")
    if not sep or rest.startswith("/"):
        return None
    userinfo, at, _ = rest.rpartition("@")
    _user, colon, password = userinfo.partition(":")
    return password if at and colon and password else None


def remember_secrets(settings: Settings) -> None:
    """Note the passwords of ``settings`` (graph and KO-DB URLs, the graph password), as
    written and percent-decoded, so ``mask_url`` hides them in any text."""
    from urllib.parse import unquote

    found = [settings.graph_password]
    for url in (settings.kodb_url, settings.graph_url):
        if url:
            found.append(url_password(url))
    for secret in filter(None, found):
        _SECRETS.update(s for s in (secret, unquote(secret)) if len(s) >= _MIN_SECRET)


def mask_url(text: str) -> str:
    """Hide the passwords of every URL in ``text``: a URL (``postgresql://user:pw@host/db``)
    or a longer message that carries URLs (a driver's error text, a log line). Passwords
    this process loaded are hidden wherever they appear (``remember_secrets``); any other
    URL's password by its position.

    The one masking function: every message, JSON field and log line that may carry a URL
    goes through it before it is shown.
    """
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    masked = _URL_PASSWORD.sub(lambda m: m["head"] + MASK, text)
    return _QUERY_PASSWORD.sub(lambda m: m["head"] + MASK, masked)


_FIELDS = {f.name: f for f in fields(Settings) if f.name not in ("vault", "state_dir", "extra")}


def find_vault(explicit: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path) -> Path:
    """Vault selection of DESIGN §10: flag, then VAULT_KO_VAULT, then upward search, then cwd."""
    if explicit:
        return _existing_dir(Path(explicit), "--vault")
    if env.get(ENV_PREFIX + "VAULT"):
        return _existing_dir(Path(env[ENV_PREFIX + "VAULT"]), ENV_PREFIX + "VAULT")
    cwd = cwd.resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / STATE_DIR).is_dir() or (folder / CONFIG_FILE).is_file():
            return folder
    return cwd


def _existing_dir(path: Path, source: str) -> Path:
    path = path.expanduser()
    if not path.is_dir():
        raise ConfigError(f"vault {path} (from {source}) is not a directory")
    return path.resolve()


def _coerce(name: str, raw: Any, source: str) -> Any:
    f = _FIELDS[name]
    kind = str(f.type)
    try:
        if raw is None:
            return None
        if kind.startswith("tuple"):
            if isinstance(raw, str):
                return tuple(p.strip() for p in raw.split(",") if p.strip())
            if isinstance(raw, list | tuple) and all(isinstance(p, str) for p in raw):
                return tuple(raw)
            raise ValueError("expected a list of strings")
        if kind.startswith("int"):
            if isinstance(raw, bool):
                raise ValueError("expected an integer")
            return int(raw)
        if kind.startswith("float"):
            value = float(raw)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("expected a finite number")
            return value
        if kind.startswith("Path"):
            return Path(str(raw)).expanduser()
        if not isinstance(raw, str):
            raise ValueError("expected a string")
        return raw
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: setting {name!r}: {exc}") from exc


def _flatten_toml(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            for sub, subvalue in value.items():
                flat[f"{key}_{sub}"] = subvalue
        else:
            flat[key] = value
    unknown = sorted(set(flat) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    return flat


def load_settings(
    vault: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Build the effective Settings for one command invocation."""
    env = os.environ if env is None else env
    root = find_vault(vault, env, cwd or Path.cwd())
    values: dict[str, Any] = {}

    toml_path = root / CONFIG_FILE
    if toml_path.is_file():
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{toml_path}: {exc}") from exc
        for name, raw in _flatten_toml(data, toml_path).items():
            values[name] = _coerce(name, raw, str(toml_path))

    for name in _FIELDS:
        env_name = ENV_PREFIX + name.upper()
        if env_name in env and env[env_name] != "":
            values[name] = _coerce(name, env[env_name], env_name)

    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        if name not in _FIELDS:
            raise ConfigError(f"unknown setting {name!r}")
        values[name] = _coerce(name, raw, f"--{name.replace('_', '-')}")

    state_dir = Path(env.get(ENV_PREFIX + "STATE_DIR") or root / STATE_DIR)
    settings = Settings(vault=root, state_dir=state_dir, **values)
    remember_secrets(settings)
    return settings
