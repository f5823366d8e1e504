"""Markdown parsing: frontmatter, titles, links, tags, inline fields, bad input."""

from __future__ import annotations

import hashlib
import itertools
import pickle
import re
import time
import unicodedata
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.errors import InputError
from pipeline.model import SourceType
from pipeline.vault.parse import (
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    OPENINGS_KEPT,
    SUMMARY_MAX_CHARS,
    Collapsed,
    ParsedNote,
    clip_text,
    lone_link,
    opening_key,
    parse_note,
    read_note,
)


def parse(text: str, path: str = "wiki/note.md", stype: SourceType = "wiki") -> ParsedNote:
    return parse_note(text.encode("utf-8"), path, stype)


def targets(note: ParsedNote) -> list[str]:
    return [link.target for link in note.links]


# --- links ----------------------------------------------------------------------------


def test_lone_link_is_the_target_of_a_value_that_is_only_one_link() -> None:
    assert lone_link(" [[adr/0007-use-redis.md#Decision|the ADR]] ") == "adr/0007-use-redis"
    assert lone_link("![[Diagram.png]]") == "Diagram.png"
    assert lone_link("see [[Redis]]") is None
    assert lone_link("[[A]] and [[B]]") is None


def test_wikilink_forms_give_bare_targets() -> None:
    note = parse("See [[Redis]], [[Kafka|the log]], [[PostgreSQL#Indexes]] and [[Raft#^b1]].")
    assert targets(note) == ["Redis", "Kafka", "PostgreSQL", "Raft"]


def test_embeds_are_links_but_attachments_are_not() -> None:
    note = parse("![[Architecture]] and ![[diagram.png]] and [[spec.pdf]] and [[Node.js]]")
    assert targets(note) == ["Architecture", "Node.js"]
    assert [link.embed for link in note.links] == [True, False]


def test_links_inside_code_are_not_links() -> None:
    text = (
        "Real [[Alpha]] and `[[InlineCode]]`.\n\n"
        "```\n[[Fenced]]\n```\n\n"
        "~~~python\nx = '[[Tilde]]'\n~~~\n\n"
        "    [[Indented]]\n\n"
        "<div>[[Html]]</div>\n\n"
        "Escaped \\[\\[NotALink\\]\\] and [[Beta]]."
    )
    assert targets(parse(text)) == ["Alpha", "Beta"]


def test_each_target_counted_once_with_first_mention_context() -> None:
    note = parse("First [[Redis]] here. Then [[redis]] again.\n\n- A list item on [[Redis]]")
    assert targets(note) == ["Redis"]
    assert note.links[0].context == "First Redis here."
    assert note.links[0].line == 1


def test_context_is_the_sentence_or_the_list_item() -> None:
    text = (
        "Intro sentence. We moved the cache to [[Redis]] last week! Another one.\n\n"
        "- a **bold** item about [[Kafka|the log]] and `code`\n"
    )
    note = parse(text)
    contexts = {link.target: link.context for link in note.links}
    assert contexts == {
        "Redis": "We moved the cache to Redis last week!",
        "Kafka": "a bold item about the log and code",
    }


def test_context_is_clipped_to_240_chars_and_keeps_the_mention() -> None:
    filler = " ".join(f"word{i}" for i in range(80))
    note = parse(f"{filler} [[Target]] {filler}.")
    context = note.links[0].context
    assert context is not None
    assert len(context) <= 240
    assert "Target" in context
    assert context.startswith("…") and context.endswith("…")


def test_a_sentence_does_not_end_inside_a_link_s_text() -> None:
    text = (
        "Superseded by [12. Use custom users, plus WHOIS](./0012-users.md) in May. "
        "We asked [[Mr. Smith]] to review it. Done. See [[Inc.]]. Afterwards the team "
        "wrote [[ADR 12. Use Redis]] and more. We chose [[Why Rust?]] Then we moved on."
    )
    note = parse(text)
    contexts = {link.target: link.context for link in note.links}
    assert contexts == {
        "wiki/0012-users": "Superseded by 12. Use custom users, plus WHOIS in May.",
        "Mr. Smith": "We asked Mr. Smith to review it.",
        "Inc.": None,  # "See Inc.." says no more than the link; a link's last dot ends it
        "ADR 12. Use Redis": "Afterwards the team wrote ADR 12. Use Redis and more.",
        "Why Rust?": "We chose Why Rust?",
    }


TEAM_TABLE = (
    "The people on the programme, by role.\n\n"
    "| role | person |\n"
    "|------|:------:|\n"
    "| programme lead | [[Helen Marsh]] |\n"
    "| conservator (0.6 FTE) | [[Tomasz Wrobel\\|Tomasz]] |\n"
    "|  | [[Ines Carvalho]] |\n"
    "| volunteers, middle cell empty |  | [[Priscilla Adeyemi]] |\n"
)


def test_a_table_row_is_its_links_context_and_never_a_summary() -> None:
    note = parse(TEAM_TABLE)
    contexts = {link.target: (link.context, link.line) for link in note.links}
    # Each row alone, its cells joined as an excerpt shows them (empty cells left out),
    # on the row's own line; not the whole table as one paragraph.
    assert contexts == {
        "Helen Marsh": ("programme lead · Helen Marsh", 5),
        "Tomasz Wrobel": ("conservator (0.6 FTE) · Tomasz", 6),
        "Ines Carvalho": (None, 7),  # a name alone says no more than the mention
        "Priscilla Adeyemi": ("volunteers, middle cell empty · Priscilla Adeyemi", 8),
    }
    [table] = [block for block in note.blocks if block.kind == "table"]
    assert table.line == 3
    assert table.text == (
        "role · person programme lead · Helen Marsh conservator (0.6 FTE) · Tomasz "
        "Ines Carvalho volunteers, middle cell empty · Priscilla Adeyemi"
    )
    assert note.summary == "The people on the programme, by role."
    table_first = parse_note(TEAM_TABLE.split("\n\n", 1)[1].encode(), "wiki/t.md", "wiki")
    assert table_first.summary is None and table_first.openings == ()


def test_a_table_keeps_every_cell_and_ends_at_a_line_without_a_pipe() -> None:
    text = (
        "Lead text before the table, in the same paragraph as it.\n"
        "| Term | Meaning |\n"
        "|---|---|\n"
        "| cache | see `redis|valkey` for [[Redis]] #infra |\n"
        "| owner | [[Ann]] | [[Bob]] | https://x.org [y](https://y.org) [due:: 2026-01-01] |\n"
        "status:: accepted\n"
        "A sentence right under the table about [[Kafka]] and its topics.\n"
    )
    note = parse(text)
    # A cell past the header's count is kept (links index the raw text, as Obsidian's do).
    assert targets(note) == ["Redis", "Ann", "Bob", "Kafka"]
    assert note.tags == ("infra",)
    assert note.urls == ("https://y.org",)
    assert [(f.key, f.value) for f in note.inline_fields] == [
        ("due", "2026-01-01"),
        ("status", "accepted"),
    ]
    kinds = [(block.kind, block.line) for block in note.blocks]
    assert kinds == [("paragraph", 1), ("table", 2), ("paragraph", 6)]
    contexts = {link.target: link.context for link in note.links}
    assert contexts["Redis"] == "cache · see redis|valkey for Redis #infra"
    assert contexts["Kafka"] == "A sentence right under the table about Kafka and its topics."
    # The paragraph after the table opens with a field line: the sentence is the summary.
    assert note.summary == "Lead text before the table, in the same paragraph as it."


@pytest.mark.parametrize(
    "text",
    [
        "| a | b |\n|---|\n| c | d |\n",  # the delimiter row's cells must match the header's
        "a | b and more words here\nc | d\n",  # no delimiter row at all
        "| a | b |\n| c | d |\n",
    ],
)
def test_lines_with_pipes_but_no_table_stay_a_paragraph(text: str) -> None:
    assert [block.kind for block in parse(text).blocks] == ["paragraph"]


def test_a_table_in_a_list_item_or_a_quote_is_a_table_there_too() -> None:
    text = "- item\n\n  | a | b |\n  |---|---|\n  | [[X]] row | c d |\n\n> | a | b |\n> |---|---|\n"
    note = parse(text)
    assert [block.kind for block in note.blocks] == ["item", "table", "table"]
    assert note.links[0].context == "X row · c d"


def test_a_field_line_stays_a_field_in_a_table_and_a_callout_title_row_is_split() -> None:
    note = parse("key:: v | x\n--- | ---\na | [[B]] c\n")
    assert [(f.key, f.value) for f in note.inline_fields] == [("key", "v | x")]
    assert note.blocks[0].kind == "table"
    callout = parse("> [!info] Area | Owner [[Z]]\n> |---|---|\n> | db | [[Ann]] runs it |\n")
    assert callout.blocks[0].text == "Area · Owner Z db · Ann runs it"


def test_path_link_keeps_target_and_subject_is_the_name() -> None:
    note = parse("See [[wiki/infra/Redis.md|cache]].")
    assert note.links[0].target == "wiki/infra/Redis"
    assert note.links[0].subject == "Redis"


def test_frontmatter_links_count_as_links_without_context() -> None:
    note = parse('---\nowner: "[[Alice]]"\nrelated: ["[[Bob]]", plain]\n---\nBody with [[Bob]].')
    assert targets(note) == ["Alice", "Bob"]
    assert note.links[0].context is None
    assert note.links[1].context == "Body with Bob."


def test_an_escaped_pipe_in_a_table_row_separates_target_and_alias() -> None:
    # Obsidian tables escape the pipe inside a wikilink; markdown reads "\|" as an escape.
    text = (
        "| Setting | Where |\n|---|---|\n"
        "| the settings folder | [[Configuration folder\\|Config directory]] |\n"
    )
    note = parse(text)
    assert targets(note) == ["Configuration folder"]
    assert note.links[0].subject == "Configuration folder"
    assert note.links[0].context == "the settings folder · Config directory"
    table = note.blocks[-1]
    assert table.kind == "table" and table.text.endswith(note.links[0].context)
    assert "\ufffc" not in table.text


def test_escapes_entities_and_code_inside_a_link_keep_the_rest_of_the_line_in_step() -> None:
    note = parse("See [[A\\|b]], [[AT&amp;T]] and [[x\\_y]] then `code` and \\* here.")
    assert targets(note) == ["A", "AT&T", "x_y"]
    assert note.blocks[0].text == "See b, AT&T and x_y then code and * here."


def test_a_literal_object_replacement_character_never_shifts_the_stand_ins() -> None:
    note = parse("A\ufffcB [[X\ufffcY]] and `code` \\[\\[Not\\]\\] [[Z]].\n\nkey:: v\ufffcw\n")
    assert targets(note) == ["XY", "Z"]
    assert note.blocks[0].text == "AB XY and code [[Not]] Z."
    assert [(f.key, f.value) for f in note.inline_fields] == [("key", "vw")]
    assert not any("\ufffc" in link.subject + (link.context or "") for link in note.links)


def test_a_field_whose_value_is_one_link_with_an_escaped_pipe_names_the_target() -> None:
    note = parse("| owner:: [[Ops team\\|Ops]] |\n\nlead:: [[Ana\\|A.]]\n")
    assert [(f.key, f.value) for f in note.inline_fields] == [("lead", "Ana")]
    assert targets(note) == ["Ops team", "Ana"]


# --- tags -----------------------------------------------------------------------------


def test_tags_nested_and_not_numbers_headings_code_or_url_fragments() -> None:
    text = (
        "---\ntags: [project/alpha, '#meta']\n---\n"
        "# Heading is not a tag\n\n"
        "Text #infra/db/postgres and #Redis, issue #123, year #2024, see "
        "https://example.com/page#section and `#notatag` and C#.\n\n"
        "```\n#fenced\n```\n"
    )
    assert parse(text).tags == ("project/alpha", "meta", "infra/db/postgres", "Redis")


def test_frontmatter_tags_as_a_string() -> None:
    assert parse("---\ntags: alpha, beta gamma\n---\n").tags == ("alpha", "beta", "gamma")


def test_hungarian_tags_links_and_titles() -> None:
    text = "# Árvíztűrő tükörfúrógép\n\nA [[Gyorsítótár]] beállítása #műszaki/gyorsítótár kész."
    note = parse(text)
    assert note.title == "Árvíztűrő tükörfúrógép"
    assert targets(note) == ["Gyorsítótár"]
    assert note.tags == ("műszaki/gyorsítótár",)
    assert note.links[0].context == "A Gyorsítótár beállítása #műszaki/gyorsítótár kész."


# --- inline fields --------------------------------------------------------------------


def test_inline_fields_own_line_bracketed_and_parenthesised() -> None:
    text = (
        "status:: in progress\n"
        "Talk to [owner:: [[Alice]]] about it (priority:: high).\n\n"
        "- due:: 2024-05-01\n"
        "- `code:: not a field`\n\n"
        "```\nfenced:: no\n```\n"
    )
    fields = [(f.key, f.value) for f in parse(text).inline_fields]
    assert fields == [
        ("status", "in progress"),
        ("owner", "Alice"),
        ("priority", "high"),
        ("due", "2024-05-01"),
    ]


def test_inline_field_line_is_its_own_context() -> None:
    note = parse("Some prose here\nreviewed:: by [[Alice]] on Monday\nmore prose.")
    assert note.links[0].context == "reviewed:: by Alice on Monday"


def test_a_sentence_saying_no_more_than_its_link_is_no_context() -> None:
    text = (
        "owner:: [[Platform team]]\n\nSee [[Observability]].\n\n![[On-call#What pages]]\n\n"
        "- [[Runbook - Redis failover]]\n\nOwned by [[Search team]].\n\n"
        "Related: [[Kafka]], [[Redis|the cache]].\n\n"
        "[[监控]]负责所有告警。\n\n"
        "Later: the [[Platform team]] runs the [[Observability]] stack.\n"
    )
    contexts = {link.target: link.context for link in parse(text).links}
    assert contexts == {
        # A field's value is already a property of the note's subject; a later sentence
        # saying more about it is its context.
        "Platform team": "Later: the Platform team runs the Observability stack.",
        "Observability": "Later: the Platform team runs the Observability stack.",
        "On-call": None,
        "Runbook - Redis failover": None,
        "Search team": "Owned by Search team.",
        # Other links' words are no words about this one.
        "Kafka": None,
        "Redis": None,
        # A Han or kana character is a word: those scripts write no spaces.
        "监控": "监控负责所有告警。",
    }


# --- callouts -------------------------------------------------------------------------


def test_callout_text_counts_and_marker_is_dropped() -> None:
    text = "> [!warning] Careful\n> Eviction depends on [[LRU]] #ops\n> reviewer:: Bob\n"
    note = parse(text)
    assert targets(note) == ["LRU"]
    assert note.tags == ("ops",)
    assert [(f.key, f.value) for f in note.inline_fields] == [("reviewer", "Bob")]
    assert note.links[0].context == "Eviction depends on LRU #ops"
    assert note.blocks[0].kind == "quote"
    assert not note.blocks[0].text.startswith("[!")


# --- frontmatter, title, aliases ------------------------------------------------------


def test_title_prefers_frontmatter_then_h1_then_stem() -> None:
    assert parse("---\ntitle: From FM\n---\n# From H1").title == "From FM"
    assert parse("Intro\n\n# From H1\n\n# Second").title == "From H1"
    assert parse("no heading", path="wiki/my-note_name.md").title == "my note name"


def test_subject_defaults_to_title_and_unwraps_a_link() -> None:
    assert parse("# Title").subject == "Title"
    assert parse('---\nsubject: "[[Redis]]"\n---\n# Title').subject == "Redis"


def test_aliases_from_list_or_string() -> None:
    assert parse("---\naliases: [pg, Postgres]\n---\n").aliases == ("pg", "Postgres")
    assert parse("---\naliases: pg\n---\n").aliases == ("pg",)


def test_body_excludes_frontmatter_and_embed_text_has_title() -> None:
    raw = "---\ntitle: T\nx: 1\n---\nBody line.\n"
    note = parse(raw)
    assert note.body == "Body line.\n"
    assert note.embed_text == "T\n\nBody line.\n"
    assert note.content_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert note.frontmatter_lines == 4


def test_embed_text_is_prose_without_link_heading_or_emphasis_syntax() -> None:
    raw = (
        "# Cache\n\nWe put a [[Warm cache|warm layer]] on [[infra/Redis]] (see [[Redis#Sizing]],"
        " [[#Decision]]).\n\n## Decision\n\n**Use** `SET` with a [TTL](https://redis.io/ttl);"
        " keep snake_case_names.\n"
    )
    text = parse(raw).embed_text
    assert "warm layer on Redis (see Redis, Decision)." in text
    assert "Use SET with a TTL; keep snake_case_names." in text
    assert "\n## Decision\n" in text  # heading marks stay
    assert not any(mark in text for mark in ("[[", "]]", "](", "**", "`"))


def test_embed_text_strips_syntax_in_linear_time_on_hostile_runs() -> None:
    # Unclosed brackets and long runs of marks: each pattern scans the text once.
    raw = "[[" + "a" * 200_000 + "\n" + "[" * 100_000 + "*" * 100_000 + "](" * 50_000
    started = time.perf_counter()
    text = parse(raw).embed_text
    assert time.perf_counter() - started < 5.0
    assert "*" not in text


def test_frontmatter_lists_and_values_are_kept() -> None:
    note = parse("---\nports: [6379, 6380]\nsince: 2023-05-01\n---\n")
    assert list(note.frontmatter["ports"]) == [6379, 6380]
    assert str(note.frontmatter["since"]) == "2023-05-01"


def test_crlf_and_bom_are_accepted() -> None:
    note = parse_note(b"\xef\xbb\xbf---\r\ntitle: T\r\n---\r\nSee [[X]].\r\n", "a.md", "wiki")
    assert note.title == "T"
    assert targets(note) == ["X"]


def test_block_lines_count_the_frontmatter() -> None:
    note = parse("---\na: 1\n---\n# H\n\nPara [[X]]\n")
    assert note.links[0].line == 6


# --- bad input ------------------------------------------------------------------------


def test_invalid_yaml_names_file_and_line() -> None:
    with pytest.raises(InputError) as info:
        parse("---\ntitle: ok\nbad: [unclosed\nnext: 1\n---\n", path="wiki/bad.md")
    assert info.value.file == "wiki/bad.md"
    assert info.value.line == 4
    assert "started at line 3" in info.value.reason


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A frontmatter whose anchors expand to width**levels values ("billion laughs")."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * width)}]")
    return "---\n" + "\n".join(lines) + "\n---\nBody with [[Link]].\n"


def test_yaml_alias_bomb_is_refused_quickly_with_its_line(
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    with deadline(10), pytest.raises(InputError) as info:
        parse(alias_bomb(), path="wiki/bomb.md")
    assert info.value.file == "wiki/bomb.md"
    # The line of an anchor whose expansion is too big (the YAML spans lines 2-10).
    assert info.value.line is not None and 2 <= info.value.line <= 10
    assert "alias" in info.value.reason


@pytest.mark.parametrize(
    "value",
    ["[" * 990 + "]" * 990, "{a: " * 990 + "1" + "}" * 990],
    ids=["flow-list", "flow-mapping"],
)
def test_frontmatter_nested_990_deep_is_refused_with_its_line(value: str) -> None:
    with pytest.raises(InputError) as info:
        parse(f"---\ntitle: Deep\nx: {value}\n---\nBody\n", path="wiki/deep.md")
    assert info.value.line == 3
    assert "deep" in info.value.reason


def test_block_nesting_too_deep_names_the_line_where_it_crosses_the_bound() -> None:
    nested = "".join("  " * i + "a:\n" for i in range(200)) + "  " * 200 + "leaf\n"
    with pytest.raises(InputError) as info:
        parse("---\n" + nested + "---\nBody\n")
    # Depth 1 is the frontmatter mapping itself, on line 2.
    assert info.value.line == MAX_YAML_DEPTH + 1


def test_recursive_yaml_alias_is_refused() -> None:
    with pytest.raises(InputError, match="refers to itself") as info:
        parse("---\ntitle: T\nloop: &loop [a, *loop]\n---\nBody\n")
    assert info.value.line == 3


def test_shared_anchors_within_the_bounds_are_loaded() -> None:
    note = parse("---\nbase: &b {owner: '[[Ops]]'}\nprod: *b\nstaging: *b\n---\nBody\n")
    assert note.frontmatter["prod"] == {"owner": "[[Ops]]"}
    assert targets(note) == ["Ops"]


def test_frontmatter_that_is_not_a_mapping_is_an_error() -> None:
    with pytest.raises(InputError, match="mapping"):
        parse("---\n- a\n- b\n---\n")


def test_a_thematic_break_opening_the_note_is_body() -> None:
    note = parse("---\n\n# Title\n\nText: with a colon.\n")
    assert note.frontmatter == {}
    assert note.title == "Title"


def test_frontmatter_opened_and_never_closed_is_refused_with_its_line() -> None:
    with pytest.raises(InputError) as info:
        parse("---\nsubject: Redis\ntags: [cache]\n\n# Title\n", path="wiki/open.md")
    assert info.value.file == "wiki/open.md"
    assert info.value.line == 1
    assert "never closed" in info.value.reason


@pytest.mark.parametrize(
    ("yaml_text", "key", "line", "first"),
    [
        ("subject: A\ntitle: T\nsubject: B\n", "subject", 4, 2),
        ("owner:\n  name: A\n  name: B\n", "name", 4, 3),
        ("a: 1\n'a': 2\n", "a", 3, 2),
    ],
    ids=["top-level", "nested", "quoted"],
)
def test_a_duplicate_frontmatter_key_is_refused_naming_key_and_lines(
    yaml_text: str, key: str, line: int, first: int
) -> None:
    with pytest.raises(InputError) as info:
        parse(f"---\n{yaml_text}---\nBody\n", path="wiki/dup.md")
    assert info.value.file == "wiki/dup.md"
    assert info.value.line == line
    assert f"duplicate key '{key}'" in info.value.reason
    assert f"first at line {first}" in info.value.reason


def test_a_merge_key_overridden_by_a_key_of_its_own_is_not_a_duplicate() -> None:
    note = parse("---\nbase: &b {a: 1, b: 2}\nprod:\n  <<: *b\n  b: 3\n---\nBody\n")
    assert note.frontmatter["prod"] == {"a": 1, "b": 3}


def test_a_long_plain_list_is_refused_saying_what_was_found_and_the_limit() -> None:
    tags = "".join(f"  - t{i}\n" for i in range(100_000))
    with pytest.raises(InputError) as info:
        parse(f"---\ntitle: T\ntags:\n{tags}---\nBody\n", path="wiki/long.md")
    reason = info.value.reason
    assert "100,000 items" in reason
    assert f"at most {MAX_YAML_VALUES:,}" in reason
    assert "alias" not in reason
    assert info.value.line == 4


def test_an_impossible_frontmatter_date_stays_text() -> None:
    note = parse("---\ndate: 2026-02-30\nzero: 0000-00-00\nok: 2024-02-29\n---\nBody\n")
    assert note.frontmatter["date"] == "2026-02-30"
    assert note.frontmatter["zero"] == "0000-00-00"
    assert str(note.frontmatter["ok"]) == "2024-02-29"


@pytest.mark.parametrize(
    ("text", "path", "said"),
    [
        ("---\ndate: 2026-02-30\n---\nBody\n", "wiki/n.md", "its date '2026-02-30'"),
        ("---\ncreated: March 2024\n---\nBody\n", "wiki/n.md", "its created 'March 2024'"),
        ("---\ndate: ２０２６-01-01\n---\nBody\n", "wiki/n.md", "its date '２０２６-01-01'"),
        ("# 23. Pool\n\nDate: 2023-13-10\n\n## Context\n\nText.\n", "adr/0023.md",
         "its Date: line '2023-13-10'"),
        ("---\ndate: '[[2024-13-10]]'\n---\nBody\n", "wiki/n.md", "its date '2024-13-10'"),
    ],
)  # fmt: skip
def test_a_stated_day_that_cannot_be_read_is_said_and_the_note_undated(
    text: str, path: str, said: str
) -> None:
    note = parse(text, path, "adr" if path.startswith("adr") else "wiki")
    assert note.date is None
    assert note.date_problem == f"{said} is not a day as YYYY-MM-DD: the note is undated"


@pytest.mark.parametrize("year", ["3024-03-10", "'0224-03-10'"])
def test_a_typed_year_outside_the_dates_notes_have_is_said(year: str) -> None:
    note = parse(f"---\ndate: {year}\n---\nBody\n")
    assert note.date is None
    assert note.date_problem == (
        f"its date '{year.strip(chr(39))}' names a year outside 1000–2999: the note is undated"
    )


@pytest.mark.parametrize(
    "stated",
    ["'[[2024-03-10]]'", "'[[2024-03-10|Sunday]]'", "[[2024-03-10]]", "[2024-03-10]"],
)
def test_a_day_written_as_a_link_to_its_daily_note_dates_the_note(stated: str) -> None:
    """Obsidian's properties keep a date property that links its daily note as
    "[[2024-03-10]]"; unquoted, YAML reads it as a list in a list."""
    note = parse(f"---\ndate: {stated}\n---\nBody\n")
    assert (note.date, note.date_problem) == ("2024-03-10", None)


@pytest.mark.parametrize(
    "text",
    [
        "---\ndate: 2026-02-03\n---\nBody\n",  # read
        "---\ndate: 0000-01-01\n---\nBody\n",  # no date, on purpose
        "---\ndate: 9999-12-31\n---\nBody\n",  # no date, on purpose (a YAML date)
        "---\ndate: '{{date:YYYY-MM-DD}}'\n---\nBody\n",  # a template's placeholder
        "---\ndate:\n---\nBody\n",  # empty
        "---\ndate: 2026-13-01\ncreated: 2026-01-05\n---\nBody\n",  # dated by created
        "Body without a date\n",
    ],
)
def test_a_note_dated_or_stating_no_day_has_no_date_problem(text: str) -> None:
    assert parse(text).date_problem is None


def test_non_utf8_names_offset_and_line() -> None:
    with pytest.raises(InputError) as info:
        parse_note(b"line one\nline two caf\xe9\n", "x.md", "wiki")
    assert info.value.line == 2
    assert "byte offset 21" in info.value.reason


def test_binary_is_an_error() -> None:
    with pytest.raises(InputError, match="NUL"):
        parse_note(b"abc\x00def", "x.md", "wiki")


def test_too_big_is_refused_before_reading(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("x" * 101, encoding="utf-8")
    with pytest.raises(InputError, match="101 bytes"):
        read_note(tmp_path, "big.md", "wiki", max_bytes=100)
    assert read_note(tmp_path, "big.md", "wiki", max_bytes=101).bytes == 101


def test_read_note_records_mtime_and_size(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_text("# N\n", encoding="utf-8")
    note = read_note(tmp_path, "n.md", "session", max_bytes=1000)
    assert note.mtime == path.stat().st_mtime
    assert note.note.bytes == 4
    assert note.note.source_type == "session"


def test_clip_text_collapses_whitespace() -> None:
    assert clip_text("  a \n\t b  ", 240) == "a b"
    clipped = clip_text("word " * 100, 50)
    assert len(clipped) <= 50 and clipped.endswith("…")


def reference_clip(text: str, limit: int, focus: int = 0) -> str:
    """The former clip_text, kept as the specification: collapse the whole text, then cut
    (quadratic when called for every link of a long paragraph, hence Collapsed)."""
    head = re.sub(r"\s+", " ", text[:focus]).lstrip()
    tail = re.sub(r"\s+", " ", text[focus:]).rstrip()
    if not head:
        tail = tail.lstrip()
    full = head + tail
    if len(full) <= limit:
        return full
    f = len(head)
    begin = 0
    if f > limit // 3:
        begin = f - limit // 3
        space = full.rfind(" ", 0, begin + 1)
        begin = space + 1 if space > 0 and begin - space < 40 else begin
    prefix = "…" if begin > 0 else ""
    room = limit - len(prefix) - 1
    piece = full[begin : begin + room]
    if begin + room < len(full):
        space = piece.rfind(" ")
        if space > len(piece) // 2:
            piece = piece[:space]
        return prefix + piece.rstrip() + "…"
    return prefix + full[begin:]


@given(
    text=st.text(alphabet="ab .\t\n\u00a0…", max_size=700),
    limit=st.integers(min_value=3, max_value=300),
    data=st.data(),
)
def test_clipping_a_range_of_the_collapsed_text_equals_clipping_the_slice(
    text: str, limit: int, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text) + 1))  # sentence ranges may run one past
    focus = data.draw(st.integers(start, min(end, len(text))))
    expected = reference_clip(text[start:end], limit, focus - start)
    assert Collapsed(text).clip(start, end, focus, limit) == expected
    assert clip_text(text[start:end], limit, focus - start) == expected


MINUTES = (
    "# Weekly sync 2026-03-04\n\n"
    "Last week's notes are linked here: <https://docs.example.com/d/0001>\n\n"
    "## This week\n\n* Ada Example @ada (core team member)\n\n"
    "Short line.\n\n"
    "Security releases went out on Tuesday after a long review.\n"
)


def test_a_summary_skips_the_openings_the_vault_calls_templates() -> None:
    note = parse_note(MINUTES.encode(), "minutes/2026-03-04.md", "session")
    texts = [text for _, text in note.openings]
    # Paragraphs of five words and more, in order; fields, dates and short lines never.
    assert texts == [
        "Last week's notes are linked here: https://docs.example.com/d/0001",
        "Ada Example @ada (core team member)",
        "Security releases went out on Tuesday after a long review.",
    ]
    assert note.summary == texts[0]  # no template known: the first, as before
    keys = [key for key, _ in note.openings]
    templated = note.with_templates(frozenset(keys[:2]) | {12345})
    assert templated.templates == frozenset(keys[:2])  # only its own openings
    assert templated.summary == texts[2]
    assert templated.openings is note.openings  # found once
    # Every opening a template (a note among copies of itself): its first, not nothing.
    assert note.with_templates(frozenset(keys)).summary == texts[0]


def test_a_roll_call_or_a_link_list_is_never_a_summary() -> None:
    text = (
        "# Steering meeting 2026-03-04\n\n## Links\n\n"
        "* **Minutes**: : <https://docs.example.com/d/0001>\n\n"
        "## Present\n\n### Members\n\n* Ada Example @ada (core team)\n\n"
        "## Not present\n\n* Bob Example @bob (core team)\n\n"
        "## Agenda\n\n* The security release went out on Tuesday.\n"
    )
    note = parse_note(text.encode(), "minutes/2026-03-04.md", "session")
    assert [t for _, t in note.openings] == ["The security release went out on Tuesday."]
    # Only the nearest heading counts: an agenda nested under "Participants" is kept.
    text = (
        "# Core meeting\n\n## Participants\n\n* Ada Example, Bob Example and Cy Example\n\n"
        "### Upcoming releases\n\nThe next patch release is due on Friday.\n"
    )
    note = parse_note(text.encode(), "minutes/core.md", "session")
    assert note.summary == "The next patch release is due on Friday."
    # A note's title is no list heading, whatever its name.
    text = (
        "# Observers\n\nObservers are members who may attend every meeting but not vote.\n\n"
        "## History\n\nThe role came with the charter amendment of 2019.\n"
    )
    assert parse_note(text.encode(), "wiki/observers.md", "wiki").summary == (
        "Observers are members who may attend every meeting but not vote."
    )
    # A note of nothing but a list keeps its first line rather than no summary.
    text = "# Links\n\n## See also\n\n* Our handbook, the onboarding guide and the runbook\n"
    note = parse_note(text.encode(), "wiki/links.md", "wiki")
    assert note.summary == "Our handbook, the onboarding guide and the runbook"


NYGARD = (
    "# 12. Use custom user models\n\nDate: 2022-09-26\n\n## Status\n\n"
    "Superseded by [20. User models revisited, plus WHOIS](./0020-user-models.md)\n\n"
    "## Context\n\nThe framework recommends a custom user model in the first migration.\n"
)


def test_an_adr_s_status_section_is_never_its_summary() -> None:
    adr = parse_note(NYGARD.encode(), "adr/0012-users.md", "adr")
    assert adr.summary == "The framework recommends a custom user model in the first migration."
    assert [text for _, text in adr.openings] == [adr.summary]
    # The same words in a note that is no ADR: a Status heading is only a heading there.
    wiki = parse_note(NYGARD.encode(), "wiki/users.md", "wiki")
    assert wiki.summary == "Superseded by 20. User models revisited, plus WHOIS"
    # An ADR holding nothing but its status keeps that line rather than no summary.
    bare = NYGARD.split("## Context")[0]
    only = parse_note(bare.encode(), "adr/0012-users.md", "adr")
    assert only.summary == "Superseded by 20. User models revisited, plus WHOIS"


@pytest.mark.parametrize(
    "banner",
    [
        "> [!note]\n> Superseded by [[0014-flags]] in April 2026.",
        "**Replaced by [[0014-flags]] after the price doubled.**",
        "> Felváltotta: [[0014-flags]], mert a licenc ára megduplázódott.",
    ],
)
def test_an_adr_s_succession_banner_above_its_sections_is_never_its_summary(
    banner: str,
) -> None:
    context = "We ship risky changes and want to turn them on per workspace."
    text = f"# 6. Use a flag vendor\n\n{banner}\n\n## Context\n\n{context}\n"
    assert parse_note(text.encode(), "adr/0006-flags.md", "adr").summary == context
    # Inside a section the same words are the decision's own prose.
    inside = f"# 6. Use a flag vendor\n\n## Context\n\n{banner}\n\n{context}\n"
    assert parse_note(inside.encode(), "adr/0006-flags.md", "adr").summary != context
    # Below a paragraph of the note's own, too.
    below = f"# 6. Use a flag vendor\n\n{context}\n\n{banner}\n\n## Context\n\nMore.\n"
    openings = parse_note(below.encode(), "adr/0006-flags.md", "adr").openings
    assert len(openings) == 2


def test_only_a_banner_naming_its_successor_by_a_link_is_a_status() -> None:
    # Prose that happens to open with "Replaces" names no decision: it stays the summary,
    # in a note without sections as under its title.
    prose = "Replaces the nightly batch job with a streaming consumer of the events."
    text = f"# Use streaming\n\n{prose}\n\n## Considered options\n\n* Batch\n"
    assert parse_note(text.encode(), "adr/0031-streaming.md", "adr").summary == prose
    assert parse_note(prose.encode(), "adr/0031-streaming.md", "adr").summary == prose


def test_an_adr_s_status_line_is_never_its_summary_but_beats_a_short_paragraph() -> None:
    madr = (
        "# Use Q\n\n* Status: superseded by [ADR-0005 Use Q. Really](0005-use-q.md)\n"
        "* Deciders: Ann\n\n## Context\n\nWe need a queue that survives a restart.\n"
    )
    assert parse_note(madr.encode(), "adr/0004-q.md", "adr").summary == (
        "We need a queue that survives a restart."
    )
    # Nothing else of five words: the status says more than "Deciders: Ann".
    bare = madr.split("## Context")[0]
    assert parse_note(bare.encode(), "adr/0004-q.md", "adr").summary == (
        "Status: superseded by ADR-0005 Use Q. Really"
    )


def test_a_summary_is_clipped_whichever_opening_it_is() -> None:
    long = " ".join(f"word{i}" for i in range(200))
    other = " ".join(f"term{i}" for i in range(200))
    note = parse_note(f"# Long\n\n{long}\n\n{other}\n".encode(), "wiki/long.md", "wiki")
    assert [key for key, _ in note.openings] == [opening_key(long), opening_key(other)]
    assert note.summary == note.lead == clip_text(long, SUMMARY_MAX_CHARS)
    second = note.with_templates(frozenset({opening_key(long)}))
    assert second.summary == clip_text(other, SUMMARY_MAX_CHARS)
    assert len(second.summary) <= SUMMARY_MAX_CHARS


def test_an_opening_key_ignores_links_digits_punctuation_and_case() -> None:
    week = opening_key("Last week's notes are linked here: <https://docs.example.com/d/0001>")
    assert week == opening_key("last WEEK'S notes are linked here https://docs.example.com/d/99")
    assert opening_key("Weekly sync of the team, 2018-09-05") == opening_key(
        "Weekly sync of the team: 2026-03-04"
    )
    assert week != opening_key("Next week's notes are linked here: <https://x.example/d/0001>")
    assert -(2**63) <= week < 2**63  # KO-DB stores it as a signed 64-bit integer


def test_an_opening_key_reads_composed_and_decomposed_letters_alike() -> None:
    composed = unicodedata.normalize("NFC", "Résumé of the café meeting today")
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert opening_key(composed) == opening_key(decomposed)


def test_an_opening_key_keeps_combining_marks_with_their_letters() -> None:
    # Devanagari writes vowels as marks: without them these are one line.
    assert opening_key("मीटिंग में आज चर्चा हुई") != opening_key("मटग म आज चरच हई")
    # Case-folding does not undo canonical order (U+0345 folds to a letter).
    assert opening_key("α\u0345\u0301 of the team today") == opening_key(
        "α\u0301\u0345 of the team today"
    )
    assert opening_key("Café notes, 2026") == opening_key("CAFÉ NOTES")


def test_lines_of_links_and_numbers_alone_are_not_one_line() -> None:
    # Nothing is left of them once links and digits go: they keep what they hold.
    first = opening_key("https://a.example/1 2 3 4 5")
    assert first != opening_key("https://b.example/9 8 7 6 5")
    assert first != opening_key("")


def test_openings_go_along_when_a_worker_pickles_the_note() -> None:
    note = parse_note(MINUTES.encode(), "minutes/2026-03-04.md", "session")
    back = pickle.loads(pickle.dumps(note))
    # Not found nor clipped again in this process.
    assert (back.__dict__["openings"], back.__dict__["lead"]) == (note.openings, note.lead)
    assert back.summary == note.summary


def test_a_note_of_short_paragraphs_opens_with_its_first() -> None:
    note = parse_note(b"# Status\n\nAccepted.\n\nSee below.\n", "adr/0001-x.md", "adr")
    assert [t for _, t in note.openings] == ["Accepted."]
    assert note.summary == "Accepted."
    assert parse_note(b"# Empty\n", "wiki/empty.md", "wiki").summary is None


def test_a_note_keeps_at_most_its_first_openings() -> None:
    body = "".join(f"Paragraph number {i} says something of its own.\n\n" for i in range(50))
    note = parse_note(body.encode(), "wiki/long.md", "wiki")
    assert len(note.openings) == OPENINGS_KEPT
