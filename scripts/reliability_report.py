"""Run the fault, hostile-input and property suites (and each round-3 finding's tests) and
render RELIABILITY.md from their results.

Run by hand (the tests themselves never write into the tree):

    .venv/bin/python scripts/reliability_report.py            # print the report
    .venv/bin/python scripts/reliability_report.py --write    # (re)write RELIABILITY.md
    VAULT_KO_FAULTS_FULL=1 .venv/bin/python scripts/reliability_report.py --write  # full run

pytest runs in a child process with ``--junitxml`` into a temporary directory; the report is
made from that XML only: every test case with its outcome and time, and the figures the tests
record with ``record_property`` (``faults_injected``, ``kill_points``, ``questions``,
``inputs``, ``recover_s``, ``restart_s``). The exit code is pytest's, so a failed run is never
mistaken for a clean report.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITES = ("tests/faults", "tests/hostile", "tests/property")
OUT = REPO / "RELIABILITY.md"
#: Hypothesis's default number of examples, for tests that do not set max_examples.
HYPOTHESIS_DEFAULT = 100


@dataclass
class Case:
    suite: str
    file: str
    function: str
    param: str | None
    seconds: float
    outcome: str  # passed | failed | error | skipped
    message: str
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class Row:
    """One scenario: a test function with all of its parametrized cases."""

    suite: str
    file: str
    function: str
    cases: list[Case] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        outcomes = {c.outcome for c in self.cases}
        for bad in ("failed", "error", "skipped"):
            if bad in outcomes:
                return bad
        return "passed"

    def total(self, name: str) -> float:
        return sum(float(c.properties.get(name, 0) or 0) for c in self.cases)

    def largest(self, name: str) -> float | None:
        values = [float(c.properties[name]) for c in self.cases if name in c.properties]
        return max(values) if values else None


def run_suites(junit: Path, extra: list[str]) -> int:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",
        *SUITES,
        *round3_ids(),
        *extra,
    ]
    print("$", " ".join(command), file=sys.stderr)
    return subprocess.call(command, cwd=REPO)


def read_cases(junit: Path) -> list[Case]:
    cases = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        file = tc.get("file") or tc.get("classname", "").replace(".", "/") + ".py"
        name = tc.get("name", "")
        function, _, param = name.partition("[")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = tc.find(tag)
            if found is not None:
                outcome = "failed" if tag == "failure" else tag
                message = (
                    (found.get("message") or "").splitlines()[0][:200]
                    if found.get("message")
                    else ""
                )
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        suite = next((s for s in SUITES if file.startswith(s)), file.split("/")[1])
        cases.append(
            Case(
                suite=suite.split("/")[-1],
                file=file,
                function=function,
                param=param.rstrip("]") or None,
                seconds=float(tc.get("time", 0) or 0),
                outcome=outcome,
                message=message,
                properties=props,
            )
        )
    return cases


def group(cases: list[Case]) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    for c in cases:
        key = (c.file, c.function)
        if key not in rows:
            rows[key] = Row(c.suite, c.file, c.function)
        rows[key].cases.append(c)
    return list(rows.values())


def scenario(function: str) -> str:
    return function.removeprefix("test_").replace("_", " ")


def hypothesis_examples(file: str, function: str) -> int:
    """max_examples of a @given test, from its source (the default when not set)."""
    source = (REPO / file).read_text(encoding="utf-8")
    at = source.find(f"def {function}(")
    head = source[max(0, source.rfind("\n\n\n", 0, at)) : at]
    found = re.search(r"max_examples=(\d+)", head)
    return int(found.group(1)) if found else HYPOTHESIS_DEFAULT


def tried(row: Row) -> str:
    if row.suite == "faults":
        faults = row.total("faults_injected") or len(row.cases)
        words = [f"{int(faults)} fault(s)"]
        if row.total("kill_points"):
            words.append(f"of {int(row.total('kill_points'))} seeded kill points")
        if row.total("questions"):
            words.append(f"{int(row.total('questions'))} questions")
        if len(row.cases) > 1:
            words.append(f"{len(row.cases)} variants")
        return ", ".join(words)
    if row.suite == "property":
        return f"≤ {hypothesis_examples(row.file, row.function)} generated examples"
    inputs = row.total("inputs")
    return f"{int(inputs) if inputs else len(row.cases)} inputs"


def recovery(row: Row) -> str:
    seconds = row.largest("recover_s")
    if seconds is not None:
        restart = row.largest("restart_s")
        extra = f" (restart {restart:.1f} s + cool-down)" if restart is not None else " (rerun)"
        return f"{seconds:.1f} s{extra}"
    if row.suite == "faults":
        return "next question (fallback)" if "graph" in row.file else "rerun"
    return "—"


def lost(row: Row) -> str:
    return "nothing" if row.outcome == "passed" else f"**{row.outcome}**: see below"


def reproduce(row: Row) -> str:
    env = "VAULT_KO_FAULTS_FULL=1 " if row.suite == "faults" else ""
    return f"`{env}.venv/bin/pytest '{row.file}::{row.function}'`"


#: What these suites found (each fixed, with a test that failed before its fix).
FOUND = [
    (
        "a graph that accepts connections and never answers (SIGSTOP, a mute port) hung a "
        "pooled driver call for ever: every call now runs under a worker-thread bound",
        "tests/faults/test_graph_faults.py::test_a_hung_graph_sends_questions_to_the_"
        "fallback_within_the_bound, tests/unit/graph/test_client_bounded.py",
    ),
    (
        "`embed` SIGKILLed between a batch's notes and their edges left notes the next run saw "
        "unchanged and never linked (LINKS_TO edges lost): one transaction per batch now",
        "tests/unit/test_embed_sync.py::test_a_run_killed_at_any_graph_write_converges_on_the_"
        "next, tests/faults/test_process_faults.py (kill-embed)",
    ),
    (
        "a symlink loop in the vault aborted ingest (RuntimeError)",
        "tests/hostile/test_hostile_vault.py::test_symlink_loops_in_the_vault_are_skipped_not_"
        "followed",
    ),
    (
        "a note whose file name is not UTF-8 aborted ingest (UnicodeEncodeError in KO-DB)",
        "tests/hostile/test_hostile_vault.py::test_a_note_whose_name_is_not_utf8_is_skipped_"
        "with_its_name_escaped",
    ),
    (
        "a console that cannot encode the output (PYTHONIOENCODING=ascii, latin-1) ended "
        "every command in a UnicodeEncodeError traceback",
        "tests/hostile/test_hostile_vault.py::test_output_on_a_console_that_cannot_encode_it_"
        "is_escaped_not_a_traceback",
    ),
    (
        "lone surrogates in a question (a non-UTF-8 argument) failed the embedding",
        "tests/hostile/test_hostile_queries.py::test_a_text_with_lone_surrogates_is_embedded_"
        "not_refused_by_the_tokenizer",
    ),
    (
        "a 100 KB question searched all of its 14,000 words in degraded mode (seconds, growing "
        "with the vault): the first 64 terms are searched",
        "tests/hostile/test_hostile_queries.py::test_a_100_kb_question_searches_its_first_64_terms",
    ),
]


#: Round 3 (issue 35): each finding of the hostile and fault run, and the tests that failed
#: before its fix and are run with the suites here (node ids: a file, or file::function).
ROUND3: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "1",
        "a private note's subject reached every surface through a public link",
        (
            "tests/integration/test_private_everywhere.py",
            "tests/unit/test_ingest.py",
        ),
    ),
    (
        "2",
        "load-context copied a private note named as input into its pack",
        (
            "tests/unit/test_session.py::test_a_private_note_as_input_is_refused_unless_private_notes_are_included",
            "tests/unit/test_session.py::test_load_context_refuses_a_private_note_and_writes_no_private_text",
        ),
    ),
    (
        "3",
        "`facts search` printed private facts",
        (
            "tests/unit/kodb/test_facts_cli.py::test_search_hides_private_facts_unless_asked",
            "tests/integration/kodb/test_kodb_reader.py",
        ),
    ),
    (
        "4",
        "the hook's log held whole prompts, mode 0644",
        ("tests/unit/test_hook.py::test_the_log_is_private_and_never_holds_a_whole_prompt",),
    ),
    (
        "5",
        "a password with a space (or other characters) was printed in clear",
        ("tests/integration/test_secrets_masked.py",),
    ),
    (
        "6",
        "a KO-DB deleted under the service was answered from, then replaced by an empty one",
        (
            "tests/unit/service/test_api.py::test_a_kodb_deleted_or_replaced_under_the_service_is_named_and_never_recreated",
        ),
    ),
    (
        "7",
        "a damaged KO-DB passed ingest and sync; a query failed after loading the model",
        (
            "tests/unit/test_app.py::test_a_writer_refuses_a_damaged_kodb_and_writes_nothing",
            "tests/unit/test_app.py::test_a_reader_of_a_damaged_kodb_fails_before_the_model_loads",
            "tests/integration/kodb/test_kodb_open.py::test_ingest_and_query_refuse_a_damaged_kodb_in_one_line",
        ),
    ),
    (
        "8",
        "a mistyped SQLite URL made a new KO-DB (and folders at the root, or in memory)",
        ("tests/integration/kodb/test_kodb_open.py",),
    ),
    (
        "9",
        "vault-ko.toml values were not validated like the flags",
        ("tests/unit/test_config_validation.py",),
    ),
    (
        "10",
        "integers of 2^63 and above: HTTP 500, CLI traceback, SQLite errors in MCP",
        (
            "tests/unit/service/test_api.py::test_numbers_are_bounded_and_never_coerced",
            "tests/unit/test_query.py::test_counts_past_the_bound_are_one_config_error",
        ),
    ),
    (
        "11",
        "a read-only state dir and a non-numeric port ended in tracebacks",
        (
            "tests/unit/test_config_validation.py::test_a_read_only_state_dir_is_refused_first_in_one_line",
            "tests/unit/test_config_validation.py::test_a_kodb_url_without_a_numeric_port_is_one_line",
        ),
    ),
    (
        "12",
        "a 422 echoed the whole body; no request size limit",
        (
            "tests/unit/service/test_api.py::test_a_body_past_the_limit_is_413_before_it_is_read",
            "tests/unit/service/test_api.py::test_a_422_never_echoes_the_input",
        ),
    ),
    (
        "13",
        "MCP loaded its own model for a question the service refused",
        (
            "tests/unit/test_mcp_tools.py",
            "tests/integration/test_mcp.py::test_the_service_limits_come_first_in_the_tools_words",
        ),
    ),
    (
        "14",
        "lower-case bearer scheme refused; lax coercion; undocumented 400 (schemathesis)",
        (
            "tests/unit/service/test_api.py::test_the_authorization_scheme_is_case_insensitive",
            "tests/unit/service/test_api.py::test_a_body_that_is_not_utf8_is_a_declared_400",
            "tests/integration/test_service_schemathesis.py",
        ),
    ),
    (
        "15",
        "an evaluation reported fallback figures as semantic; one slow call opened the breaker",
        (
            "tests/unit/test_evaluate_harness.py::test_an_evaluation_whose_semantic_answers_were_degraded_refuses_to_report",
            "tests/unit/graph/test_breaker.py",
            "tests/unit/graph/test_client_bounded.py",
            "tests/integration/test_first_questions_after_sync.py",
        ),
    ),
    (
        "16",
        "load-context ran 21 packs/s on prompts of loose words",
        ("tests/integration/test_session.py::test_packs_equal_single_answers",),
    ),
    (
        "17",
        "real vault content: escaped pipes, unclosed frontmatter, duplicate keys, tags",
        (
            "tests/hostile/test_hostile_vault.py",
            "tests/unit/vault/test_vault_parse.py",
            "tests/unit/vault/test_vault_extract.py",
        ),
    ),
]


def round3_ids() -> list[str]:
    """The node ids of ROUND3 not already inside a suite folder (pytest runs each once)."""
    ids = dict.fromkeys(i for _, _, tests in ROUND3 for i in tests)
    return [i for i in ids if not i.startswith(SUITES)]


def round3_lines(rows: list[Row]) -> list[str]:
    lines = [
        "## Round 3 (issue 35): each finding and its tests",
        "",
        "| item | what failed | tests | cases | result |",
        "|---|---|---|---|---|",
    ]
    for item, what, tests in ROUND3:
        matched = [
            r
            for r in rows
            for t in tests
            if r.file == t.split("::")[0] and ("::" not in t or r.function == t.split("::")[1])
        ]
        cases = [c for r in matched for c in r.cases]
        bad = [c for c in cases if c.outcome in ("failed", "error")]
        result = "not run" if not cases else ("failed" if bad else "passed")
        shown = ", ".join(f"`{t}`" for t in tests)
        lines.append(f"| {item} | {what} | {shown} | {len(cases)} | {result} |")
    lines.append("")
    return lines


def render(rows: list[Row], code: int, wall: float, full: bool, seed: str) -> str:
    by_suite: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_suite[r.suite].append(r)
    cases = [c for r in rows for c in r.cases]
    failed = [c for c in cases if c.outcome in ("failed", "error")]
    skipped = [c for c in cases if c.outcome == "skipped"]
    lines = [
        "# Reliability",
        "",
        "What the fault, hostile-input and property suites inject, how much, what was lost and",
        "how long recovery took. Generated by `scripts/reliability_report.py` from one run's",
        "JUnit XML; do not edit by hand. The suites run in CI as part of `make test` (quick",
        "parameters); this report is re-made by hand, ideally with `VAULT_KO_FAULTS_FULL=1`.",
        "",
        f"* run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{'full' if full else 'quick (CI)'} parameters, seed {seed}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        f"* result: {len(cases)} cases, {len(failed)} failed, {len(skipped)} skipped, "
        f"pytest exit {code}, {wall:.0f} s wall",
        "* reproduce everything: `.venv/bin/python scripts/reliability_report.py --write` "
        "(add `VAULT_KO_FAULTS_FULL=1` for many kill points, `VAULT_KO_FAULTS_SEED=N` for "
        "other ones)",
        "",
    ]
    titles = {
        "faults": "Faults injected on real servers (tests/faults)",
        "hostile": "Hostile inputs (tests/hostile)",
        "property": "Properties (tests/property, hypothesis)",
    }
    for suite in ("faults", "hostile", "property"):
        if suite not in by_suite:
            continue
        lines += [
            f"## {titles[suite]}",
            "",
            "| scenario | tried | lost | time to recover | result | s | reproduce |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in by_suite[suite]:
            secs = sum(c.seconds for c in r.cases)
            lines.append(
                f"| {scenario(r.function)} | {tried(r)} | {lost(r)} | {recovery(r)} "
                f"| {r.outcome} | {secs:.1f} | {reproduce(r)} |"
            )
        lines.append("")
        total = sum(c.seconds for r in by_suite[suite] for c in r.cases)
        lines += [
            f"Suite time: {total:.0f} s (setup, call and teardown of its cases).",
            "",
        ]
    lines += round3_lines(rows)
    lines += ["## Found by these suites, and fixed", ""]
    lines += [f"* {what} — `{where}`" for what, where in FOUND]
    lines.append("")
    if failed or skipped:
        lines += ["## Not passed", ""]
        for c in failed + skipped:
            lines.append(
                f"* `{c.file}::{c.function}{f'[{c.param}]' if c.param else ''}` "
                f"{c.outcome}: {c.message}"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write RELIABILITY.md")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vault-ko-reliability-") as tmp:
        junit = Path(tmp) / "junit.xml"
        started = time.monotonic()
        code = run_suites(junit, args.pytest_args)
        wall = time.monotonic() - started
        if not junit.exists():
            print("pytest wrote no results", file=sys.stderr)
            return code or 2
        rows = group(read_cases(junit))
    full = os.environ.get("VAULT_KO_FAULTS_FULL", "").lower() in ("1", "true", "yes")
    report = render(rows, code, wall, full, os.environ.get("VAULT_KO_FAULTS_SEED", "15"))
    if args.write:
        OUT.write_text(report + "\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)}", file=sys.stderr)
    else:
        print(report)
    return code


if __name__ == "__main__":
    sys.exit(main())
