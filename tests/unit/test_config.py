"""Settings precedence, vault selection, coercion errors and secret masking."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import find_vault, load_settings, mask_url
from pipeline.errors import ConfigError


def write_toml(vault: Path, text: str) -> None:
    (vault / "vault-ko.toml").write_text(text, encoding="utf-8")


def test_defaults_then_toml_then_env_then_flags(tmp_path: Path) -> None:
    assert load_settings(tmp_path, env={}).query_top_k == 20
    write_toml(tmp_path, "[query]\ntop_k = 7\nhits = 9\n")
    s = load_settings(tmp_path, env={})
    assert (s.query_top_k, s.query_hits) == (7, 9)
    s = load_settings(tmp_path, env={"VAULT_KO_QUERY_TOP_K": "5"})
    assert (s.query_top_k, s.query_hits) == (5, 9)
    s = load_settings(tmp_path, env={"VAULT_KO_QUERY_TOP_K": "5"}, overrides={"query_top_k": 3})
    assert s.query_top_k == 3


def test_lists_from_toml_and_env(tmp_path: Path) -> None:
    write_toml(tmp_path, '[vault]\nadr_globs = ["records/**"]\n')
    assert load_settings(tmp_path, env={}).vault_adr_globs == ("records/**",)
    env = {"VAULT_KO_VAULT_ADR_GLOBS": "a/**, b/**"}
    assert load_settings(tmp_path, env=env).vault_adr_globs == ("a/**", "b/**")


def test_state_dir_and_default_kodb_file(tmp_path: Path) -> None:
    s = load_settings(tmp_path, env={})
    assert s.state_dir == tmp_path.resolve() / ".vault-ko"
    assert s.effective_kodb_url == f"sqlite:///{tmp_path.resolve() / '.vault-ko' / 'ko.db'}"
    pg = "postgresql+psycopg://u:pw@h/db"
    assert load_settings(tmp_path, env={"VAULT_KO_KODB_URL": pg}).effective_kodb_url == pg


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[query]\ntop_k = 'many'\n", r"vault-ko.toml: \[query\] top_k must be an integer"),
        ("[graph]\nretry_deadline = nan\n", "finite"),
        ("[graph]\nnot_a_setting = 1\n", "unknown setting"),
        ("[query\n", "vault-ko.toml"),
    ],
)
def test_bad_toml_is_one_clear_error(tmp_path: Path, toml: str, message: str) -> None:
    write_toml(tmp_path, toml)
    with pytest.raises(ConfigError, match=message):
        load_settings(tmp_path, env={})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="VAULT_KO_QUERY_HITS"):
        load_settings(tmp_path, env={"VAULT_KO_QUERY_HITS": "twenty"})


def test_vault_flag_beats_env_beats_upward_search(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    for d in (a, b, c):
        d.mkdir()
    (c / ".vault-ko").mkdir()
    deep = c / "x" / "y"
    deep.mkdir(parents=True)
    env = {"VAULT_KO_VAULT": str(b)}
    assert find_vault(a, env, deep) == a.resolve()
    assert find_vault(None, env, deep) == b.resolve()
    assert find_vault(None, {}, deep) == c.resolve()  # nearest folder upward with .vault-ko/
    assert find_vault(None, {}, a) == a.resolve()  # else the current directory


def test_upward_search_finds_a_toml_too(tmp_path: Path) -> None:
    write_toml(tmp_path, "")
    (tmp_path / "notes").mkdir()
    assert find_vault(None, {}, tmp_path / "notes") == tmp_path.resolve()


def test_missing_vault_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        find_vault(tmp_path / "nope", {}, tmp_path)


def test_positional_vault_means_the_same_as_the_flag(tmp_path: Path) -> None:
    from pipeline.cli._common import AppContext

    app = AppContext(vault=None)
    assert app.settings(str(tmp_path)).vault == tmp_path.resolve()


def test_secrets_are_masked(tmp_path: Path) -> None:
    env = {
        "VAULT_KO_GRAPH_PASSWORD": "hunter2",
        "VAULT_KO_KODB_URL": "postgresql+psycopg://ko:s3cret@db.example/ko",
        # The Bolt URL takes no password (refused at load); the ArcadeDB HTTP URL may.
        "VAULT_KO_GRAPH_HTTP_URL": "http://neo:pw@graph:2480",
    }
    shown = load_settings(tmp_path, env=env).masked()
    text = repr(shown)
    assert "hunter2" not in text and "s3cret" not in text and ":pw@" not in text
    assert shown["graph_password"] == "***"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("bolt://neo:pw@graph:7687", "bolt://neo:***@graph:7687"),
        ("bolt://vault:gr@ph:Pw0rd@127.0.0.1:7687", "bolt://vault:***@127.0.0.1:7687"),
        ("postgresql+psycopg://ko:s%40cr%3At@db/ko", "postgresql+psycopg://ko:***@db/ko"),
        ("bolt://:pw@graph", "bolt://:***@graph"),
        (
            "postgresql://db/ko?user=ko&password=s3cret&sslmode=require",
            "postgresql://db/ko?user=ko&password=***&sslmode=require",
        ),
        (
            "graph at bolt://u:pw@h:1 unavailable: connect to h:1 failed; mail ops@example.org",
            "graph at bolt://u:***@h:1 unavailable: connect to h:1 failed; mail ops@example.org",
        ),
        (
            "Given URI: 'bolt://user:secret@127.0.0.1:1'.",
            "Given URI: 'bolt://user:***@127.0.0.1:1'.",
        ),
        (
            '{"url": "bolt://u:p@h",\n "kodb": "sqlite:///x.db"}',
            '{"url": "bolt://u:***@h",\n "kodb": "sqlite:///x.db"}',
        ),
        ("bolt://graph:7687", "bolt://graph:7687"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("sqlite:////tmp/a:b@c.db", "sqlite:////tmp/a:b@c.db"),
    ],
)
def test_mask_url_hides_every_password_of_every_url_in_a_text(text: str, shown: str) -> None:
    assert mask_url(text) == shown


def test_config_show_json_masks_and_reports_precedence(tmp_path: Path) -> None:
    write_toml(tmp_path, "[query]\ntop_k = 11\n")
    result = CliRunner().invoke(
        cli,
        ["--vault", str(tmp_path), "config", "show", "--json"],
        env={"VAULT_KO_GRAPH_PASSWORD": "hunter2"},
    )
    assert result.exit_code == 0, result.output
    assert '"query_top_k": 11' in result.output
    assert "hunter2" not in result.output


def test_cli_log_lines_mask_the_passwords_of_urls() -> None:
    import logging

    from pipeline.cli.root import _MaskingFormatter

    record = logging.LogRecord(
        "neo4j", logging.DEBUG, __file__, 1, "opening %s", ("bolt://u:hunter2@h:7687",), None
    )
    line = _MaskingFormatter("%(name)s: %(message)s").format(record)
    assert line == "neo4j: opening bolt://u:***@h:7687"


def test_a_library_logging_at_debug_prints_nothing_without_verbose(tmp_path: Path) -> None:
    # A fresh process: the root logger is the CLI's alone (pytest installs its own).
    code = (
        "import logging, sys\n"
        "import click\n"
        "from pipeline.cli.root import cli\n"
        "@cli.command('log-probe')\n"
        "def probe():\n"
        "    chatty = logging.getLogger('chatty_library')\n"
        "    chatty.setLevel(logging.DEBUG)  # as bm25s does for its own logger\n"
        "    chatty.debug('building index')\n"
        "    chatty.warning('a real warning')\n"
        "cli(sys.argv[1:])\n"
    )

    def stderr(*flags: str) -> str:
        args = [sys.executable, "-c", code, "--vault", str(tmp_path), *flags, "log-probe"]
        return subprocess.run(args, capture_output=True, text=True, check=True).stderr

    quiet, loud = stderr(), stderr("-vv")
    assert "a real warning" in quiet and "building index" not in quiet
    assert "building index" in loud


PASSWORDS = [
    "Kp7 SecretQ",  # a space: the URL's password no longer ends at whitespace
    "pa ss@wo:rd",
    "sl/ash#hash?q",
    "per%cent&amp=eq;semi",
    "quote'double\"back\\slash",
    "ünïcødé пароль 密码",
    "tab\there",
]


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_configured_password_is_masked_whatever_its_characters(
    tmp_path: Path, password: str
) -> None:
    """Issue 35, item 5: the URLs' passwords are found by parsing the configured URLs, and
    every message that quotes one (an error, a degraded reason, a log line) hides it."""
    env = {
        "VAULT_KO_KODB_URL": f"postgresql+psycopg://postgres:{password}@127.0.0.1:5499/rt",
        "VAULT_KO_GRAPH_HTTP_URL": f"http://root:{quote(password, safe=' @:')}@127.0.0.1:1",
    }
    settings = load_settings(tmp_path, env=env)
    for url in (settings.kodb_url, settings.graph_http_url):
        assert url is not None
        for text in (url, f"graph unavailable: cannot reach {url}: refused", repr({"u": url})):
            shown = mask_url(text)
            assert password not in shown, shown
            assert "***" in shown
    assert password not in repr(settings.masked())
    assert mask_url("sqlite:////tmp/a:b@c.db") == "sqlite:////tmp/a:b@c.db"


def test_a_variable_of_the_prefix_that_names_no_setting_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline import config

    monkeypatch.setattr(config, "_SAID_UNKNOWN", set())  # once a process: this test's
    env = {
        "VAULT_KO_SERVICE_TOKEN": "t0k3n",  # serve's own option
        "VAULT_KO_QUERY_TOPK": "5",
        "VAULT_KO_TEST_PG_URL": "postgresql://x",  # the suites' own: no warning
        "VAULT_KO_STATE_DIR": str(tmp_path / "state"),
        "VAULT_KO_QUERY_TOP_K": "7",
    }
    with caplog.at_level("WARNING", logger="pipeline.config"):
        settings = load_settings(tmp_path, env=env)
        load_settings(tmp_path, env=env)
    assert settings.query_top_k == 7
    assert [r.getMessage() for r in caplog.records] == [
        "VAULT_KO_QUERY_TOPK names no setting, so it is not used; did you mean "
        "VAULT_KO_QUERY_TOP_K? (vault-ko config show lists them)"
    ]
