"""Settings: defaults < ``<vault>/vault-ko.toml`` < ``VAULT_KO_*`` environment < flags.

The TOML file groups keys in sections (``[graph] url = …``); a section key ``url`` of
``[graph]`` is the setting ``graph_url``, which the environment spells ``VAULT_KO_GRAPH_URL``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.languages import LANGUAGES

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
    # A note longer than the model reads: embedded as passages (its sections, or windows of
    # them), the note scored by its best; or by its head alone, the rest dropped
    # (pipeline/vault/passages.py; figures in docs/long-notes.md).
    embed_long_notes: str = "passages"
    vault_session_globs: tuple[str, ...] = ("sessions/**", "daily/**", "journal/**")
    vault_adr_globs: tuple[str, ...] = ("adr/**", "decisions/**")
    vault_exclude_globs: tuple[str, ...] = (".obsidian/**", ".trash/**", ".git/**")
    vault_max_note_bytes: int = 2_000_000
    # Processes that parse notes when an ingest reads at least ingest.PARALLEL_MIN_NOTES of
    # them: 0 = one per CPU, 1 = parse in the ingesting process.
    vault_parse_workers: int = 0
    # Notes under these globs never reach an answer (hook, MCP, service, load-context).
    vault_private_globs: tuple[str, ...] = ()
    # The stemmer of the full-text index (a Snowball name, or none); a note's own ``lang:``
    # overrides it for that note (kodb/text.py, docs/degraded-mode.md).
    vault_language: str = "english"
    query_top_k: int = 20
    query_hits: int = 20
    query_facts_per_subject: int = 3
    query_facts_per_predicate_cap: int = 3
    query_retrieval: str = "hybrid"  # hybrid (dense and full-text hits fused) | dense
    query_today: str = ""  # the ISO day time phrases are read against ("": the real today)
    #: check: a cold answer (no service) says how many notes edited since the last sync it
    #: cannot see; skip: it does not look (the scan stats every note)
    query_unsynced: str = "check"
    #: newest: a question asking for the latest ("the last meeting") gets the newest of its
    #: notes first (timewindow.newest_first); relevance: its notes in relevance order
    query_latest: str = "newest"
    watch_debounce: float = 1.0  # longest a watcher gathers changes before a run
    watch_mode: str = "events"  # events (inotify & co.) | polling (network shares)
    calibration_max_drift: float = 0.10  # share of notes added/removed since calibration
    calibration_max_age_days: float = 90.0
    calibration_max_pairs: int = 20_000  # note pairs sampled for μ, σ on large vaults
    freshness_max_stale: int = 0
    freshness_max_stale_ratio: float = 0.0
    # The recall hook prints nothing after this many seconds (agents wait for it).
    hook_budget: float = 1.5
    # Agents cut longer hook output to a short preview (Claude Code: 10,000 characters).
    hook_max_chars: int = 8000
    # The least label the hook injects: "moderate" keeps weak context (small talk, loosely
    # related notes) out of every prompt.
    hook_min_label: str = "weak"
    # `query` uses a running service only when its /healthz answers within this.
    service_probe_timeout: float = 0.5
    # The service answers from an in-memory copy of KO-DB's facts (about 100 bytes a fact,
    # service/warm.py) when KO-DB is a SQLite file of at most this many facts; 0: never.
    service_resident_facts: int = 5_000_000
    # The longest request body the service reads (bytes; longer: 413, before it is read).
    # 4 MiB holds a question of the longest length however JSON escapes it (12 bytes a
    # character at worst).
    service_max_body_bytes: int = 4 * 1024 * 1024
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # However the settings were made (load_settings, a library caller, replace), the
        # passwords they hold are hidden from every message from now on.
        remember_secrets(self)

    @property
    def effective_kodb_url(self) -> str:
        return self.kodb_url or f"sqlite:///{self.state_dir / 'ko.db'}"

    def password(self) -> str | None:
        """The graph password: explicit value, else the password file, else None."""
        if self.graph_password:
            return self.graph_password
        if self.graph_password_file:
            try:
                secret = self.graph_password_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read graph password file {self.graph_password_file}: {exc}"
                ) from exc
            remember_secret(secret)
            return secret
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
        for name in ("graph_url", "graph_http_url"):
            if out[name]:
                out[name] = mask_url(out[name])
        return out


MASK = "***"

#: Query parameters that carry a password (libpq and others take one there too).
_PASSWORD_KEYS = frozenset({"password", "passwd", "pwd"})
#: The characters of a URL scheme (RFC 3986: a letter, then letters, digits, "+", "-", ".").
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")

#: The passwords of the URLs and settings this process loaded (``remember_secrets``), in
#: every form a message may quote them (as written, percent-decoded, re-encoded, escaped
#: inside JSON or a repr), hidden wherever a text holds them, whatever characters they hold.
_SECRETS: set[str] = set()
#: Shorter secrets are not searched for in free text (they would mask ordinary words);
#: the URL parsing below still hides them inside a URL.
_MIN_SECRET = 3


def url_password(url: str) -> str | None:
    """The password in ``url``'s user info, as written: what follows the user's ``:`` up
    to the authority's last ``@`` (urllib's rule, ``SplitResult.password``, with the
    authority allowed to run past a raw ``/``, ``?`` or ``#``, which a password may hold
    though RFC 3986 wants them percent-encoded). None for a URL with no user info or a
    file path (``sqlite:////tmp/a:b@c.db``)."""
    _, sep, rest = url.partition("://")
    if not sep or rest.startswith("/"):
        return None
    userinfo, at, _ = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not (at and colon and password) or not _plain_user(user):
        return None
    return password


def _plain_user(user: str) -> bool:
    """A user name as it may stand in user info: no path, query, fragment or IPv6 host
    (``http://h/a:b@c``'s "h/a" is a path, not a user)."""
    return not any(c in user for c in "/?#[]")


def _secret_forms(secret: str) -> set[str]:
    """``secret`` in every form a message may quote it: as written, percent-decoded,
    percent-encoded as urllib and SQLAlchemy write it, and escaped inside a JSON string or
    a Python repr (a driver's error may quote its arguments)."""
    import json
    from urllib.parse import quote, quote_plus, unquote

    plain = {secret, unquote(secret)}
    encoded = {quote(p, safe=safe) for p in plain for safe in ("", " +", "@:")}
    encoded |= {quote_plus(p) for p in plain}
    forms = plain | encoded
    for form in list(forms):
        forms.add(json.dumps(form)[1:-1])
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        forms.add(repr(form)[1:-1])
    return {f for f in forms if len(f) >= _MIN_SECRET}


def remember_secret(secret: str | None) -> None:
    """Hide ``secret`` (a password) in every text ``mask_url`` sees from now on."""
    if secret:
        _SECRETS.update(_secret_forms(secret))


def remember_secrets(settings: Settings) -> None:
    """Note the passwords of ``settings`` (the graph password and the passwords of the
    KO-DB, graph and graph HTTP URLs) so ``mask_url`` hides them in any text."""
    remember_secret(settings.graph_password)
    for url in (settings.kodb_url, settings.graph_url, settings.graph_http_url):
        if url:
            remember_secret(url_password(url))


def mask_url(text: str) -> str:
    """Hide the passwords of every URL in ``text``: a URL (``postgresql://user:pw@host/db``)
    or a longer message that carries URLs (a driver's error text, a log line).

    The one masking function: every message, JSON field and log line that may carry a URL
    goes through it before it is shown. First the passwords this process loaded are hidden
    wherever they appear (``remember_secrets``: a space, quote or ``#`` in them cannot
    delimit them), then each URL of the text is parsed: the password of its user info
    (``url_password``) and its ``password=`` query parameters become ``***``.
    """
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    if "://" not in text:
        return text
    out: list[str] = []
    done = 0
    i = text.find("://")
    while i != -1:
        start = i
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        if start == i or not text[start].isalpha():
            i = text.find("://", i + 3)
            continue
        end = _url_end(text, i + 3)
        out.append(text[done:start])
        masked, end = _mask_one_url(text, start, end)
        out.append(masked)
        done = end
        i = text.find("://", end)
    out.append(text[done:])
    return "".join(out)


def _url_end(text: str, at: int) -> int:
    """Where the URL whose authority starts at ``at`` ends in free text: the first
    whitespace (a URL cannot be delimited otherwise; quotes and brackets around it stay
    inside and are harmless)."""
    end = at
    while end < len(text) and not text[end].isspace():
        end += 1
    return end


def _mask_one_url(text: str, start: int, end: int) -> tuple[str, int]:
    """``text[start:end]`` (one URL) with its password masked, and where it ended: a URL
    whose user info has a password with a space in it ends only at the token holding the
    authority's ``@``, on the same line."""
    url = text[start:end]
    head, _, rest = url.partition("://")
    if not rest.startswith("/"):
        password = url_password(url)
        if password is not None:
            user = rest.partition(":")[0]
            rest = f"{user}:{MASK}@{rest.rpartition('@')[2]}"
        else:
            rest, end = _mask_spaced_password(text, rest, end)
    return f"{head}://{_mask_query(rest)}", end


def _mask_spaced_password(text: str, rest: str, end: int) -> tuple[str, int]:
    """A URL token with ``user:`` and no ``@`` whose "port" is no number may be cut by a
    space in its password (``bolt://root:Kp7 SecretQ@host``): its user info then runs on
    to the next token of the line that holds an ``@`` (to that token's last ``@``), never
    past another URL. Masks a little too far in a malformed URL, never too little."""
    authority = rest.split("/", 1)[0]
    user, colon, tail = authority.partition(":")
    if not colon or not tail or tail.isdigit() or not _plain_user(user) or "@" in rest:
        return rest, end
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    pos = end
    while pos < line_end:
        while pos < line_end and text[pos].isspace():
            pos += 1
        token_end = _url_end(text, pos)
        token = text[pos:token_end]
        if "://" in token or not token:
            break
        if "@" in token:
            after = token.rpartition("@")[2]
            return f"{user}:{MASK}@{after}", min(token_end, line_end)
        pos = token_end
    return rest, end


def _mask_query(rest: str) -> str:
    """``rest`` (a URL after ``scheme://``) with the values of its password parameters
    (``?password=…``, ``&pwd=…``) masked, up to the next ``&``, ``;`` or ``#``."""
    before, q, query = rest.partition("?")
    if not q:
        return rest
    parts: list[str] = []
    piece = ""
    for ch in query + "&":
        if ch in "&;":
            parts.append(_mask_param(piece) + ch)
            piece = ""
        else:
            piece += ch
    return f"{before}?{''.join(parts)[:-1]}"


def _mask_param(piece: str) -> str:
    key, eq, value = piece.partition("=")
    if eq and key.lower() in _PASSWORD_KEYS:
        _, hash_, fragment = value.partition("#")
        return f"{key}={MASK}{hash_}{fragment}"
    return piece


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


# --- validation: every setting once, at load -----------------------------------------
# A small explicit validator, not pydantic (installed with FastAPI): every process that
# loads settings would pay its import and a model class of these ~40 fields, measured at
# about 85 ms and 9 MB (import 63-70 ms, class 19 ms) against 0.3 ms for this one. The hook
# loads settings on every prompt, and with the service up its p95 is 257 ms for a target of
# 300 ms (BENCHMARKS.md); a cold query has 0.19 s left under its 1.0 s.
#: The most subjects, notes or facts per subject a setting may ask for: the bound of the
#: query flags (``pipeline.query.MAX_COUNT``; a test keeps the two equal).
MAX_COUNT = 10_000
GRAPH_DIALECTS = ("memgraph", "neo4j", "arcadedb")
EMBED_RUNTIMES = ("auto", "onnx", "torch")
#: ``embed_long_notes``: a long note as passages, or as its head (the model reads the first
#: ``max_seq_length`` tokens and drops the rest).
LONG_NOTE_MODES = ("passages", "head")
#: ``pipeline.query.RETRIEVALS`` (a test keeps the two equal; query.py loads numpy).
RETRIEVALS = ("dense", "hybrid")
#: The labels the hook may be told to inject from (``hook_min_label``), least first.
HOOK_LABELS = ("weak", "moderate", "strong")
#: The neo4j driver's schemes for a Bolt server.
BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
HTTP_SCHEMES = ("http", "https")
_PERCENT_HINT = " (a '/', '?', '#' or '@' in its password must be percent-encoded)"


class _Invalid(ValueError):
    """Why a value is refused, to follow the setting's name in the message."""


@dataclass(frozen=True)
class Rule:
    """How one setting is read and checked: its kind, and its range or choices.

    ``kind``: ``int``, ``float``, ``str``, ``globs`` (a list of strings), ``path`` or
    ``url``. Numbers lie in [``low``, ``high``] (``above``: more than ``low``); a string is
    one of ``choices`` when given, and not empty unless ``empty``; a URL has one of
    ``schemes`` and, with ``port``, a numeric port as its driver parses it (urllib, as
    neo4j does; KO-DB's port is SQLAlchemy's to parse, ``pipeline.kodb.engine``).
    """

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    choices: tuple[str, ...] = ()
    empty: bool = False
    schemes: tuple[str, ...] = ()
    port: bool = False
    userinfo: bool = True  # False: a user or password in the URL is refused
    secret: bool = False


def _count(low: int, high: int | None = None) -> Rule:
    return Rule("int", low=low, high=high)


def _seconds(low: float = 0.0, *, above: bool = True) -> Rule:
    return Rule("float", low=low, above=above)


#: Every setting's rule; ``tests/unit/test_config_validation.py`` checks none is missing
#: and every default passes. The bounds of a flag for the same setting are the same.
RULES: dict[str, Rule] = {
    "kodb_url": Rule("url", secret=True),
    # The neo4j driver refuses user info in its URL ("URI userinfo is not supported").
    "graph_url": Rule("url", schemes=BOLT_SCHEMES, port=True, secret=True, userinfo=False),
    "graph_user": Rule("str", empty=True),
    "graph_password": Rule("str", empty=True, secret=True),
    "graph_password_file": Rule("path"),
    "graph_database": Rule("str"),
    "graph_dialect": Rule("str", choices=GRAPH_DIALECTS),
    "graph_http_url": Rule("url", schemes=HTTP_SCHEMES, port=True, secret=True),
    "graph_connect_timeout": _seconds(),
    "graph_retry_deadline": _seconds(above=False),  # 0: no retry after the first attempt
    "graph_retry_attempts": _count(1),
    "graph_breaker_cooldown": _seconds(above=False),  # 0: retry the graph at once
    "graph_call_timeout": _seconds(),
    "graph_write_timeout": _seconds(),
    "graph_candidates": _count(1),
    "embed_model": Rule("str"),
    "embed_batch_size": _count(1),  # as `embed --batch-size`
    "embed_device": Rule("str"),
    "embed_runtime": Rule("str", choices=EMBED_RUNTIMES),
    "embed_long_notes": Rule("str", choices=LONG_NOTE_MODES),
    "vault_session_globs": Rule("globs"),
    "vault_adr_globs": Rule("globs"),
    "vault_exclude_globs": Rule("globs"),
    "vault_max_note_bytes": _count(1),
    "vault_parse_workers": _count(0),  # 0: one per CPU
    "vault_private_globs": Rule("globs"),
    "vault_language": Rule("str", choices=LANGUAGES),
    # As the query flags: --top-k and --facts-per-subject take 0 (notes only, no facts).
    "query_top_k": _count(0, MAX_COUNT),
    "query_hits": _count(1, MAX_COUNT),
    "query_facts_per_subject": _count(0, MAX_COUNT),
    "query_facts_per_predicate_cap": _count(1, MAX_COUNT),
    "query_retrieval": Rule("str", choices=RETRIEVALS),
    "query_today": Rule("day", empty=True),
    "query_unsynced": Rule("str", choices=("check", "skip")),
    "query_latest": Rule("str", choices=("newest", "relevance")),
    "watch_debounce": Rule("float", low=0.05, high=60.0),
    "watch_mode": Rule("str", choices=("events", "polling")),
    "calibration_max_drift": Rule("float", low=0.0),  # as freshness --calibration-max-drift
    "calibration_max_age_days": Rule("float", low=0.0),
    "calibration_max_pairs": _count(1),
    "freshness_max_stale": _count(0),
    "freshness_max_stale_ratio": Rule("float", low=0.0, high=1.0),
    "hook_budget": _seconds(),  # 0 or less: the hook would never print anything
    "hook_max_chars": _count(1),
    "hook_min_label": Rule("str", choices=HOOK_LABELS),
    "service_probe_timeout": _seconds(),
    "service_resident_facts": _count(0),  # 0: never hold facts in memory
    "service_max_body_bytes": _count(1),
}

_KIND_NAMES = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "globs": "a list of strings",
    "path": "a path (a string)",
    "url": "a URL (a string)",
    "day": "a day as YYYY-MM-DD (a string)",
}


def _shown(value: Any, rule: Rule) -> str:
    """A refused value as a message may quote it: secrets never, URLs masked."""
    if rule.secret and rule.kind != "url":
        return f"a {type(value).__name__} (not shown)"
    if isinstance(value, str):
        return repr(mask_url(value))
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if not isinstance(value, int | bool) else str(value).lower()


def _read(rule: Rule, raw: Any, source: str) -> Any:
    """``raw`` as the setting's type. ``source`` is ``toml`` (TOML's own types must
    match: ``top_k = "5"`` is refused), ``env`` (text, parsed) or ``flag`` (a flag's or a
    library caller's value: the type, or text to parse)."""
    text = isinstance(raw, str) and source != "toml"
    wrong = _Invalid(f"must be {_KIND_NAMES[rule.kind]}, got {_shown(raw, rule)}")
    if rule.kind == "int":
        if isinstance(raw, bool):
            raise wrong
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and source == "flag" and raw.is_integer():
            return int(raw)
        if text:
            try:
                return int(raw.strip())
            except ValueError:
                raise wrong from None
        raise wrong
    if rule.kind == "float":
        if isinstance(raw, bool):
            raise wrong
        if isinstance(raw, int | float):
            value = float(raw)
        elif text:
            try:
                value = float(raw.strip())
            except ValueError:
                raise wrong from None
        else:
            raise wrong
        if value != value or value in (float("inf"), float("-inf")):
            raise _Invalid(f"must be a finite number, got {_shown(raw, rule)}")
        return value
    if rule.kind == "globs":
        if isinstance(raw, str) and source != "toml":
            return tuple(p.strip() for p in raw.split(",") if p.strip())
        if isinstance(raw, list | tuple) and all(isinstance(p, str) for p in raw):
            if any(not p.strip() for p in raw):
                raise _Invalid("must not hold an empty pattern")
            return tuple(raw)
        raise wrong
    if rule.kind == "path":
        if isinstance(raw, os.PathLike) and source == "flag":
            raw = os.fspath(raw)
        if not isinstance(raw, str) or not raw.strip():
            raise _Invalid(f"must be a path, got {_shown(raw, rule)}")
        return Path(raw).expanduser()
    if not isinstance(raw, str):
        raise wrong
    return raw


def _check(rule: Rule, value: Any) -> None:
    """Refuse a value outside the setting's range or choices (``_Invalid``)."""
    got = _shown(value, rule)
    if rule.kind in ("int", "float"):
        low, high = rule.low, rule.high
        if low is not None and high is not None and not low <= value <= high:
            raise _Invalid(f"must be from {low:g} to {high:g}, got {got}")
        if low is not None and rule.above and value <= low:
            raise _Invalid(f"must be more than {low:g}, got {got}")
        if low is not None and value < low:
            raise _Invalid(f"must be at least {low:g}, got {got}")
        return
    if rule.kind == "str":
        if rule.choices and value not in rule.choices:
            raise _Invalid(f"must be one of {', '.join(rule.choices)}; got {got}")
        if not rule.empty and not value.strip():
            raise _Invalid("must not be empty")
    elif rule.kind == "url":
        _check_url(rule, value)
    elif rule.kind == "globs":
        _check_globs(value)
    elif rule.kind == "day" and (value.strip() or not rule.empty):
        try:
            _dt.date.fromisoformat(value.strip())
        except ValueError:
            raise _Invalid(f"must be a day as YYYY-MM-DD, got {got}") from None


def _check_globs(patterns: tuple[str, ...]) -> None:
    """Every glob compiles (``[]x`` does not): refused here, not by the first scan."""
    import re
    import warnings

    from pipeline.vault.scan import compile_glob  # the scan module reads these settings

    for pattern in patterns:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # "possible nested set"
                compile_glob(pattern)
        except re.error:
            raise _Invalid(f"holds {pattern!r}, which is not a valid glob") from None


def _check_url(rule: Rule, value: str) -> None:
    scheme, sep, _ = value.partition("://")
    got = _shown(value, rule)
    if not sep or not scheme:
        raise _Invalid(f"must be a URL (scheme://…), got {got}")
    if rule.schemes and scheme.lower() not in rule.schemes:
        raise _Invalid(f"must be a {' / '.join(rule.schemes)} URL, got {got}")
    authority = value.partition("://")[2].split("/", 1)[0]
    if not rule.userinfo and ("@" in authority or url_password(value) is not None):
        raise _Invalid(
            f"takes no user or password, got {got}: set them apart (graph_user, and "
            "graph_password or graph_password_file; docs/configuration.md)"
        )
    if rule.port:
        from urllib.parse import urlsplit

        try:
            urlsplit(value).port  # noqa: B018 - parsing it is the check
        except ValueError as exc:
            reason = "a port from 0 to 65535" if "range" in str(exc) else "a numeric port"
            raise _Invalid(f"must have {reason}, got {got}{_PERCENT_HINT}") from None


def _setting(name: str, raw: Any, source: str, where: str) -> Any:
    """``raw`` read and checked as the setting ``name``; ConfigError naming ``where`` (the
    file and key, the variable or the flag) and the reason when it is refused."""
    rule = RULES[name]
    if rule.secret and isinstance(raw, str):
        # Hidden before anything may quote it, this error included.
        remember_secret(url_password(raw) if rule.kind == "url" else raw)
    try:
        value = _read(rule, raw, source)
        _check(rule, value)
    except _Invalid as exc:
        raise ConfigError(f"{where} {exc}") from None
    return value


def _flatten_toml(data: Mapping[str, Any], path: Path) -> dict[str, tuple[Any, str]]:
    """The file's settings: name -> (value, where: the file and its ``[section] key``)."""
    flat: dict[str, tuple[Any, str]] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            for sub, subvalue in value.items():
                flat[f"{key}_{sub}"] = (subvalue, f"{path}: [{key}] {sub}")
        else:
            flat[key] = (value, f"{path}: {key}")
    unknown = sorted(
        where.split(": ", 1)[1] for name, (_, where) in flat.items() if name not in _FIELDS
    )
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    return flat


#: Variables of the prefix that are no setting: the vault, the state dir and the service's
#: token (`serve --token`), and those of the test, bench and fault suites.
_OTHER_VARIABLES = ("VAULT_KO_VAULT", "VAULT_KO_STATE_DIR", "VAULT_KO_SERVICE_TOKEN")
_OTHER_PREFIXES = ("VAULT_KO_TEST_", "VAULT_KO_BENCH_", "VAULT_KO_FAULTS_")
#: The unknown variables this process has warned of.
_SAID_UNKNOWN: set[str] = set()


def _say_unknown_variables(env: Mapping[str, str]) -> None:
    """A warning (once a process) for each VAULT_KO_ variable that names no setting: a
    misspelt one ("VAULT_KO_QUERY_TOPK") is otherwise ignored without a word, where an
    unknown key of vault-ko.toml stops the command."""
    import difflib

    known = {ENV_PREFIX + name.upper() for name in _FIELDS}
    for name in env:
        if (
            not name.startswith(ENV_PREFIX)
            or name in known
            or name in _OTHER_VARIABLES
            or name.startswith(_OTHER_PREFIXES)
            or name in _SAID_UNKNOWN
        ):
            continue
        _SAID_UNKNOWN.add(name)
        close = difflib.get_close_matches(name, sorted(known), n=1)
        logging.getLogger(__name__).warning(
            "%s names no setting, so it is not used%s (vault-ko config show lists them)",
            name,
            f"; did you mean {close[0]}?" if close else "",
        )


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
        for name, (raw, where) in _flatten_toml(data, toml_path).items():
            values[name] = _setting(name, raw, "toml", where)

    for name in _FIELDS:
        env_name = ENV_PREFIX + name.upper()
        if env_name in env and env[env_name] != "":
            values[name] = _setting(name, env[env_name], "env", env_name)
    _say_unknown_variables(env)

    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        if name not in _FIELDS:
            raise ConfigError(f"unknown setting {name!r}")
        # A flag checked its own range already; a library caller knows the setting's name.
        values[name] = _setting(name, raw, "flag", name)

    state_dir = Path(env.get(ENV_PREFIX + "STATE_DIR") or root / STATE_DIR)
    settings = Settings(vault=root, state_dir=state_dir, **values)
    remember_secrets(settings)
    return settings
