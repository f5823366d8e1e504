"""The semantic bridge: which subjects an answer is about, and why (DESIGN §5).

Relevance decides what is a candidate; corroboration (rank.py) only orders comparable
candidates — the order of the seed, which filters KO-DB by the question first (LIKE on the
subject) and ranks after. In semantic mode a subject is a candidate because a note hit above
the noise floor is about it:

* ``own``: the hit note's own subject (frontmatter ``subject:``, else its title);
* ``title``: a subject whose name contains a hit's title at word boundaries (the seed's
  "semantic hits → KO-DB LIKE bridge");
* ``mentioned``: a subject the hits merely link to enters only on evidence — at least
  ``MENTION_MIN_HITS`` of the best ``MENTION_POOL`` hits mention it — and follows the
  subjects the hits are about (rank.py).

Each candidate carries the cosine of the hit that makes it relevant: its own note's when
that note was hit (the direct measure), else the best title hit, and for a mentioned one
the cosine of its ``MENTION_MIN_HITS``-th mentioning hit. It is then ranked on all of its
facts in KO-DB, so its source count does not depend on how many of its notes were hit.

Degraded mode (no graph): the hits come from KO-DB's full-text index (BM25) and go through
the same bridge, each candidate carrying its hit's word score instead of a cosine; subjects
whose names hold the question's words at word boundaries (``words``) are a second source,
the number of distinct words matched being how well they match.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Final, Protocol

from pipeline.model import Candidate, Evidence, Hit, Note, normalize_text

MIN_TERM_CHARS: Final = 3  # shorter words are mostly noise, and trigram search needs 3
#: Word search uses the first this many terms of a question: each term is a KO-DB search, so
#: a pasted text of thousands of distinct words would take seconds even on a small vault
#: (and grows with the vault); a real question has a handful.
MAX_QUERY_TERMS: Final = 64
#: A subject the hits only mention is a candidate when this many of the best hits link to
#: it: one link is what a hub gets from every note; two of the best hits agreeing is
#: evidence (chosen on the judged sets' tune halves, see README "Ranking").
MENTION_MIN_HITS: Final = 2
#: The best hits above the floor that count for ``MENTION_MIN_HITS``.
MENTION_POOL: Final = 5

# Common function words of the two languages our users write in. Content words stay.
STOP_WORDS_EN: Final = frozenset(
    """
    about above after again against all also and any are aren't because been before being
    below between both but can can't cannot could did didn't does doesn't doing don't down
    during each few for from further had has have having her here hers herself him himself
    his how into isn't it's its itself just let's more most much must myself nor not now off
    once only other ought our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through too under
    until very was wasn't were weren't what when where which while who whom why will with
    would you your yours yourself yourselves know knows tell does anything something thing
    things use used using get got way ways want need won't shan't ain't
    """.split()
)
STOP_WORDS_HU: Final = frozenset(
    """
    az egy és is nem hogy meg még már csak de ha mint vagy volt van lesz lett ezt azt ez
    az ami aki amely amit akkor ahol itt ott mert mit mi ki kik hol hogyan miért mikor
    melyik milyen minden sem sok kell lehet nagyon után alatt felett között előtt mellett
    nélkül szerint által számára pedig tehát vagyis illetve valamint azonban amikor ahogy
    egyik másik mely vannak voltak legyen neki nekem nekünk ezek azok ezen azon ebben abban
    erről arról arra erre ide oda fel vissza tudunk tudok tudsz tud
    """.split()
)
STOP_WORDS: Final = STOP_WORDS_EN | STOP_WORDS_HU
#: Function words shorter than ``MIN_TERM_CHARS`` (word search skips them anyway), so that
#: "is it a …" or "és a az" is seen as a question without content words.
SHORT_STOP_WORDS: Final = frozenset(
    """
    a an am as at be by do he i if in is it me my no of oh ok on or so to up us we ye
    e ő õ ha de ki mi be le el ne se te ti
    """.split()
)

#: Words that ask for a person, where a question or clause starts ("… and who's in it?",
#: "to whom …", "can you tell me who …", "És ki a felelős?"), not after a noun, where an
#: English one starts a relative clause ("a book whose author died in 1960") and "ki" is
#: a Hungarian verb's particle ("mikor adtuk ki?").
WHO_WORDS_EN: Final = frozenset({"who", "whom", "whose"})
_WHO_AFTER: Final = frozenset(
    """
    and or but then so also to for with from by of about on know knows knew tell ask asked
    wonder remember find out see check show list is was are were me us you idea sure
    és de meg akkor vajon szerinted tudod tudja
    """.split()
)
_CLAUSE_END = re.compile(r"(?:[,;:—–(\[]|\s-)\s*$")
WHO_WORDS_HU: Final = frozenset(
    """
    ki kik kit kiket kinek kiknek kié kiké kivel kikkel kitől kiktől kihez kikhez kiről
    kikről kiért kikért
    """.split()
)

_WORD = re.compile(r"\w+(?:['’]\w+)?")
#: The hyphen and the dashes a code may be written with ("X-15", "X‐15", "X‑15", "X–15").
_DASHES = "\\-\u2010\u2011\u2012\u2013\u2212"  # escaped for a character class
#: A code of letters and digits joined by hyphens, starting with a letter and holding a
#: digit ("x-15", "covid-19", "x86-64"; not a date, a range of numbers, "3-day" or "24-hour").
_CODE = re.compile(
    rf"(?<![\w{_DASHES}])(?=[\w{_DASHES}]*\d)[^\W\d_][^\W_]*(?:[{_DASHES}][^\W_]+)+(?![\w{_DASHES}])"
)
#: An issue's or pull request's number as minutes and changelogs write it ("#51981", "PR
#: #123"): a number that names one thing, where a bare one ("3", "2024") is an amount or a
#: year. Two digits at least; "ADR #7" is a record's number (``_RECORD``).
_REFERENCE = re.compile(r"(?<![\w&#])#(\d{2,})(?!\w)")
#: One word with a letter and a digit ("s3", "ec2", "v8"), any length.
_ALNUM = re.compile(r"(?=\w*\d)(?=\w*[^\W\d_])[^\W_]+")
#: The ending of an English contraction or possessive: "what's" is the stop word "what",
#: "council's" the word "council"; left on, the index's tokenizer splits off an "s" that,
#: as a prefix, matches half of every note's words (excerpts, facts).
_CLITIC = re.compile(r"(?:'(?:s|re|ve|ll|d|m)|n't)$")


def _word(match: re.Match[str]) -> tuple[str, str]:
    """A matched word with its apostrophe made ASCII, and that word without its clitic
    unless the whole contraction is a stop word ("it's", "don't")."""
    word = match.group(0).replace("’", "'")
    return word, word if word in STOP_WORDS else _CLITIC.sub("", word)


def content_words(text: str) -> list[str]:
    """Words with a letter or digit that are not stop words, of any length ("CI", "S3" and
    "Go" count): a question without any is about nothing, and is answered no_match."""
    words: dict[str, None] = {}
    for match in _WORD.finditer(normalize_text(text)):
        word = _word(match)[1].strip("_")
        if word and word not in STOP_WORDS and word not in SHORT_STOP_WORDS:
            words.setdefault(word, None)
    return list(words)


def asks_who(text: str) -> bool:
    """Whether the question asks who: for a person, a team, their role."""
    text = normalize_text(text)
    matches = list(_WORD.finditer(text))
    if not matches:
        return False
    words = [_word(m)[1] for m in matches]
    for i, word in enumerate(words):
        if word not in WHO_WORDS_EN and word not in WHO_WORDS_HU:
            continue
        before = text[matches[i - 1].end() : matches[i].start()] if i else ""
        if i == 0 or words[i - 1] in _WHO_AFTER or _CLAUSE_END.search(before):
            return True
    return False


#: A decision record named by its number: "ADR 12", "ADR-0012", "ADR-0012-use-redis",
#: "adr #7", "decision record 12", "architecture decision 3", "döntés 5"; not a date after
#: it ("the decision 2026-01-20") nor an amount of time ("the decision 3 weeks ago").
_RECORD = re.compile(
    r"\b(?:adr|(?:architecture\s+)?decision(?:\s+record)?|döntés)\s*[-#]?\s*(\d{1,4})"
    r"(?!\d|-\d|\s+(?:days?|weeks?|months?|years?|hours?|minutes?|napja|hete|hónapja|éve)\b)",
    re.IGNORECASE,
)
#: The number a record's file name starts with ("0012-use-redis.md": 12).
_LEADING_NUMBER = re.compile(r"(\d{1,6})(?!\d)")


def record_numbers(text: str) -> tuple[int, ...]:
    """The numbers of the decision records a question names, in order, once each."""
    return tuple(dict.fromkeys(int(m.group(1)) for m in _RECORD.finditer(text)))


def record_number(path: str) -> int | None:
    """The number a note's file name starts with, None when it starts with none."""
    m = _LEADING_NUMBER.match(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def query_terms(text: str) -> list[str]:
    """Lower-cased words of at least 3 characters, stop words removed, in first-seen order;
    the first ``MAX_QUERY_TERMS`` of them. A word of letters and digits ("S3", "v8") is kept
    at any length, and so are the parts of a code that joins letters and digits with
    hyphens ("X-15", "COVID-19") and an issue's number ("#51981"): the index holds each part
    as a word, and a question that names only a code has nothing else to be found by."""
    normalized = normalize_text(text)
    coded = {part for m in _CODE.finditer(normalized) for part in _code_parts(m.group(0))}
    coded |= {m.group(1) for m in _REFERENCE.finditer(normalized)}
    seen: dict[str, None] = {}
    for match in _WORD.finditer(normalized):
        whole, word = _word(match)
        if word in STOP_WORDS or word in SHORT_STOP_WORDS:
            continue
        if word in coded or stands_alone(word):
            seen.setdefault(word, None)
        elif len(word) < MIN_TERM_CHARS and stands_alone(whole):
            seen.setdefault(whole, None)  # "Jo's": the word alone is too short to search for
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def code_patterns(text: str, terms: Collection[str] | None = None) -> list[re.Pattern[str]]:
    """The question's codes of letters and digits ("X-15", "COVID-19") as patterns a note's
    text holds them by: their parts in order, joined by a hyphen or dash, a dot, an
    underscore or nothing ("X-15", "X15"; not "X 15", which "11 x 15 in." also is), case
    folded. A word search finds a code by its parts alone, which a vault of formulas holds
    apart ("x" and "15") in most of its notes. With ``terms``, only the codes whose words
    are among them (not a period's "mid-2023" when the period's words were left out)."""
    out = []
    joint = f"[{_DASHES}._]?"
    for m in _CODE.finditer(normalize_text(text)):
        parts = _code_parts(m.group(0))
        if terms is not None and not all(
            p in terms for p in parts if p not in STOP_WORDS and p not in SHORT_STOP_WORDS
        ):
            continue
        body = joint.join(re.escape(p) for p in parts)
        out.append(re.compile(r"(?<![^\W_])" + body + r"(?![^\W_])", re.I))
    return out


def _code_parts(code: str) -> list[str]:
    return re.split(f"[{_DASHES}]", code)


def stands_alone(term: str) -> bool:
    """Whether a question's word picks out a paragraph by itself, matched as a word's
    prefix as excerpts match it: three characters or more and not a number, or letters and
    digits together ("S3"); a code's lone "x" or "15" would match half the text."""
    return bool(_ALNUM.fullmatch(term)) or (len(term) >= MIN_TERM_CHARS and not term.isdigit())


class SubjectSource(Protocol):
    """What the bridge reads from KO-DB (the store, or a batch's memoising view of it)."""

    def notes_at(self, paths: Iterable[str]) -> Mapping[str, Note]: ...

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]: ...

    def search_subjects_many(self, terms: Sequence[str]) -> dict[str, list[str]]: ...


def own_subject(note: Note) -> str:
    """The case-folded subject a registry note is about."""
    return normalize_text(note.subject or note.title)


def live_hits(hits: Sequence[Hit], floor_cosine: float | None) -> list[Hit]:
    """The hits above the no_match floor: the only ones that make anything relevant (a
    words-only hit of degraded mode has no cosine to judge by, nor has a note in a language
    the model does not read, which hybrid retrieval found by its words)."""
    return [
        h
        for h in hits
        if floor_cosine is None or h.cosine is None or h.cosine > floor_cosine or h.unread
    ]


#: Hybrid retrieval: how many vault σ each fused place stands below the one above it. The
#: blend rule (``rank.OrderRule``) lets a subject ten times better corroborated lead one
#: ``blend_sigmas`` (½ σ) more relevant, so at ½ σ a place it can climb one place and no
#: more (chosen on the judged vaults and collections: docs/ranking.md).
RANK_STEP_SIGMAS: Final = 0.5


def rank_cosines(hits: Sequence[Hit], sigma: float | None) -> dict[str, float]:
    """Hybrid retrieval's hits are in fused order, and their cosines are not: the hit at
    the n-th place (from 0) stands for the best cosine among them less n ×
    ``RANK_STEP_SIGMAS`` × the vault's σ, so subjects are compared on the cosine scale (and
    σ steps) of dense mode while the fused order decides which is more relevant. Without a
    σ (no calibration to judge by) cosines alone order subjects, and each place is then half
    a cosine below the one above: the fused order alone. path → that cosine (hits with a
    cosine only; degraded mode's hits, none of which has one, by their places alone, the
    newest first of a question asking only for the latest)."""
    scored = [h.path for h in hits if h.cosine is not None]
    if not scored:
        return {h.path: -float(place) for place, h in enumerate(hits)}
    top = max(h.cosine for h in hits if h.cosine is not None)
    step = RANK_STEP_SIGMAS * (sigma if sigma else 1.0)
    return {path: top - place * step for place, path in enumerate(scored)}


def semantic_candidates(
    hits: Sequence[Hit],
    floor_cosine: float | None,
    kodb: SubjectSource,
    *,
    registry: Mapping[str, Note] | None = None,
    fused: bool = False,
    sigma: float | None = None,
) -> dict[str, Candidate]:
    """subject_norm → Candidate for an answer's hits (best first), see the module doc.

    ``registry`` holds the hits' registry rows when the caller has read them already;
    ``fused``: the hits are in hybrid retrieval's fused order (``rank_cosines``, with the
    vault's ``sigma``)."""
    live = live_hits(hits, floor_cosine)
    if not live:
        return {}
    ranked = rank_cosines(hits, sigma) if fused else {}

    def _candidate(subject: str, evidence: Evidence, h: Hit) -> Candidate:
        return Candidate(
            subject, evidence, h.cosine, h.path, bm25=h.bm25, rank_cosine=ranked.get(h.path)
        )

    paths = [h.path for h in live]
    if registry is None or any(p not in registry for p in paths):
        registry = kodb.notes_at(paths)
    own_of = {p: own_subject(registry[p]) for p in paths if p in registry}
    found: dict[str, Candidate] = {}
    for h in live:
        subject = own_of.get(h.path)
        if subject is not None and subject not in found:  # hits come best first
            found[subject] = _candidate(subject, "own", h)

    titles = sorted({h.title for h in live if h.title.strip()})
    matched = kodb.search_subjects_many(titles) if titles else {}
    for h in live:
        for subject in matched.get(h.title, ()):
            if subject not in found:
                found[subject] = _candidate(subject, "title", h)

    pool = live[:MENTION_POOL]
    by_file = kodb.subjects_by_source_file([h.path for h in pool])
    mentions: dict[str, list[Hit]] = {}
    for h in pool:
        for subject in by_file.get(h.path, ()):
            if subject != own_of.get(h.path):
                mentions.setdefault(subject, []).append(h)
    for subject, mentioning in sorted(mentions.items()):
        if subject not in found and len(mentioning) >= MENTION_MIN_HITS:
            h = mentioning[MENTION_MIN_HITS - 1]
            found[subject] = _candidate(subject, "mentioned", h)
    return found


def term_candidates(text: str, kodb: SubjectSource) -> dict[str, Candidate]:
    """Degraded mode: subjects matching question words at word boundaries, with how many
    distinct words each matches."""
    terms = query_terms(text)
    if not terms:
        return {}
    matched = kodb.search_subjects_many(terms)
    counts: dict[str, int] = {}
    for term in terms:
        for subject in matched.get(term, ()):
            counts[subject] = counts.get(subject, 0) + 1
    return {s: Candidate(s, "words", words=n) for s, n in counts.items()}
