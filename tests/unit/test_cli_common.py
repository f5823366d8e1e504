"""The CLI shells' shared plumbing: progress without a terminal."""

from __future__ import annotations

import pytest

from pipeline.cli import _common


def test_without_a_terminal_a_long_job_says_its_progress_in_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    now = [1000.0]
    monkeypatch.setattr(_common.time, "monotonic", lambda: now[0])
    with _common.progress_bar("embedding notes", enabled=True) as update:
        assert update is not None
        update(10, 1398)  # at once: a short job says nothing
        now[0] += 12
        update(340, 1398)
        now[0] += 5
        update(400, 1398)  # within 30 s of the last line
        now[0] += 30
        update(1398, 1398)
    assert capsys.readouterr().err.splitlines() == [
        "embedding notes: 340/1,398 (24 %), 12 s",
        "embedding notes: 1,398/1,398 (100 %), 47 s",
    ]


def test_no_progress_is_said_when_it_is_not_wanted() -> None:
    with _common.progress_bar("embedding notes", enabled=False) as update:
        assert update is None


def test_a_vault_from_the_environment_is_named_so_in_its_error(tmp_path) -> None:
    from click.testing import CliRunner

    from pipeline.cli import cli

    result = CliRunner().invoke(
        cli, ["config", "show"], env={"VAULT_KO_VAULT": str(tmp_path / "none")}
    )
    # The entry point prints a VaultKoError as one line, with its exit code (3).
    assert result.exception is not None and result.exception.exit_code == 3  # type: ignore[attr-defined]
    assert "(from VAULT_KO_VAULT) is not a directory" in str(result.exception)


def test_two_vaults_named_by_the_flag_and_the_argument_are_refused(tmp_path) -> None:
    from click.testing import CliRunner

    from pipeline.cli import cli

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    args = ["--vault", str(tmp_path / "a"), "ingest", str(tmp_path / "b")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "two vaults given" in result.output
    assert (
        not (tmp_path / "a" / ".vault-ko").exists() and not (tmp_path / "b" / ".vault-ko").exists()
    )
