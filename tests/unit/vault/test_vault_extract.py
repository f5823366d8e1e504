"""Fact extraction: each rule, its confidence, and facts about linked subjects."""

from __future__ import annotations

from collections import Counter

import pytest

import pipeline.vault.extract as extract_module
from pipeline.model import Fact, SourceType
from pipeline.vault.extract import (
    CONF_ADR_DECISION,
    CONF_ADR_STATUS,
    CONF_ALIAS,
    CONF_CONTEXT,
    CONF_DECIDED_IN,
    CONF_INLINE_FIELD,
    CONF_LINKS_TO,
    CONF_MENTIONED_IN,
    CONF_NAME_DATE,
    CONF_PROPERTY,
    CONF_REFERENCE,
    CONF_SUMMARY,
    CONF_SUPERSEDED_BY,
    CONF_TAG,
    CONF_TITLE,
    Resolver,
    extract_facts,
    normalise_adr_status,
)
from pipeline.vault.parse import parse_note

#: The rules every note gets about itself (tested on their own below); the older tests
#: check the other rules without them.
OWN_PREDICATES = frozenset({"title", "summary", "section", "references"})


def facts_of(
    text: str,
    path: str = "wiki/note.md",
    stype: SourceType = "wiki",
    resolve: Resolver | None = None,
    *,
    own: bool = False,
) -> list[Fact]:
    facts = extract_facts(parse_note(text.encode("utf-8"), path, stype), resolve)
    return [f for f in facts if own or f.predicate not in OWN_PREDICATES]


def triples(facts: list[Fact]) -> set[tuple[str, str, str, float]]:
    return {(f.subject, f.predicate, f.object, f.confidence) for f in facts}


def test_confidences_are_ordered_from_stated_to_inferred() -> None:
    # A property stated in frontmatter is the most direct; a quoted sentence the least.
    assert CONF_PROPERTY == CONF_ALIAS == CONF_ADR_STATUS == 0.95
    assert CONF_INLINE_FIELD == CONF_TAG == CONF_ADR_DECISION == CONF_SUPERSEDED_BY == 0.9
    assert CONF_DECIDED_IN == 0.85
    assert (CONF_LINKS_TO, CONF_MENTIONED_IN, CONF_CONTEXT) == (0.8, 0.7, 0.6)


def test_frontmatter_properties_flattened_and_stringified() -> None:
    text = (
        "---\n"
        "title: Redis\n"
        "aliases: [redis-server]\n"
        "tags: [db/kv]\n"
        "cssclasses: [wide]\n"
        "lang: hu\n"  # the language its words are indexed in, not a fact about Redis
        "language: Lua\n"  # a property like any other
        'owner: "[[Platform team|platform]]"\n'
        "ports: [6379, 6380]\n"
        "since: 2023-05-01\n"
        "ratio: 0.5\n"
        "enabled: true\n"
        "limits:\n  memory: 2GB\n  eviction:\n    policy: allkeys-lru\n"
        "empty:\n"
        "---\n"
    )
    got = triples(facts_of(text))
    assert got == {
        ("Redis", "owner", "Platform team", CONF_PROPERTY),
        ("Redis", "language", "Lua", CONF_PROPERTY),
        ("Redis", "ports", "6379", CONF_PROPERTY),
        ("Redis", "ports", "6380", CONF_PROPERTY),
        ("Redis", "since", "2023-05-01", CONF_PROPERTY),
        ("Redis", "ratio", "0.5", CONF_PROPERTY),
        ("Redis", "enabled", "true", CONF_PROPERTY),
        ("Redis", "limits.memory", "2GB", CONF_PROPERTY),
        ("Redis", "limits.eviction.policy", "allkeys-lru", CONF_PROPERTY),
        ("Redis", "alias", "redis-server", CONF_ALIAS),
        ("Redis", "tagged", "db/kv", CONF_TAG),
        # the owner link is also a link: evidence about the platform team
        ("Redis", "links_to", "Platform team", CONF_LINKS_TO),
        ("Platform team", "mentioned_in", "Redis", CONF_MENTIONED_IN),
    }


def test_subject_property_names_the_subject_of_own_facts() -> None:
    got = triples(facts_of("---\nsubject: Redis\nowner: ops\n---\n# Redis cache notes\n"))
    assert got == {("Redis", "owner", "ops", CONF_PROPERTY)}


def test_inline_fields_and_body_tags() -> None:
    got = triples(facts_of("# Note\n\nstatus:: draft\nWork on #infra/db today [due:: Friday]."))
    assert got == {
        ("Note", "status", "draft", CONF_INLINE_FIELD),
        ("Note", "due", "Friday", CONF_INLINE_FIELD),
        ("Note", "tagged", "infra/db", CONF_TAG),
    }


def test_links_give_facts_about_the_target() -> None:
    facts = facts_of("# Standup\n\nWe tuned [[Redis]] eviction. Then [[Redis]] again.", "s.md")
    assert triples(facts) == {
        ("Standup", "links_to", "Redis", CONF_LINKS_TO),
        ("Redis", "mentioned_in", "Standup", CONF_MENTIONED_IN),
        ("Redis", "context", "We tuned Redis eviction.", CONF_CONTEXT),
    }
    assert {f.source_file for f in facts} == {"s.md"}
    assert {f.extractor for f in facts} == {"ingest"}


def test_self_links_and_attachments_give_no_facts() -> None:
    assert facts_of("# Redis\n\nSee [[Redis#Setup]] and ![[diagram.png]].") == []


def test_mentioned_in_spreads_across_files_and_types() -> None:
    notes = [
        ("sessions/2024-01-02.md", "session", "# Monday\n\nDebugged [[Redis]] timeouts."),
        ("wiki/Caching.md", "wiki", "# Caching\n\n- [[Redis]] holds sessions"),
        ("adr/0003-cache.md", "adr", "# 3. Cache\n\n## Decision\n\nUse [[Redis]]."),
    ]
    about_redis = [
        f for path, st, text in notes for f in facts_of(text, path, st) if f.subject == "Redis"
    ]
    assert {f.source_file for f in about_redis} == {n[0] for n in notes}
    assert {f.source_type for f in about_redis} == {"session", "wiki", "adr"}
    mentioned = {(f.object, f.source_type) for f in about_redis if f.predicate == "mentioned_in"}
    assert mentioned == {("Monday", "session"), ("Caching", "wiki"), ("3. Cache", "adr")}
    assert ("decided_in", "3. Cache") in {(f.predicate, f.object) for f in about_redis}


NYGARD = """# 12. Use custom User model

Date: 2022-09-26

## Status

Superseded by [[20. User models revisited]]

## Context

Django recommends a custom [[User model]].

## Decision

We use a custom [[User model]] with a separate [[UserProfile]].
Second line of the same paragraph.

Another paragraph.
"""


def test_nygard_adr_status_decision_superseded_date_and_decided_in() -> None:
    facts = facts_of(NYGARD, "adr/0012-user-models.md", "adr")
    got = triples(facts)
    subject = "12. Use custom User model"
    assert (subject, "adr_status", "superseded", CONF_ADR_STATUS) in got
    assert (subject, "superseded_by", "20. User models revisited", CONF_SUPERSEDED_BY) in got
    assert (subject, "date", "2022-09-26", 0.9) in got
    decision = (
        "We use a custom User model with a separate UserProfile. Second line of the same paragraph."
    )
    assert (subject, "decision", decision, CONF_ADR_DECISION) in got
    assert ("User model", "decided_in", subject, CONF_DECIDED_IN) in got
    assert ("UserProfile", "decided_in", subject, CONF_DECIDED_IN) in got
    # the context link is evidence too, but not a decision
    assert ("User model", "context", "Django recommends a custom User model.", CONF_CONTEXT) in got
    assert not any(f.predicate == "decided_in" and f.subject == "20. User models revisited"
                   for f in facts)  # fmt: skip


def test_adr_frontmatter_status_and_decision_win() -> None:
    text = (
        "---\nstatus: Approved\ndecision: Adopt [[Kafka]] for events\n---\n"
        "# ADR 7\n\n## Status\n\nRejected\n\n## Decision\n\nSomething else.\n"
    )
    got = triples(facts_of(text, "adr/7.md", "adr"))
    assert ("ADR 7", "adr_status", "accepted", CONF_ADR_STATUS) in got
    # the frontmatter decision is a property (0.95) and the ADR decision (0.9): kept once
    assert ("ADR 7", "decision", "Adopt Kafka for events", CONF_PROPERTY) in got
    assert ("Kafka", "decided_in", "ADR 7", CONF_DECIDED_IN) in got
    assert not any(p == "decision" and o == "Something else." for _, p, o, _ in got)


def test_an_adr_s_status_and_decision_written_as_tables_still_count() -> None:
    text = (
        "# 9. Use a queue\n\n## Status\n\n| Field | Value |\n|---|---|\n"
        "| Status | Accepted |\n\n## Decision\n\n| Option | Chosen |\n|---|---|\n"
        "| [[Kafka]] for events | yes |\n"
    )
    got = triples(facts_of(text, "adr/0009.md", "adr"))
    assert ("9. Use a queue", "adr_status", "accepted", CONF_ADR_STATUS) in got
    decision = "Option · Chosen Kafka for events · yes"
    assert ("9. Use a queue", "decision", decision, CONF_ADR_DECISION) in got
    assert ("Kafka", "decided_in", "9. Use a queue", CONF_DECIDED_IN) in got


def test_a_status_or_decision_leading_into_a_table_keeps_the_table() -> None:
    text = (
        "# 3. Pick cache\n\n## Status\nCurrent status of this record:\n| State | Since |\n"
        "|---|---|\n| Accepted | 2024 |\n\n## Decision\nWe adopt the following:\n"
        "| Tool | Use |\n|---|---|\n| [[Redis]] | cache |\n"
    )
    got = triples(facts_of(text, "adr/0003.md", "adr"))
    assert ("3. Pick cache", "adr_status", "accepted", CONF_ADR_STATUS) in got
    decision = "We adopt the following: Tool · Use Redis · cache"
    assert ("3. Pick cache", "decision", decision, CONF_ADR_DECISION) in got
    assert ("Redis", "decided_in", "3. Pick cache", CONF_DECIDED_IN) in got


def test_adr_superseded_by_markdown_link_is_a_link_to_the_note() -> None:
    text = "# 12. Old\n\n## Status\n\nSuperseded by [20. New way](./0020-new-way.md)\n"
    got = triples(facts_of(text, "adr/0012.md", "adr"))
    # Unresolved, a markdown link to a note stands for its file, like [[0020-new-way]] ...
    assert ("12. Old", "superseded_by", "0020-new-way", CONF_SUPERSEDED_BY) in got
    assert ("12. Old", "links_to", "0020-new-way", CONF_LINKS_TO) in got
    assert ("12. Old", "adr_status", "superseded", CONF_ADR_STATUS) in got
    # ... and resolved (by its vault path), for the subject of the note it names.
    resolved = triples(
        facts_of(text, "adr/0012.md", "adr", {"adr/0020-new-way": "20. New way"}.get)
    )
    assert ("12. Old", "superseded_by", "20. New way", CONF_SUPERSEDED_BY) in resolved
    assert ("20. New way", "mentioned_in", "12. Old", CONF_MENTIONED_IN) in resolved


def test_every_note_gets_title_summary_sections_date_and_web_links() -> None:
    text = (
        "# Budget meeting\n\nDate: 2026-02-01\n\n"
        "We agreed to move the archive scanning to March, see [the plan](https://ex.org/p).\n\n"
        "## Decisions\n\nMore scanners.\n\n## See also\n\nNothing.\n\n## Action items\n"
    )
    got = triples(facts_of(text, "sessions/2026-02-03-budget.md", "session", own=True))
    subject = "Budget meeting"
    assert (subject, "title", "Budget meeting", CONF_TITLE) in got
    assert (
        subject,
        "summary",
        "We agreed to move the archive scanning to March, see the plan.",
        CONF_SUMMARY,
    ) in got
    assert (subject, "references", "https://ex.org/p", CONF_REFERENCE) in got
    assert (subject, "date", "2026-02-03", CONF_NAME_DATE) in got  # from the file name
    sections = {o for s, p, o, _ in got if p == "section"}
    # The title heading and template headings ("Decisions", "See also") are not sections.
    assert sections == {"Action items"}


def test_a_plain_prose_note_still_has_facts_about_its_subject() -> None:
    got = triples(facts_of("Minutes of the parish council.\n", "minutes-1.md", own=True))
    assert got == {
        ("minutes 1", "title", "minutes 1", CONF_TITLE),
        ("minutes 1", "summary", "Minutes of the parish council.", CONF_SUMMARY),
    }


def test_a_date_property_wins_over_the_file_name_date() -> None:
    text = "---\ndate: 2026-01-05\n---\nBody text of the note.\n"
    got = triples(facts_of(text, "sessions/2026-01-09-x.md", "session", own=True))
    assert {o for _, p, o, _ in got if p == "date"} == {"2026-01-05"}


def test_adr_rules_only_apply_to_adr_notes() -> None:
    predicates = {f.predicate for f in facts_of(NYGARD, "wiki/x.md", "wiki")}
    assert not predicates & {"adr_status", "decision", "superseded_by", "decided_in", "date"}


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("Accepted", "accepted"),
        ("Approved", "accepted"),
        ("**Proposed** (2024-01-01)", "proposed"),
        ("In Review", "proposed"),
        ("Deprecated in favour of X", "deprecated"),
        ("Rejected", "rejected"),
        ("Superseded by ADR-9", "superseded"),
        ("Elfogadva.", "accepted"),
        ("Elavult. Felváltotta: a 29-es döntés", "deprecated"),
        ("Elutasítva", "rejected"),
        ("Felváltva (2026. május)", "superseded"),
        ("Javasolt", "proposed"),
        ("Whatever", None),
    ],
)
def test_adr_status_normalisation(line: str, status: str | None) -> None:
    assert normalise_adr_status(line) == status


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ("Accepted on 2025-10-06. Superseded by [[0028-one-approval]] in April.", "superseded"),
        ("Accepted 2025-10-06\n\nSuperseded by [[0028-one-approval]]", "superseded"),
        ("- Accepted 2025-10-06\n- Superseded by [[0028-one-approval]]", "superseded"),
        ("Proposed\n\nSuperceded by [2. Foo](0028-one-approval.md)", "superseded"),  # adr-tools
        ("Elavult. Felváltotta: [[0028-one-approval]]", "superseded"),
        ("Deprecated, replaced by [[0028-one-approval]]", "superseded"),
        # this ADR replaced another: it is the one in force
        ("Accepted. Supersedes [[0021-old-approvals]].", "accepted"),
        ("Accepted. Ez a döntés helyettesíti a [[0021-old-approvals]] döntést.", "accepted"),
        # a successor decides, as it does the answer's mark; a template's "none" is none
        ("Rejected; superseded by [[0028-one-approval]] in the end.", "superseded"),
        ("Accepted. Superseded by: N/A", "accepted"),
        ("Accepted", "accepted"),
    ],
)
def test_an_adr_that_names_its_successor_is_superseded(status: str, want: str) -> None:
    text = f"# 23. Two approvals\n\n## Status\n\n{status}\n\n## Context\n\nWhy we did it.\n"
    got = triples(facts_of(text, "adr/0023.md", "adr"))
    assert {o for _, p, o, _ in got if p == "adr_status"} == {want}
    named = {o for _, p, o, _ in got if p == "superseded_by"}
    assert bool(named) == (want == "superseded")  # the status and the answer's mark agree


def test_a_successor_named_in_frontmatter_makes_the_adr_superseded() -> None:
    text = (
        '---\nstatus: accepted\nsuperseded_by: "[[0028-one-approval]]"\n---\n'
        "# 23. Two approvals\n\nWhy we did it.\n"
    )
    got = triples(facts_of(text, "adr/0023.md", "adr"))
    assert {o for _, p, o, _ in got if p == "adr_status"} == {"superseded"}
    # a status string that only mentions succession names no successor: it stays accepted
    text = '---\nstatus: "Accepted, superseded by: none"\n---\n# 23. Two approvals\n\nWhy.\n'
    got = triples(facts_of(text, "adr/0023.md", "adr"))
    assert {o for _, p, o, _ in got if p == "adr_status"} == {"accepted"}


def test_no_generic_predicate_and_no_empty_parts() -> None:
    text = (
        "---\n'': x\nkey: ''\nnone:\nlist: []\n---\n# T\n\nvalue:: \n[[ ]] and [[#Local heading]]"
    )
    facts = facts_of(text)
    assert facts == []


def test_duplicate_facts_keep_the_highest_confidence_once() -> None:
    text = "---\ntags: [infra]\nowner: Bob\n---\n# T\n\nWork #infra\n\nowner:: Bob\n"
    facts = facts_of(text)
    keys = Counter((f.subject, f.predicate, f.object) for f in facts)
    assert max(keys.values()) == 1
    assert triples(facts) == {
        ("T", "owner", "Bob", CONF_PROPERTY),
        ("T", "tagged", "infra", CONF_TAG),
    }


def test_extraction_is_deterministic() -> None:
    text = NYGARD + "\n#b #a [[Z]] [[Y]]\n"
    first = facts_of(text, "adr/1.md", "adr")
    assert first == facts_of(text, "adr/1.md", "adr")
    links = [f.object for f in first if f.predicate == "links_to"]
    assert links == ["20. User models revisited", "User model", "UserProfile", "Z", "Y"]


# --- link resolution --------------------------------------------------------------------

ADR_WITH_LINKS = (
    "---\ntitle: 0021 Cache sessions\nstatus: superseded\n---\n"
    "# 21. Cache sessions\n\n"
    "## Status\n\nSuperseded by [[adr/0030-drop-session-cache]].\n\n"
    "## Decision\n\nWe keep sessions in [[0007-use-redis]] as decided with [[Platform team]].\n"
)
RESOLVED = {
    "0007-use-redis": "0007 Use Redis",
    "adr/0030-drop-session-cache": "0030 Drop the session cache",
}


def resolve(target: str) -> str | None:
    return RESOLVED.get(target.casefold())


def test_resolved_links_name_the_linked_notes_subject_in_every_link_fact() -> None:
    got = triples(facts_of(ADR_WITH_LINKS, "adr/0021-cache-sessions.md", "adr", resolve))
    me = "0021 Cache sessions"
    assert (me, "links_to", "0007 Use Redis", CONF_LINKS_TO) in got
    assert ("0007 Use Redis", "mentioned_in", me, CONF_MENTIONED_IN) in got
    assert ("0007 Use Redis", "decided_in", me, CONF_DECIDED_IN) in got
    contexts = {o for s, p, o, _ in got if p == "context" and s == "0007 Use Redis"}
    assert contexts == {"We keep sessions in 0007-use-redis as decided with Platform team."}
    assert (me, "superseded_by", "0030 Drop the session cache", CONF_SUPERSEDED_BY) in got
    assert (me, "links_to", "0030 Drop the session cache", CONF_LINKS_TO) in got
    # No fact is left on the raw file names of resolved links.
    assert not any(
        "0007-use-redis" in (s, o) or "0030-drop-session-cache" in (s, o) for s, _, o, _ in got
    )


def test_unresolved_links_keep_the_last_path_segment() -> None:
    got = triples(facts_of(ADR_WITH_LINKS, "adr/0021-cache-sessions.md", "adr", resolve))
    assert ("Platform team", "decided_in", "0021 Cache sessions", CONF_DECIDED_IN) in got
    assert ("Platform team", "mentioned_in", "0021 Cache sessions", CONF_MENTIONED_IN) in got


def test_without_a_resolver_links_keep_their_raw_targets() -> None:
    got = triples(facts_of(ADR_WITH_LINKS, "adr/0021-cache-sessions.md", "adr"))
    assert ("0007-use-redis", "decided_in", "0021 Cache sessions", CONF_DECIDED_IN) in got
    assert (
        "0021 Cache sessions",
        "superseded_by",
        "0030-drop-session-cache",
        CONF_SUPERSEDED_BY,
    ) in got


def test_with_a_resolver_links_to_the_notes_own_stem_or_path_are_self_links() -> None:
    text = "# Cache sessions\n\nSee [[0021-cache-sessions]] and [[adr/0021-cache-sessions]].\n"
    facts = facts_of(text, "adr/0021-cache-sessions.md", "wiki", lambda _: "Someone else")
    assert not any(f.predicate in ("links_to", "mentioned_in", "context") for f in facts)
    # Another folder's note of the same stem is not the note itself.
    other = facts_of(
        "# Cache sessions\n\n[[wiki/0021-cache-sessions]]\n",
        "adr/0021-cache-sessions.md",
        "wiki",
        lambda _: None,
    )
    assert ("Cache sessions", "links_to", "0021-cache-sessions") in {
        (f.subject, f.predicate, f.object) for f in other
    }


def test_a_lone_link_property_value_names_the_resolved_subject() -> None:
    text = (
        "---\ntitle: 0006 Flags\nsuperseded_by: '[[0007-use-redis]]'\n"
        "owner: '[[Platform team]]'\nnote: 'see [[0007-use-redis]] too'\n---\n"
    )
    got = {(s, p, o) for s, p, o, _ in triples(facts_of(text, "adr/0006.md", "adr", resolve))}
    assert ("0006 Flags", "superseded_by", "0007 Use Redis") in got
    assert ("0006 Flags", "superseded_by", "0007-use-redis") not in got
    assert ("0006 Flags", "owner", "Platform team") in got  # unresolved: as before
    assert ("0006 Flags", "note", "see 0007-use-redis too") in got  # text, not a lone link
    raw = {(s, p, o) for s, p, o, _ in triples(facts_of(text, "adr/0006.md", "adr"))}
    assert ("0006 Flags", "superseded_by", "0007-use-redis") in raw


def test_extracted_facts_carry_the_key_they_would_compute() -> None:
    """Extraction hashes each fact once and hands the key on with it (ingest stores ~600k):
    the key it carries is the one a fresh Fact of the same fields computes."""
    note = parse_note(
        b"---\ntags: [kafka]\nowner: Platform\n---\n# Kafka  \n\nA log. See [[Redis]] "
        b"and [[ Redis ]].\n\nstatus:: live\n",
        "wiki/kafka.md",
        "wiki",
    )
    facts = extract_facts(note)
    assert facts
    for fact in facts:
        fresh = Fact(
            fact.subject,
            fact.predicate,
            fact.object,
            fact.confidence,
            fact.source_type,
            fact.source_file,
            fact.extractor,
        )
        assert fact.__dict__["key"] == fresh.key == fact.key


def test_body_tags_are_capped_per_note_keeping_the_first() -> None:
    cap = extract_module.MAX_TAGS
    text = "---\ntags: [front]\n---\n" + " ".join(f"#t{i}" for i in range(cap * 3)) + "\n"
    tagged = [f.object for f in facts_of(text) if f.predicate == "tagged"]
    assert tagged == ["front", *(f"t{i}" for i in range(cap - 1))]


@pytest.mark.parametrize(
    ("path", "date"),
    [
        ("daily/2024-02-29.md", "2024-02-29"),
        ("daily/2026-02-30.md", None),
        ("daily/0000-00-00 notes.md", None),
        ("daily/2026-13-01.md", None),
        ("daily/0999-01-01.md", None),
        ("daily/9999-12-31.md", None),
    ],
)
def test_a_file_name_date_must_be_a_real_calendar_day(path: str, date: str | None) -> None:
    got = triples(facts_of("Body text of the daily note.\n", path, "session", own=True))
    assert {o for _, p, o, _ in got if p == "date"} == ({date} if date else set())


SUCCESSION_NOTES = {
    "adr/0023-two.md": "---\ntitle: 0023 Two approvals\n---\n# 23\n\n## Status\n\n"
    "Accepted on 2025-10-06. Superseded by [[0028-one]] in April 2026.\n",
    "adr/0028-one.md": "---\ntitle: 0028 One approval\n---\n# 28\n\n## Status\n\n"
    "Accepted. Replaces [[0023-two]].\n",
    "adr/0025-havi.md": "---\ntitle: 0025 Havi frissítés\n---\n# 25\n\n## Status\n\n"
    "Elavult. Felváltotta: [[0029-renovate]] (2026. május).\n",
    "adr/0029-renovate.md": "---\ntitle: 0029 Renovate\n---\n# 29\n\n## Status\n\n"
    "Elfogadva. Ez a döntés helyettesíti a [[0025-havi]] döntést.\n",
    "adr/0027-sm.md": "---\ntitle: 0027 Secrets Manager\n---\n# 27\n\n"
    "Supersedes [[0022-sops]].\n\n## Context\n\nThe old way was replaced by [[Vault]] "
    "elsewhere, and this text replaces [[Nothing]] either.\n",
}
TITLES = {
    "0028-one": "0028 One approval",
    "0023-two": "0023 Two approvals",
    "0029-renovate": "0029 Renovate",
    "0025-havi": "0025 Havi frissítés",
    "0022-sops": "0022 SOPS",
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("adr/0023-two.md", ("0023 Two approvals", "superseded_by", "0028 One approval")),
        ("adr/0028-one.md", ("0028 One approval", "supersedes", "0023 Two approvals")),
        ("adr/0025-havi.md", ("0025 Havi frissítés", "superseded_by", "0029 Renovate")),
        ("adr/0029-renovate.md", ("0029 Renovate", "supersedes", "0025 Havi frissítés")),
        ("adr/0027-sm.md", ("0027 Secrets Manager", "supersedes", "0022 SOPS")),
    ],
)
def test_succession_in_status_sections_and_lines_in_both_languages(
    path: str, expected: tuple[str, str, str]
) -> None:
    got = facts_of(SUCCESSION_NOTES[path], path, "adr", TITLES.get)
    succession = {
        (f.subject, f.predicate, f.object)
        for f in got
        if f.predicate in ("superseded_by", "supersedes")
    }
    assert succession == {expected}  # prose in Context ("replaced by [[Vault]]") is not one


def test_succession_phrases_are_read_in_adrs_only() -> None:
    text = "---\ntitle: Meeting\n---\n# M\n\nReplaces [[0023-two]] as the rule.\n"
    got = facts_of(text, "sessions/m.md", "session", TITLES.get)
    assert not [f for f in got if f.predicate in ("superseded_by", "supersedes")]


def test_a_roll_call_names_who_took_part_and_is_no_section() -> None:
    """Meeting minutes list who was present under a heading; "who attended …?" is answered
    by those names. Only items right under the heading count (an agenda nested under
    "Participants" is no roll call), and the heading is no ``section`` of the note."""
    text = (
        "# TSC Meeting 2026-04-01\n\n## Present\n\n* Matteo Collina @mcollina (voting member)\n"
        "* Beth Griggs @BethGriggs\n\n## Participants\n\n### Agenda\n\n* Release plan\n\n"
        "## Members\n\n- Ada Example\n\n## Résztvevők\n\n- Kovács Dávid\n\n"
        "## Notes\n\n* Matteo spoke first.\n"
    )
    facts = facts_of(text, "meetings/2026-04-01.md", "session", own=True)
    said = {(f.predicate, f.object) for f in facts if f.predicate in ("participants", "members")}
    assert said == {
        ("participants", "Matteo Collina @mcollina (voting member)"),
        ("participants", "Beth Griggs @BethGriggs"),
        ("participants", "Kovács Dávid"),
        ("members", "Ada Example"),
    }
    assert all(f.confidence == 0.85 for f in facts if f.predicate == "participants")
    sections = {f.object for f in facts if f.predicate == "section"}
    assert sections == {"Agenda"}  # "Notes" is a template heading


def test_a_roll_call_is_bounded() -> None:
    items = "".join(f"* Person {i}\n" for i in range(extract_module.MAX_ROLL_CALL + 20))
    facts = facts_of(f"# M\n\n## Attendees\n\n{items}", own=True)
    assert sum(f.predicate == "participants" for f in facts) == extract_module.MAX_ROLL_CALL
