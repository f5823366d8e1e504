"""`vault-ko facts import|search` end to end on a SQLite KO-DB in a temp vault."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli.root import cli
from pipeline.cli.root import run as run_cli
from pipeline.errors import EXIT_INPUT, EXIT_USAGE
from pipeline.kodb import KoDB

FACTS = Path(__file__).resolve().parents[2] / "data" / "facts"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    return folder


def run(args: list[str]) -> int:
    """Run the CLI as `main()` does; return its exit code."""
    with pytest.raises(SystemExit) as info:
        run_cli(cli, args)
    return int(info.value.code or 0)


def kodb_count(vault: Path) -> int:
    with KoDB.open(f"sqlite:///{vault / '.vault-ko' / 'ko.db'}") as db:
        return db.count_facts()


def test_bad_row_names_its_line_exits_3_and_writes_nothing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    before = kodb_count(vault)
    capsys.readouterr()
    code = run(["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")])
    captured = capsys.readouterr()
    assert code == EXIT_INPUT
    assert f"{FACTS / 'bad_line3.jsonl'}:3: confidence must be a number" in captured.err
    assert ":1:" not in captured.err and ":2:" not in captured.err
    assert kodb_count(vault) == before == 4


def test_skip_invalid_requires_rejects(vault: Path) -> None:
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")]
    assert run([*args, "--skip-invalid"]) == EXIT_USAGE


def test_skip_invalid_imports_good_rows_and_writes_rejects(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rejects = tmp_path / "rejects.jsonl"
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")]
    assert run([*args, "--skip-invalid", "--rejects", str(rejects), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inserted"] == 3 and report["existing"] == 0 and report["rejected"] == 1
    [record] = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert record["line"] == 3 and '"Kafka"' in record["text"]
    assert kodb_count(vault) == 3


def test_a_rejects_file_that_is_the_input_or_cannot_be_written_stops_before_any_import(
    vault: Path, tmp_path: Path
) -> None:
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes((FACTS / "bad_line3.jsonl").read_bytes())
    kept = facts.read_bytes()
    args = ["--vault", str(vault), "facts", "import", str(facts), "--skip-invalid", "--rejects"]
    for rejects in (facts, tmp_path / "." / facts.name, tmp_path / "no-such-dir" / "r.jsonl"):
        assert run([*args, str(rejects)]) == EXIT_USAGE
    assert facts.read_bytes() == kept
    assert kodb_count(vault) == 0


def test_reimport_is_idempotent_and_reports_existing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "good.csv"), "--json"]
    assert run(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert run(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["format"], first["inserted"], first["existing"]) == ("csv", 3, 0)
    assert (second["inserted"], second["existing"]) == (0, 3)
    assert kodb_count(vault) == 3


def test_explicit_format_overrides_the_extension(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "facts.txt"
    shutil.copy(FACTS / "good.jsonl", odd)
    assert run(["--vault", str(vault), "facts", "import", str(odd)]) == EXIT_INPUT
    assert "--format" in capsys.readouterr().err
    assert run(["--vault", str(vault), "facts", "import", str(odd), "--format", "jsonl"]) == 0


def test_kodb_url_from_the_environment_is_used(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder outside the state dir is the user's to make (vault-ko makes none there).
    (tmp_path / "elsewhere").mkdir()
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'facts.db'}"
    monkeypatch.setenv("VAULT_KO_KODB_URL", url)
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    with KoDB.open(url) as db:
        assert db.count_facts() == 4
    assert not (vault / ".vault-ko" / "ko.db").exists()


def test_search_json_lists_whole_word_matches_with_facts(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    capsys.readouterr()
    assert run(["--vault", str(vault), "facts", "search", "warm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"subjects"}
    names = [s["subject"] for s in data["subjects"]]
    assert names == ["Warm cache"]
    assert all("warmstart" not in n.lower() for n in names)
    [fact] = data["subjects"][0]["facts"]
    assert {k: fact[k] for k in ("predicate", "object", "confidence")} == {
        "predicate": "implemented_by",
        "object": "Redis",
        "confidence": 0.9,
    }
    assert fact["source_type"] == "adr"
    assert fact["source_file"] == "adr/0007-use-redis-as-the-warm-cache.md"


def test_search_hides_private_facts_unless_asked(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, item 3: private means private on every read surface, facts search too."""
    (vault / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n')
    rows = [
        {
            "subject": "Project Nightjarquux",
            "predicate": "codename",
            "object": "warm bird",
            "source_type": "wiki",
            "source_file": "private/plan-a.md",
            "confidence": 0.9,
        },
        {
            "subject": "Warm cache",
            "predicate": "secret_of",
            "object": "Nightjarquux",
            "source_type": "wiki",
            "source_file": "private/plan-a.md",
            "confidence": 0.9,
        },
        {
            "subject": "Warm cache",
            "predicate": "implemented_by",
            "object": "Redis",
            "source_type": "adr",
            "source_file": "adr/0007.md",
            "confidence": 0.9,
        },
    ]
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run(["--vault", str(vault), "facts", "import", str(facts)]) == 0
    capsys.readouterr()
    for term in ("warm", "nightjarquux"):
        assert run(["--vault", str(vault), "facts", "search", term, "--json"]) == 0
        out = capsys.readouterr().out
        assert "Nightjarquux" not in out and "private/" not in out, term
    assert run(["--vault", str(vault), "facts", "search", "warm", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["subjects"]
    assert [f["object"] for f in entry["facts"]] == ["Redis"]
    for term, objects in (("warm", ["Redis", "Nightjarquux"]), ("nightjarquux", ["warm bird"])):
        args = ["--vault", str(vault), "facts", "search", term, "--include-private", "--json"]
        assert run(args) == 0
        [entry] = json.loads(capsys.readouterr().out)["subjects"]
        assert sorted(f["object"] for f in entry["facts"]) == sorted(objects)


def test_search_hungarian_term_and_human_table(
    vault: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide table keeps cells on one line
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    capsys.readouterr()
    assert run(["--vault", str(vault), "facts", "search", "ŐRZŐ"]) == 0
    output = capsys.readouterr().out
    assert "Gyorsítótár őrző" in output and "platform team" in output


def test_search_limit_and_empty_term(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            "subject": name,
            "predicate": "is",
            "object": "x",
            "confidence": 0.5,
            "source_type": "wiki",
            "source_file": "a.md",
        }
        for name in ("Cache B", "Cache A", "Cachet")
    ]
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert run(["--vault", str(vault), "facts", "import", str(path)]) == 0
    capsys.readouterr()
    search = ["--vault", str(vault), "facts", "search", "cache", "--json"]
    assert run(search) == 0
    assert [s["subject"] for s in json.loads(capsys.readouterr().out)["subjects"]] == [
        "Cache A",
        "Cache B",
    ]
    assert run([*search, "--limit", "1"]) == 0
    assert [s["subject"] for s in json.loads(capsys.readouterr().out)["subjects"]] == ["Cache A"]
    assert run(["--vault", str(vault), "facts", "search", "   "]) == EXIT_INPUT


GOOD_ROW = {
    "subject": "Redis",
    "predicate": "used_for",
    "object": "warm cache",
    "confidence": 0.8,
    "source_type": "wiki",
    "source_file": "wiki/redis.md",
}
CSV_HEADER = "subject,predicate,object,confidence,source_type,source_file"


def hostile_jsonl(field: str, raw_value: str) -> str:
    """A good row, then one whose ``field`` is the raw JSON text ``raw_value``."""
    row = json.dumps({k: v for k, v in GOOD_ROW.items() if k != field})
    return json.dumps(GOOD_ROW) + "\n" + row[:-1] + f', "{field}": {raw_value}' + "}\n"


def hostile_csv(field: str, cell: str) -> str:
    bad = {**GOOD_ROW, field: cell}
    row = ",".join(str(bad[k]) for k in CSV_HEADER.split(","))
    good = ",".join(str(GOOD_ROW[k]) for k in CSV_HEADER.split(","))
    return f"{CSV_HEADER}\n{good}\n{row}\n"


@pytest.mark.parametrize(
    ("name", "text", "line", "reason"),
    [
        (
            "f.jsonl",
            hostile_jsonl("confidence", "1" * 400),
            2,
            "confidence must be in [0, 1], got a 400-digit number",
        ),
        (
            "f.jsonl",
            hostile_jsonl("confidence", "1" * 5000),
            2,
            "invalid JSON: a 5000-digit integer is too long to read",
        ),
        (
            "f.jsonl",
            hostile_jsonl("object", "[" * 100_000 + "]" * 100_000),
            2,
            "invalid JSON: arrays or objects nested too deep",
        ),
        (
            "f.csv",
            hostile_csv("confidence", "1" * 400),
            3,
            "confidence must be in [0, 1], got a 400-digit number",
        ),
        (
            "f.csv",
            hostile_csv("confidence", "1" * 5000),
            3,
            "confidence must be in [0, 1], got a 5000-digit number",
        ),
        (
            "f.csv",
            hostile_csv("object", "[" * 200_000),
            3,
            "invalid CSV: field larger than field limit",
        ),
    ],
    ids=[
        "jsonl-400-digit-confidence",
        "jsonl-5000-digit-confidence",
        "jsonl-object-nested-100000-deep",
        "csv-400-digit-confidence",
        "csv-5000-digit-confidence",
        "csv-200000-character-object",
    ],
)
def test_hostile_numbers_and_nesting_are_file_line_reasons_exit_3_and_nothing_written(
    vault: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    line: int,
    reason: str,
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    code = run(["--vault", str(vault), "facts", "import", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert f"{path}:{line}: {reason}" in err
    assert "Traceback" not in err and len(err) < 2000  # one line per problem, not the row
    assert kodb_count(vault) == 0


def test_rows_claiming_the_ingest_extractor_are_refused_with_their_line(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "claims.jsonl"
    rows = [GOOD_ROW, {**GOOD_ROW, "object": "sessions", "extractor": "ingest"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert run(["--vault", str(vault), "facts", "import", str(path)]) == EXIT_INPUT
    assert f"{path}:2: extractor 'ingest' is reserved" in capsys.readouterr().err
    assert kodb_count(vault) == 0


def test_bad_row_after_several_batches_writes_nothing_and_names_its_line(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.kodb import store

    monkeypatch.setattr(store, "IMPORT_BATCH", 3)
    monkeypatch.setattr(store.KoDB.import_facts, "__kwdefaults__", {"batch_size": 3})
    row = {
        "predicate": "is",
        "object": "x",
        "confidence": 0.5,
        "source_type": "wiki",
        "source_file": "a.md",
    }
    lines = [json.dumps({**row, "subject": f"s{i}"}) for i in range(10)]
    lines.append(json.dumps({**row, "subject": "late", "confidence": 2}))
    lines.append(json.dumps({**row, "subject": "after"}))
    path = tmp_path / "late_bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = run(["--vault", str(vault), "facts", "import", str(path)])
    captured = capsys.readouterr()
    assert code == EXIT_INPUT
    assert f"{path}:11: confidence must be in [0, 1], got 2" in captured.err
    assert kodb_count(vault) == 0


def test_skip_invalid_streams_good_rows_on_both_sides_of_a_bad_one(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.kodb import store

    monkeypatch.setattr(store.KoDB.import_facts, "__kwdefaults__", {"batch_size": 2})
    row = {"predicate": "is", "object": "x", "confidence": 0.5, "source_type": "wiki"}
    lines = [json.dumps({**row, "subject": f"s{i}", "source_file": "a.md"}) for i in range(5)]
    lines.insert(2, json.dumps({**row, "subject": "bad"}))  # no source_file
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rejects = tmp_path / "rejects.jsonl"
    args = ["--vault", str(vault), "facts", "import", str(path), "--skip-invalid"]
    assert run([*args, "--rejects", str(rejects)]) == 0
    assert kodb_count(vault) == 5
    assert [json.loads(r)["line"] for r in rejects.read_text().splitlines()] == [3]


# -- the human output (issue 36, item 4) --------------------------------------------------

#: A subject with facts from two files, one with a long path and one with a long object.
WARM_ROWS = [
    ("implemented_by", "Redis", 0.9, "adr", "adr/0007-use-redis-as-the-warm-cache.md"),
    (
        "decision",
        "We will build a warm cache on our existing Redis cluster; the API gateway reads it "
        "first and falls back to Postgres on a miss.",
        0.8,
        "adr",
        "adr/0007-use-redis-as-the-warm-cache.md",
    ),
    ("mentioned_in", "Warm cache design spike", 0.7, "session", "sessions/2026-02-03-spike.md"),
    ("owner", "platform team", 0.6, "adr", "adr/0007-use-redis-as-the-warm-cache.md"),
]

WARM_AT_80 = """\
subjects matching 'warm': 1

Warm cache
  adr/0007-use-redis-as-the-warm-cache.md (adr)
    implemented_by: Redis  0.90
    decision: We will build a warm cache on our existing Redis cluster; the
      API gateway reads it first and falls back to Postgres on a miss.  0.80
    owner: platform team  0.60
  sessions/2026-02-03-spike.md (session)
    mentioned_in: Warm cache design spike  0.70
"""

WARM_AT_100 = """\
subjects matching 'warm': 1

Warm cache
  adr/0007-use-redis-as-the-warm-cache.md (adr)
    implemented_by: Redis  0.90
    decision: We will build a warm cache on our existing Redis cluster; the API gateway reads it
      first and falls back to Postgres on a miss.  0.80
    owner: platform team  0.60
  sessions/2026-02-03-spike.md (session)
    mentioned_in: Warm cache design spike  0.70
"""


@pytest.mark.parametrize(("columns", "expected"), [(80, WARM_AT_80), (100, WARM_AT_100)])
def test_search_text_groups_facts_by_subject_and_file_and_wraps_to_columns(
    vault: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
    expected: str,
) -> None:
    """One line per fact under its subject; each source path once, above its facts."""
    rows = [
        {
            "subject": "Warm cache",
            "predicate": predicate,
            "object": obj,
            "confidence": confidence,
            "source_type": source_type,
            "source_file": source_file,
        }
        for predicate, obj, confidence, source_type, source_file in WARM_ROWS
    ]
    facts = tmp_path / "warm.jsonl"
    facts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert run(["--vault", str(vault), "facts", "import", str(facts)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(columns))
    assert run(["--vault", str(vault), "facts", "search", "warm", "--limit", "3"]) == 0
    output = capsys.readouterr().out
    assert output == expected
    assert max(len(line) for line in output.splitlines()) <= columns


def test_search_text_never_cuts_a_path_longer_than_the_terminal(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = "sessions/" + "a-very-long-session-note-name-" * 4 + "end.md"
    row = {
        "subject": "Warm cache",
        "predicate": "is",
        "object": "fast",
        "confidence": 0.5,
        "source_type": "session",
        "source_file": path,
    }
    facts = tmp_path / "long.jsonl"
    facts.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert run(["--vault", str(vault), "facts", "import", str(facts)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "80")
    assert run(["--vault", str(vault), "facts", "search", "warm"]) == 0
    assert f"  {path} (session)\n" in capsys.readouterr().out
