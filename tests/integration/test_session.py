"""`vault-ko load-context` on the real local ArcadeDB with the real model and sample vault:
packs equal single answers, bad lines, resume, empty input, the graph stopped midway."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.app import App
from pipeline.cli import cli
from pipeline.config import Settings
from pipeline.embed import batch_invariant
from pipeline.graph.local import LocalGraph
from pipeline.query import Pipeline, QueryOptions
from pipeline.render import to_dict
from pipeline.session import load_context
from pipeline.sync import sync_vault

EXAMPLE_VAULT = Path(__file__).resolve().parents[2] / "examples" / "vault"
EXAMPLE_PROMPTS = EXAMPLE_VAULT.parent / "prompts.txt"
OFF_TOPIC = [
    "recipe for banana bread with walnuts",
    "how tall is the eiffel tower",
    "mi a legjobb gulyásleves recept?",
    "who is Michael Nygard?",  # no_match, though ADR 0001 holds the name
]
#: Beside a question asking for a period (searched deeper, hybrid fusing more hits), each
#: of these had been labelled from the other's depth: "köszi!" moderate, alone weak.
BESIDE_A_PERIOD = [
    "the weather in Budapest tomorrow",
    "what did we do in March?",
    "köszi!",
    "write a haiku about autumn",
]


def copy_vault(dest: Path) -> Path:
    shutil.copytree(EXAMPLE_VAULT, dest, ignore=shutil.ignore_patterns(".vault-ko"))
    return dest


def prompts() -> list[str]:
    lines = []
    if EXAMPLE_PROMPTS.is_file():
        lines = [ln.strip() for ln in EXAMPLE_PROMPTS.read_text("utf-8").splitlines()]
    lines = [ln for ln in lines if ln] or ["what does the vault know about the warm cache?"]
    return lines + OFF_TOPIC + BESIDE_A_PERIOD


@pytest.fixture(scope="module")
def synced(local_graph: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The sample vault synced into the session's graph (ingest, embed, calibrate)."""
    vault = copy_vault(tmp_path_factory.mktemp("session") / "vault")
    settings = local_graph.settings(vault, embed_long_notes="passages")
    with App(settings).pipeline() as p:
        sync_vault(p.settings, p.kodb, p.graph, p.embedder)
    yield settings


@pytest.fixture
def pipeline(synced: Settings) -> Iterator[Pipeline]:
    with App(synced).pipeline() as p:
        # Other modules empty the shared graph between tests: make sure ours is there.
        sync_vault(p.settings, p.kodb, p.graph, p.embedder)
        yield p


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("timings_ms", "id", "prompt")}


def read_packs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("held", [True, False], ids=["facts held", "through SQL"])
@pytest.mark.parametrize("search", ["exact", "index"])
def test_packs_equal_single_answers(
    pipeline: Pipeline, tmp_path: Path, search: str, held: bool
) -> None:
    if not batch_invariant():
        pytest.fail("torch loaded before pipeline.embed set MKL strict mode; batches may differ")
    texts = prompts()
    batch = pipeline
    if not held:  # the same stores; the batch may not hold KO-DB's facts in memory
        app = pipeline.app
        settings = app.settings.replace(service_resident_facts=0)
        batch = App(settings, kodb=app.kodb, graph=app.graph, embedder=app.embedder).pipeline()
    report = load_context(batch, texts, tmp_path / "out", search=search, chunk_size=16)  # type: ignore[arg-type]
    assert (report.resident_facts > 0) is held
    packs = read_packs(tmp_path / "out" / "packs.jsonl")
    # A pack of a no_match prompt is empty: no word lookup is spent on it (DESIGN §9).
    alone = QueryOptions.from_settings(pipeline.settings, word_matches=False)
    singles = [strip(to_dict(pipeline.ask(t, alone))) for t in texts]
    assert [p["prompt"] for p in packs] == texts
    assert [strip(p) for p in packs] == singles
    assert all(p["word_matches"] == [] for p in packs)
    assert pipeline.ask("who is Michael Nygard?").word_matches  # asked alone, it points
    assert report.search_path == search and report.modes == {"semantic": len(texts)}
    labels = {p["relevance"]["label"] for p in packs}
    assert "no_match" in labels and labels & {"strong", "moderate"}
    for p in packs:
        assert len(p["subjects"]) <= 20
        assert all(len(s["facts"]) <= 3 for s in p["subjects"])
        if p["relevance"]["label"] == "no_match":
            assert p["subjects"] == []


def test_cli_writes_one_pack_per_line_and_reports_bad_lines(
    synced: Settings, pipeline: Pipeline, tmp_path: Path, graph_env: Callable[..., dict[str, str]]
) -> None:
    note = next(iter(sorted((synced.vault / "sessions").glob("*.md"))))
    rel = note.relative_to(synced.vault).as_posix()
    lines = [
        "what does the vault know about the warm cache?",
        '{"id": "ok", "prompt": "why do we use Redis?"}',
        "{not json",
        "",
        rel,
        json.dumps({"id": "n", "note": rel}),
        '{"id": "x"}',
    ]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", "utf-8")
    out = tmp_path / "packs"
    result = CliRunner().invoke(
        cli,
        ["--vault", str(synced.vault), "load-context", str(src), "--out", str(out), "--json"],
        env=graph_env(synced),
    )
    assert result.exit_code == 1, result.output  # bad lines were skipped
    summary = json.loads(result.stdout)
    assert [b["line"] for b in summary["bad_lines"]] == [3, 7]  # line 4 is blank
    assert f"{src}:3: skipped: bad JSON" in result.stderr
    packs = read_packs(out / "packs.jsonl")
    assert [p["id"] for p in packs] == ["1", "ok", "5", "n"]
    assert summary["written"] == 4 and summary["modes"] == {"semantic": 4}
    # a note path (plain or JSON) is answered as the note's text, without the note itself:
    # its own cosine of 1 would be its first hit and its label every time
    assert packs[2]["prompt"] == packs[3]["prompt"] != rel
    for pack in packs[2:]:
        assert rel not in [h["path"] for h in pack["hits"]] and pack["hits"]
        assert pack["relevance"]["top_cosine"] < 0.99


def test_cli_empty_input_writes_an_empty_packs_file(
    synced: Settings, tmp_path: Path, graph_env: Callable[..., dict[str, str]]
) -> None:
    src = tmp_path / "empty.txt"
    src.write_text("", "utf-8")
    out = tmp_path / "packs"
    result = CliRunner().invoke(
        cli,
        ["--vault", str(synced.vault), "load-context", str(src), "--out", str(out)],
        env=graph_env(synced),
    )
    assert result.exit_code == 0, result.output
    assert (out / "packs.jsonl").read_bytes() == b""
    assert "wrote 0 pack(s)" in result.stdout


def test_cli_md_format_and_resume(
    synced: Settings, pipeline: Pipeline, tmp_path: Path, graph_env: Callable[..., dict[str, str]]
) -> None:
    texts = prompts()
    src = tmp_path / "in.txt"
    out = tmp_path / "md"
    base = ["--vault", str(synced.vault), "load-context", "-", "--out", str(out)]
    half = "\n".join(texts[:4]) + "\n"
    first = CliRunner().invoke(
        cli, [*base, "--format", "md", "--json"], input=half, env=graph_env(synced)
    )
    assert first.exit_code == 0, first.output
    assert sorted(f.name for f in out.glob("*.md")) == sorted(f"{i}.md" for i in range(1, 5))
    src.write_text("\n".join(texts) + "\n", "utf-8")
    again = CliRunner().invoke(
        cli,
        [*base[:3], str(src), *base[4:], "--format", "md", "--resume", "--json"],
        env=graph_env(synced),
    )
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert summary["skipped_done"] == 4 and summary["written"] == len(texts) - 4
    assert len(list(out.glob("*.md"))) == len(texts)
    off_topic = [
        (out / f"{i}.md").read_text("utf-8") for i in range(len(texts) - 2, len(texts) + 1)
    ]
    assert any("no_match: nothing in this vault" in md for md in off_topic)
    on = (out / "1.md").read_text("utf-8")
    assert "_semantic ·" in on and "**" in on and "[" in on  # subjects with provenance


def test_graph_stopped_between_chunks_writes_every_pack(tmp_path: Path) -> None:
    """A graph of our own (the session's must keep running), stopped after the first chunk."""
    vault = copy_vault(tmp_path / "vault")
    base = Settings(vault=vault, state_dir=vault / ".vault-ko")
    local = LocalGraph(base.state_dir)
    try:
        local.up(settings=base)
    except Exception as exc:  # no JRE or ports: the other graph tests say why
        local.down()
        pytest.skip(f"a second local graph could not start: {exc}")
    try:
        settings = local.settings_for(base)
        texts = prompts()
        with App(settings).pipeline() as p:
            sync_vault(p.settings, p.kodb, p.graph, p.embedder)
            stopped: list[bool] = []

            def stop_after_first_chunk(done: int, total: int | None) -> None:
                if not stopped:
                    stopped.append(local.down(timeout=10))

            report = load_context(
                p, texts, tmp_path / "out", chunk_size=8, progress=stop_after_first_chunk
            )
        assert stopped == [True]
        packs = read_packs(tmp_path / "out" / "packs.jsonl")
        assert [pk["id"] for pk in packs] == [str(i) for i in range(1, len(texts) + 1)]
        assert [pk["mode"] for pk in packs] == ["semantic"] * 8 + ["fallback"] * (len(texts) - 8)
        for pk in packs[8:]:
            assert "answering from the notes' words" in pk["degraded_reason"]
            assert pk["relevance"]["label"] == "unscored"
        assert report.written == len(texts)
        assert report.modes == {"fallback": len(texts) - 8, "semantic": 8}
    finally:
        local.down(timeout=10)
