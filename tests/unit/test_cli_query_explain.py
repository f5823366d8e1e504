"""`vault-ko query --explain` (issue 36, item 3): a legend for the text and md output; with
JSON it is a usage error, before any store is opened."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pipeline.cli import cli


def test_explain_with_json_is_a_usage_error_before_anything_is_opened(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--vault", str(tmp_path), "query", "why redis?", "--json", "--explain"]
    )
    assert result.exit_code == 2
    assert "--explain describes the text and md output" in result.output
    assert not (tmp_path / ".vault-ko" / "ko.db").exists()


def test_explain_is_in_the_help_of_both_query_commands() -> None:
    from pipeline.cli.query import query_standalone

    for command, args in ((cli, ["query", "--help"]), (query_standalone, ["--help"])):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 0 and "--explain" in result.output


def test_json_with_another_format_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--vault", str(tmp_path), "query", "why redis?", "--json", "--format", "md"]
    )
    assert result.exit_code == 2 and "--json and --format md: give one of them" in result.output
    assert not (tmp_path / ".vault-ko" / "ko.db").exists()
