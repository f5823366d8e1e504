"""`vault-ko load-context`'s refusals, made before any store is opened or prompt read."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pipeline.cli import cli


def refused(vault: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--vault", str(vault), "load-context", *args])
    assert result.exit_code == 2, result.output
    return result.output


def test_packs_are_never_written_where_the_vault_would_read_them_as_notes(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    (vault / "wiki").mkdir(parents=True)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("why redis?\n")
    for out in (vault / "packs", vault / "wiki"):
        said = refused(vault, str(prompts), "--out", str(out), "--format", "md")
        assert "inside the vault" in said
        assert not (vault / "packs").exists()


def test_an_input_that_is_the_packs_file_is_refused_and_kept(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    out = tmp_path / "same"
    out.mkdir()
    packs = out / "packs.jsonl"
    packs.write_text('{"id": "s1", "prompt": "why redis?"}\n')
    said = refused(vault, str(packs), "--out", str(out))
    assert "is the input" in said
    assert packs.read_text() == '{"id": "s1", "prompt": "why redis?"}\n'


def test_a_jsonl_pack_file_may_be_written_in_the_vault_where_no_note_is_read_from_it(
    tmp_path: Path,
) -> None:
    from pipeline.cli.session import _check_out_dir
    from pipeline.config import load_settings

    vault = tmp_path / "vault"
    vault.mkdir()
    settings = load_settings(vault, env={}, cwd=vault)
    _check_out_dir(settings, vault / "packs", str(tmp_path / "prompts.txt"), "jsonl")  # no error
