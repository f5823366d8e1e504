"""Issue 35, items 5, 9 and 11: every setting checked once at load (file and key, variable
or flag named, exit 3), URL passwords masked by parsing whatever their characters, a
non-numeric port refused in one line, and a state dir that cannot be written refused
before a writing command opens anything (exit 2)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import (
    MAX_COUNT,
    RETRIEVALS,
    RULES,
    Settings,
    load_settings,
    mask_url,
    remember_secret,
)
from pipeline.errors import EXIT_INPUT, EXIT_UNAVAILABLE, ConfigError, VaultKoError

VAULT_KO = str(Path(sys.executable).parent / "vault-ko")


def write_toml(vault: Path, text: str) -> None:
    (vault / "vault-ko.toml").write_text(text, encoding="utf-8")


# --- every setting has a rule, and the defaults pass it --------------------------------
def test_every_setting_has_a_rule_and_every_default_passes(tmp_path: Path) -> None:
    names = {f.name for f in fields(Settings)} - {"vault", "state_dir", "extra"}
    assert set(RULES) == names
    load_settings(tmp_path, env={})  # the defaults are not checked; each one is, as a flag
    defaults = Settings(vault=tmp_path, state_dir=tmp_path)
    overrides = {n: getattr(defaults, n) for n in names if getattr(defaults, n) is not None}
    load_settings(tmp_path, env={}, overrides=overrides)


def test_the_bounds_are_the_query_modules() -> None:
    from pipeline import query

    assert MAX_COUNT == query.MAX_COUNT
    assert tuple(RETRIEVALS) == tuple(query.RETRIEVALS)


# --- the values, and one bad value per kind of rule -----------------------------
@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[query]\ntop_k = -5\n", "[query] top_k must be from 0 to 10000, got -5"),
        ("[query]\nhits = -5\n", "[query] hits must be from 1 to 10000, got -5"),
        ("[query]\nhits = 0\n", "[query] hits must be from 1 to 10000, got 0"),
        ("[query]\nfacts_per_subject = -1\n", "[query] facts_per_subject must be from 0"),
        ("[query]\ntop_k = 10001\n", "[query] top_k must be from 0 to 10000, got 10001"),
        ("[query]\ntop_k = 2.5\n", "[query] top_k must be an integer, got 2.5"),
        ("[query]\ntop_k = '5'\n", "[query] top_k must be an integer, got '5'"),
        ("[query]\ntop_k = true\n", "[query] top_k must be an integer, got true"),
        ("[hook]\nbudget = -1.0\n", "[hook] budget must be more than 0, got -1"),
        ("[hook]\nbudget = 0\n", "[hook] budget must be more than 0, got 0"),
        ("[hook]\nmax_chars = 0\n", "[hook] max_chars must be at least 1, got 0"),
        ("[embed]\nbatch_size = 0\n", "[embed] batch_size must be at least 1, got 0"),
        ("[embed]\nruntime = 'gpu'\n", "[embed] runtime must be one of auto, onnx, torch"),
        ("[embed]\nmodel = ''\n", "[embed] model must not be empty"),
        ("[query]\nretrieval = 'sparse'\n", "[query] retrieval must be one of dense, hybrid"),
        ("[graph]\ndialect = 'janus'\n", "[graph] dialect must be one of memgraph, neo4j"),
        ("[graph]\nretry_attempts = 0\n", "[graph] retry_attempts must be at least 1"),
        ("[graph]\nconnect_timeout = 0\n", "[graph] connect_timeout must be more than 0"),
        ("[graph]\nretry_deadline = -1\n", "[graph] retry_deadline must be at least 0"),
        ("[graph]\ncall_timeout = inf\n", "[graph] call_timeout must be a finite number"),
        ("[graph]\ncandidates = 0\n", "[graph] candidates must be at least 1"),
        ("[graph]\nurl = 'http://h:7474'\n", "[graph] url must be a bolt / bolt+s"),
        ("[graph]\nurl = 'bolt://h:notaport'\n", "[graph] url must have a numeric port"),
        ("[graph]\nurl = 'bolt://h:99999'\n", "[graph] url must have a port from 0 to 65535"),
        ("[graph]\nhttp_url = 'h:2480'\n", "[graph] http_url must be a URL"),
        ("[graph]\npassword_file = ''\n", "[graph] password_file must be a path"),
        ("[kodb]\nurl = 'ko.db'\n", "[kodb] url must be a URL (scheme://…), got 'ko.db'"),
        ("[vault]\nprivate_globs = 'a/**'\n", "[vault] private_globs must be a list of strings"),
        ("[vault]\nadr_globs = ['adr/**', '']\n", "[vault] adr_globs must not hold an empty"),
        ("[vault]\nparse_workers = -1\n", "[vault] parse_workers must be at least 0"),
        ("[vault]\nmax_note_bytes = 0\n", "[vault] max_note_bytes must be at least 1"),
        ("[vault]\nlanguage = 'klingon'\n", "[vault] language must be one of none, arabic"),
        ("[vault]\nlanguage = 'en'\n", "[vault] language must be one of none, arabic"),
        ("[calibration]\nmax_drift = -0.1\n", "[calibration] max_drift must be at least 0"),
        ("[calibration]\nmax_pairs = 0\n", "[calibration] max_pairs must be at least 1"),
        ("[freshness]\nmax_stale = -1\n", "[freshness] max_stale must be at least 0"),
        ("[freshness]\nmax_stale_ratio = 1.5\n", "[freshness] max_stale_ratio must be from 0"),
        ("[service]\nprobe_timeout = 0\n", "[service] probe_timeout must be more than 0"),
        ("[service]\nresident_facts = -1\n", "[service] resident_facts must be at least 0"),
        ("query_top_k = -5\n", "query_top_k must be from 0 to 10000, got -5"),
        ("[graph]\nnot_a_setting = 1\n", "unknown setting(s): [graph] not_a_setting"),
    ],
)
def test_a_bad_file_value_names_the_file_and_key(tmp_path: Path, toml: str, message: str) -> None:
    write_toml(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={})
    assert str(info.value) == f"{tmp_path.resolve() / 'vault-ko.toml'}: {message}" or (
        str(info.value).startswith(f"{tmp_path.resolve() / 'vault-ko.toml'}: {message}")
    ), str(info.value)
    assert info.value.exit_code == EXIT_INPUT


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("VAULT_KO_QUERY_TOP_K", "-5", "VAULT_KO_QUERY_TOP_K must be from 0 to 10000, got -5"),
        ("VAULT_KO_QUERY_HITS", "twenty", "VAULT_KO_QUERY_HITS must be an integer, got 'twenty'"),
        ("VAULT_KO_HOOK_BUDGET", "-1", "VAULT_KO_HOOK_BUDGET must be more than 0, got -1"),
        ("VAULT_KO_HOOK_BUDGET", "nan", "VAULT_KO_HOOK_BUDGET must be a finite number"),
        ("VAULT_KO_EMBED_BATCH_SIZE", "0", "VAULT_KO_EMBED_BATCH_SIZE must be at least 1, got 0"),
        ("VAULT_KO_QUERY_RETRIEVAL", "sparse", "VAULT_KO_QUERY_RETRIEVAL must be one of dense"),
        ("VAULT_KO_GRAPH_URL", "bolt://h:x", "VAULT_KO_GRAPH_URL must have a numeric port"),
        (
            "VAULT_KO_VAULT_EXCLUDE_GLOBS",
            "drafts/**,[]x",
            "VAULT_KO_VAULT_EXCLUDE_GLOBS holds '[]x', which is not a valid glob",
        ),
        ("VAULT_KO_QUERY_UNSYNCED", "maybe", "VAULT_KO_QUERY_UNSYNCED must be one of check, skip"),
    ],
)
def test_a_bad_variable_is_named(tmp_path: Path, name: str, raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_settings(tmp_path, env={name: raw})


def test_a_bad_override_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^query_hits must be from 1 to 10000, got 0$"):
        load_settings(tmp_path, env={}, overrides={"query_hits": 0})
    assert load_settings(tmp_path, env={}, overrides={"query_top_k": "4"}).query_top_k == 4


def test_good_values_of_every_kind_load(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        "[query]\ntop_k = 0\nretrieval = 'dense'\n[hook]\nbudget = 2\n"
        "[graph]\nurl = 'neo4j+s://graph.example:7687'\ndialect = 'neo4j'\n"
        "http_url = 'http://127.0.0.1:2480'\n[freshness]\nmax_stale_ratio = 1.0\n"
        "[vault]\nprivate_globs = ['private/**']\nlanguage = 'hungarian'\n",
    )
    s = load_settings(tmp_path, env={"VAULT_KO_VAULT_ADR_GLOBS": "a/**, b/**"})
    assert (s.query_top_k, s.query_retrieval, s.hook_budget) == (0, "dense", 2.0)
    assert isinstance(s.hook_budget, float)
    assert s.vault_adr_globs == ("a/**", "b/**")
    assert s.vault_private_globs == ("private/**",)
    assert s.vault_language == "hungarian"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[query]\ntop_k = -5\n", "[query] top_k must be from 0 to 10000, got -5"),
        ("[query]\nretrieval = 'sparse'\n", "[query] retrieval must be one of dense, hybrid"),
        ("[hook]\nbudget = -1.0\n", "[hook] budget must be more than 0, got -1"),
    ],
)
@pytest.mark.parametrize("command", [["config", "show"], ["query", "x", "--no-service"]])
def test_commands_refuse_a_bad_file_in_one_line_exit_3(
    tmp_path: Path, toml: str, message: str, command: list[str]
) -> None:
    write_toml(tmp_path, toml)
    result = CliRunner().invoke(cli, ["--vault", str(tmp_path), *command])
    assert isinstance(result.exception, ConfigError), result.output
    assert result.exception.exit_code == EXIT_INPUT
    assert message in str(result.exception) and "vault-ko.toml" in str(result.exception)


def test_the_entry_point_prints_one_line_for_a_bad_setting(tmp_path: Path) -> None:
    write_toml(tmp_path, "[embed]\nbatch_size = 0\n")
    done = subprocess.run(
        [VAULT_KO, "--vault", str(tmp_path), "ingest"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert done.returncode == EXIT_INPUT
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path.resolve() / 'vault-ko.toml'}: [embed] batch_size must be at least "
        "1, got 0"
    ]
    assert not (tmp_path / ".vault-ko").exists()  # refused before anything was written


# --- masking: every character class, raw and percent-encoded ---------------------------
#: One password per character class a URL parser trips on.
PASSWORDS = {
    "space": "Kp7 SecretQ",
    "at": "Pw@rd99x",
    "colon": "Pw:rd99x",
    "slash": "Pw/rd99x",
    "percent": "Pw%rd99x",
    "hash": "Pw#rd99x",
    "question": "Pw?rd99x",
    "non-ascii": "Pässwörd密码",
    "quotes": "Pw'rd\"99x",
    "backslash": "Pw\\rd99x",
    "all": "a b@c:d/e%f#g?h'i\"jü",
}


def _remembered(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    import pipeline.config as config

    fresh: set[str] = set()
    monkeypatch.setattr(config, "_SECRETS", fresh)
    return fresh


@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
@pytest.mark.parametrize("encoded", [False, True], ids=["raw", "percent-encoded"])
def test_a_url_password_is_masked_by_parsing_alone(
    password: str, encoded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing remembered: the URL in a text is parsed, its user info masked.
    _remembered(monkeypatch)
    written = quote(password, safe="") if encoded else password
    url = f"postgresql+psycopg://postgres:{written}@127.0.0.1:5499/rt"
    for text in (
        url,
        f"KO-DB at {url}: connection refused",
        f"error: could not reach '{url}'.",
        f'{{"url": "{url}", "next": "bolt://h:1"}}',
    ):
        shown = mask_url(text)
        assert "postgres:***@127.0.0.1:5499/rt" in shown, shown
        assert written not in shown
        for piece in ("Kp7", "SecretQ", "rd99x", "Pässwörd", "密码", "c:d/e"):
            if piece in written:
                assert piece not in shown, shown


@pytest.mark.parametrize("password", PASSWORDS.values(), ids=PASSWORDS.keys())
def test_a_loaded_password_is_masked_in_every_form_a_message_quotes(
    tmp_path: Path, password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    from urllib.parse import quote_plus

    import sqlalchemy as sa

    _remembered(monkeypatch)
    kodb = sa.URL.create(
        "postgresql+psycopg", "postgres", password, "127.0.0.1", 5499, "rt"
    ).render_as_string(hide_password=False)
    env = {
        "VAULT_KO_KODB_URL": kodb,
        "VAULT_KO_GRAPH_HTTP_URL": f"http://root:{quote(password, safe='')}@127.0.0.1:1",
    }
    settings = load_settings(tmp_path, env=env)
    forms = {
        password,
        quote(password, safe=""),
        quote_plus(password),
        json.dumps(password)[1:-1],
        json.dumps(password, ensure_ascii=False)[1:-1],
        repr(password)[1:-1],
    }
    for form in forms:
        # A driver that quotes the password alone, out of its URL, in any encoding.
        assert form not in mask_url(f"auth failed for user postgres with password {form} !")
    for text in (kodb, env["VAULT_KO_GRAPH_HTTP_URL"], json.dumps({"u": kodb}), repr(kodb)):
        assert password not in mask_url(text)
    assert password not in json.dumps(settings.masked(), ensure_ascii=False)


def test_a_password_file_is_masked_once_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _remembered(monkeypatch)
    secret = tmp_path / "pw"
    secret.write_text("file Secret#1\n", encoding="utf-8")
    settings = load_settings(tmp_path, env={"VAULT_KO_GRAPH_PASSWORD_FILE": str(secret)})
    assert settings.password() == "file Secret#1"
    assert mask_url("refused password file Secret#1") == "refused password ***"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # Spaces: the user info runs to the next token of the line holding an "@".
        (
            "cannot reach postgresql://u:Kp7 SecretQ@h:5/db: refused",
            "cannot reach postgresql://u:***@h:5/db: refused",
        ),
        ("bolt://root:pa ss@wo:rd@127.0.0.1:1 down", "bolt://root:***@127.0.0.1:1 down"),
        # A port is no password, and an "@" on another line or after another URL is left.
        ("http://127.0.0.1:8080/docs mail ops@example.org", None),
        ("bolt://h:notaport\nops@example.org", None),
        ("bolt://h:bad bolt://u@h", None),
        ("http://[::1]:8080 ops@example.org", None),
        ("postgresql://db/ko?user=ko&pwd=s3&x=1#f", "postgresql://db/ko?user=ko&pwd=***&x=1#f"),
        ("postgresql://db/ko?password=s3#frag", "postgresql://db/ko?password=***#frag"),
        ("no url: a:b@c", None),
        ("sqlite:///tmp/a:b@c.db", None),
        ("http://h/path:x@y", None),
    ],
)
def test_mask_url_edges(text: str, shown: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    _remembered(monkeypatch)
    assert mask_url(text) == (text if shown is None else shown)


def test_an_invalid_url_is_refused_with_its_password_masked(tmp_path: Path) -> None:
    url = "bolt://root:GrPw9 Secret@127.0.0.1:notaport"
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={"VAULT_KO_GRAPH_URL": url})
    text = str(info.value)
    assert text.startswith("VAULT_KO_GRAPH_URL takes no user or password, got ")
    assert "'bolt://root:***@127.0.0.1:notaport'" in text and "GrPw9" not in text


@pytest.mark.parametrize(
    "url",
    ["bolt://root:pw@127.0.0.1:7687", "bolt://root@127.0.0.1", "neo4j://u:p/a@ss@h:7687"],
)
def test_a_graph_url_with_user_info_is_refused_at_load(url: str, tmp_path: Path) -> None:
    # The neo4j driver refuses it only at the first connection, as "invalid configuration".
    with pytest.raises(ConfigError, match="graph_password_file") as info:
        load_settings(tmp_path, env={"VAULT_KO_GRAPH_URL": url})
    assert str(info.value).startswith("VAULT_KO_GRAPH_URL takes no user or password, got ")
    assert "pw" not in str(info.value).replace("password", "")


def test_remember_secret_ignores_short_and_empty_secrets() -> None:
    remember_secret(None)
    remember_secret("")
    remember_secret("ab")  # too short to look for in free text: "ab" stays in words
    assert mask_url("about tables") == "about tables"


# --- item 11: non-numeric ports, read-only state dirs -----------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres:Kp7 SecretQ@127.0.0.1:notaport/rt",
        "postgresql+psycopg://postgres:pa ss@wo:rd@127.0.0.1:5432/rt",  # a raw "@"
    ],
)
def test_a_kodb_url_without_a_numeric_port_is_one_line(url: str) -> None:
    from pipeline.kodb.engine import parse_url

    with pytest.raises(ConfigError) as info:
        parse_url(url)
    text = str(info.value)
    assert text.startswith("KO-DB URL 'postgresql+psycopg://postgres:***@127.0.0.1:")
    assert "has a port that is not a number" in text
    for piece in ("Kp7", "SecretQ", "pa ss", "wo:rd"):
        assert piece not in text


def test_query_with_a_non_numeric_kodb_port_says_one_line(tmp_path: Path) -> None:
    url = "postgresql+psycopg://postgres:Kp7 SecretQ@127.0.0.1:notaport/rt"
    done = subprocess.run(
        [VAULT_KO, "--vault", str(tmp_path), "query", "warm cache", "--no-service"],
        capture_output=True,
        text=True,
        env={**os.environ, "VAULT_KO_KODB_URL": url, "COLUMNS": "300", "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == EXIT_INPUT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "has a port that is not a number" in lines[0], done.stderr
    assert "Kp7" not in done.stderr + done.stdout


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` made read-only: its mode for a user, a read-only bind mount for root
    (whom no mode stops)."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)
        return
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize(
    "command",
    [
        ["ingest"],
        ["sync"],
        ["embed"],
        ["calibrate"],
        ["facts", "import", "facts.jsonl"],
        ["serve"],
        ["graph", "up"],
    ],
)
def test_a_read_only_state_dir_is_refused_first_in_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    vault = tmp_path / "vault"
    state = vault / ".vault-ko"
    state.mkdir(parents=True)
    (vault / "facts.jsonl").write_text("", encoding="utf-8")
    with read_only(state):
        args = [str(vault / a) if a.endswith(".jsonl") else a for a in command]
        result = CliRunner().invoke(cli, ["--vault", str(vault), *args])
    assert isinstance(result.exception, VaultKoError), result.output
    assert result.exception.exit_code == EXIT_UNAVAILABLE
    text = str(result.exception)
    assert text.startswith(f"vault-ko {' '.join(command[:2])} cannot write to {state}: ")
    assert "VAULT_KO_STATE_DIR" in text
    assert list(state.iterdir()) == []  # nothing was opened there


def test_a_state_dir_behind_a_file_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("", encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["--vault", str(tmp_path), "ingest"],
        env={"VAULT_KO_STATE_DIR": str(tmp_path / "blocker" / "state")},
    )
    assert isinstance(result.exception, VaultKoError)
    assert result.exception.exit_code == EXIT_UNAVAILABLE
    assert "vault-ko ingest cannot write to" in str(result.exception)
