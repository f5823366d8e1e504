"""A seeded, realistic large vault and facts files for the benchmarks, cached outside git.

``ensure_corpus(notes=20_000, facts=1_000_000, seed=14)`` writes (once) under
``~/.cache/vault-ko-bench/corpus-s<seed>-n<notes>-f<facts>/`` (``VAULT_KO_BENCH_CACHE``
overrides the root):

* ``vault/``: markdown notes over the three source types the ingester knows —
  ``sessions/YYYY/MM-DD-<slug>.md`` (the rest: dated work logs with ``key:: value``
  fields), ``wiki/<slug>.md`` (one note per subject, up to 40 %; ``subject:`` frontmatter,
  aliases, inline fields) and ``adr/NNNN-<slug>.md`` (10 %; Status / Context / Decision /
  Consequences).
  Lengths are log-normal (medians of 70 words for sessions, 90 for wiki notes and 110
  for ADRs, a long tail past 1,000); every note
  links 2–12 subjects. Subjects follow a Zipf law: a few hub subjects (PostgreSQL, Kafka,
  Redis, …) are linked from thousands of notes, a long tail of generated subjects from a
  handful each;
* ``facts-<n>.jsonl``: ``facts`` rows in the format of ``vault-ko facts import`` (the
  subjects of the vault plus a long tail of their own, Zipf-distributed; source files are
  vault notes; one flooding predicate, ``has_value``, piles thousands of rows on the
  ``Billing service`` hub, as the seed's KO-DB does), and ``facts-13000.jsonl``, the first
  13,000 rows (the seed's size);
* ``embeddings-<model>.npz``: every note's embedding with the real model, keyed by the
  sha256 of the text the pipeline embeds (``--embed`` or the first ``cached_embedder`` use),
  so later runs load the graph without re-embedding.

Run ``.venv/bin/python bench/make_corpus.py [--notes N] [--facts N] [--seed S] [--embed]``;
it prints the corpus folder. The same seed and sizes give byte-identical files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Bump when the generator changes: the cache key includes it.
GENERATOR_VERSION = 2
SEED_FACTS = 13_000  # the seed's KO-DB size
EMBED_STRIDE = 20
EMBED_CHUNK = 500

HUBS = (
    "PostgreSQL",
    "Kafka",
    "Redis",
    "Kubernetes",
    "Billing service",
    "API gateway",
    "Search indexer",
    "Deploy pipeline",
    "On-call",
    "Observability",
    "Feature flags",
    "Warm cache",
)
FLOOD_SUBJECT = "Billing service"
FLOOD_PREDICATE = "has_value"

WORDS = (
    "cache latency queue partition replica shard index schema migration rollout canary "
    "deploy release incident outage postmortem alert dashboard metric trace span log "
    "retention backup restore snapshot failover leader follower quorum consensus lease "
    "token session cookie auth login permission role tenant workspace billing invoice "
    "payment refund subscription plan quota limit throttle budget cost storage bucket "
    "object blob upload download stream batch job worker scheduler cron timeout retry "
    "backoff circuit breaker fallback degrade health probe readiness liveness pod node "
    "cluster region zone network subnet firewall proxy gateway ingress route endpoint "
    "request response payload header query filter sort pagination cursor offset search "
    "ranking relevance embedding vector model training inference feature flag experiment "
    "cohort segment funnel conversion churn retention onboarding invite email notification "
    "webhook event topic consumer producer offset lag throughput backlog dead letter "
    "outbox transaction isolation lock deadlock vacuum bloat replication wal checkpoint "
    "connection pool bouncer driver client library sdk version upgrade deprecation "
    "compatibility contract test fixture mock flaky pipeline build artifact registry image "
    "container runtime memory cpu heap garbage profile flamegraph hotspot regression "
    "benchmark capacity forecast scaling autoscaler spot reserved instance terraform module "
    "secret vault rotation certificate expiry dns ttl cdn edge origin purge invalidation "
    "warmup warmstart handover runbook escalation pager rotation severity customer support "
    "ticket sla slo error budget availability durability consistency idempotency "
    "deduplication ordering watermark window aggregation rollup report export import csv "
    "parser validator normaliser tokenizer locale timezone currency tax compliance audit"
).split()
TAIL_PARTS_A = (
    "ledger atlas beacon cobalt delta ember falcon garnet harbor iris juniper kestrel lumen "
    "meridian nimbus onyx pioneer quartz raven sierra tundra umber vertex willow xenon "
    "yonder zephyr amber birch cedar dune fjord glacier heron indigo jade koi lotus maple "
    "nova orchid pebble quill reef sage thistle ursa vale wren yarrow zinc"
).split()
TAIL_PARTS_B = (
    "service worker api store index queue cache job pipeline gateway proxy sync exporter "
    "importer scheduler monitor dashboard client adapter bridge router registry ledger "
    "report migration"
).split()
PEOPLE = (
    "Tom Lindqvist, Priya Raman, Maya Cohen, Jonas Weber, Ana Souza, Kenji Sato, "
    "Fatima Khan, Lars Berg, Chen Wei, Zsófia Kovács, Omar Haddad, Ingrid Olsen"
).split(", ")
PREDICATES = (
    "owner status depends_on uses runs_on decided_by documented_in tier region sla "
    "language framework team oncall_rotation last_incident replaced_by supersedes "
    "config_key default_timeout max_connections retention_days alert_channel dashboard "
    "cost_center data_class review_date"
).split()
INLINE_FIELDS = ("status", "owner", "tier", "follow-up", "decision", "risk", "region")
ADR_STATUSES = ("Accepted", "Accepted", "Accepted", "Proposed", "Superseded", "Rejected")


@dataclass(frozen=True)
class Corpus:
    """A generated corpus: its folder and what is inside."""

    root: Path
    notes: int
    facts: int
    seed: int

    @property
    def vault(self) -> Path:
        return self.root / "vault"

    def facts_file(self, rows: int | None = None) -> Path:
        return self.root / f"facts-{rows or self.facts}.jsonl"

    def embeddings_file(self, model_id: str) -> Path:
        return self.root / f"embeddings-{_slug(model_id)}.npz"


def cache_root() -> Path:
    env = os.environ.get("VAULT_KO_BENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "vault-ko-bench"


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in out.split("-") if part)[:80]


def _subjects(rng: random.Random, notes: int) -> list[str]:
    """Hubs first, then a long tail of distinct generated names (about one per 3 notes)."""
    tail: list[str] = []
    seen = {h.casefold() for h in HUBS}
    want = max(50, notes // 3)
    while len(tail) < want:
        name = f"{rng.choice(TAIL_PARTS_A).capitalize()} {rng.choice(TAIL_PARTS_B)}"
        if rng.random() < 0.5:
            name += f" {rng.choice(WORDS)}"
        if len(seen) > want // 2 and rng.random() < 0.6:
            name += f" {rng.randint(2, 99)}"
        if name.casefold() not in seen:
            seen.add(name.casefold())
            tail.append(name)
    return [*HUBS, *tail]


class _Zipf:
    """Draws indices 0..n-1 with P(i) ∝ 1 / (i + 1)^s (hubs are the first indices)."""

    def __init__(self, rng: random.Random, n: int, s: float) -> None:
        weights = [1.0 / (i + 1) ** s for i in range(n)]
        total = sum(weights)
        acc = 0.0
        self._cum = []
        for w in weights:
            acc += w / total
            self._cum.append(acc)
        self._rng = rng

    def draw(self) -> int:
        import bisect

        return min(bisect.bisect_left(self._cum, self._rng.random()), len(self._cum) - 1)


def _sentence(rng: random.Random, topic: str, links: Sequence[str]) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
    if links and rng.random() < 0.35:
        words.insert(rng.randrange(len(words)), f"[[{rng.choice(links)}]]")
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), topic)
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice((".", ".", ".", "?", "!"))


def _body(rng: random.Random, topic: str, links: Sequence[str], words: int) -> str:
    paragraphs: list[str] = []
    count = 0
    while count < words:
        para = [_sentence(rng, topic, links) for _ in range(rng.randint(2, 6))]
        count += sum(len(s.split()) for s in para)
        paragraphs.append(" ".join(para))
    # Every chosen link appears at least once.
    paragraphs.append("See also: " + ", ".join(f"[[{link}]]" for link in links) + ".")
    return "\n\n".join(paragraphs)


def _length(rng: random.Random, median: float) -> int:
    return max(25, min(3000, int(rng.lognormvariate(math.log(median), 0.8))))


def generate(root: Path, *, notes: int, facts: int, seed: int) -> None:
    """Write the vault and the facts files under ``root`` (replacing what is there)."""
    rng = random.Random(seed)
    vault = root / "vault"
    if vault.exists():
        shutil.rmtree(vault)
    subjects = _subjects(rng, notes)
    zipf = _Zipf(rng, len(subjects), 1.05)
    n_wiki = min(len(subjects), int(notes * 0.4))
    n_adr = int(notes * 0.1)
    n_session = notes - n_wiki - n_adr
    paths: list[tuple[str, str]] = []  # (path, source_type)

    def pick_links(own: str | None) -> list[str]:
        chosen: list[str] = []
        for _ in range(rng.randint(2, 12)):
            name = subjects[zipf.draw()]
            if name != own and name not in chosen:
                chosen.append(name)
        return chosen or [HUBS[0]]

    # wiki: one note per subject (hubs and the head of the tail).
    for i in range(n_wiki):
        subject = subjects[i]
        slug = _slug(subject)
        rel = f"wiki/{slug}.md"
        links = pick_links(subject)
        fields = "\n".join(
            f"{f}:: {rng.choice(WORDS)} {rng.choice(WORDS)}"
            for f in rng.sample(INLINE_FIELDS, rng.randint(1, 3))
        )
        alias = subject.split()[0].lower()
        text = (
            f"---\ntitle: {subject}\nsubject: {subject}\naliases: [{alias}-{i}]\n"
            f"tags: [wiki, area/{rng.choice(WORDS)}]\nowner: {rng.choice(PEOPLE)}\n---\n"
            f"# {subject}\n\n{fields}\n\n"
            f"{_body(rng, subject, links, _length(rng, 160 if i < len(HUBS) * 4 else 90))}\n"
        )
        _write(vault / rel, text)
        paths.append((rel, "wiki"))

    # adr: numbered decision records about a subject.
    for i in range(n_adr):
        topic = subjects[zipf.draw()]
        verb = rng.choice(("Use", "Adopt", "Reject", "Move", "Partition", "Cache", "Retire"))
        title = f"{i + 1:04d} {verb} {topic} for {rng.choice(WORDS)} {rng.choice(WORDS)}"
        rel = f"adr/{_slug(title)}.md"
        links = pick_links(topic)
        n = _length(rng, 110)
        year = 2020 + i * 6 // max(1, n_adr)
        text = (
            f'---\ntitle: "{title}"\ndate: {year}-{rng.randint(1, 12):02d}-'
            f"{rng.randint(1, 28):02d}\ntags: [adr, area/{rng.choice(WORDS)}]\n---\n"
            f"# {title}\n\n## Status\n\n{rng.choice(ADR_STATUSES)}\n\n"
            f"## Context\n\n{_body(rng, topic, links[:3], n // 2)}\n\n"
            f"## Decision\n\nWe will {verb.lower()} [[{topic}]]. "
            f"{_body(rng, topic, links[3:], n // 3)}\n\n"
            f"## Consequences\n\n{_body(rng, topic, [], n // 4)}\n"
        )
        _write(vault / rel, text)
        paths.append((rel, "adr"))

    # sessions: dated work logs, the bulk of a real vault.
    for i in range(n_session):
        topic = subjects[zipf.draw()]
        day = 19_500 + i * 2000 // max(1, n_session)  # days since 1970, spread over 5 years
        date = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
        what = rng.choice(("triage", "spike", "review", "debugging", "handover", "planning"))
        slug = _slug(f"{topic} {what} {i}")
        rel = f"sessions/{date[:4]}/{date[5:]}-{slug}.md"
        links = pick_links(topic)
        people = ", ".join(rng.sample(PEOPLE, rng.randint(1, 3)))
        text = (
            f"---\ndate: {date}\ntags: [session, {what}]\nparticipants: [{people}]\n---\n"
            f"# {date} {topic} {what}\n\n{_body(rng, topic, links, _length(rng, 70))}\n\n"
            f"status:: {rng.choice(('resolved', 'open', 'follow-up'))}\n"
            f"follow-up:: {rng.choice(WORDS)} {rng.choice(WORDS)} for [[{topic}]]\n"
        )
        _write(vault / rel, text)
        paths.append((rel, "session"))

    _write_facts(root, rng, subjects, paths, facts)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_facts(
    root: Path,
    rng: random.Random,
    subjects: list[str],
    paths: list[tuple[str, str]],
    rows: int,
) -> None:
    """``rows`` import rows; the first 13,000 also form the seed-size file."""
    extra = [f"{rng.choice(TAIL_PARTS_A).capitalize()} fact subject {i}" for i in range(50_000)]
    pool = [*subjects, *extra]
    zipf = _Zipf(rng, len(pool), 1.0)
    flood_every = 40  # 2.5 % of the rows: the flooding predicate on one hub
    big = root / f"facts-{rows}.jsonl"
    small = root / f"facts-{SEED_FACTS}.jsonl"
    with big.open("w", encoding="utf-8") as out, small.open("w", encoding="utf-8") as seed_out:
        for i in range(rows):
            path, source_type = paths[rng.randrange(len(paths))]
            if i % flood_every == 0:
                subject, predicate = FLOOD_SUBJECT, FLOOD_PREDICATE
                obj = f"{rng.choice(WORDS)} = {rng.randint(1, 10_000)} (row {i})"
            else:
                subject, predicate = pool[zipf.draw()], rng.choice(PREDICATES)
                obj = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}"
            line = json.dumps(
                {
                    "subject": subject,
                    "predicate": predicate,
                    "object": obj,
                    "confidence": round(rng.uniform(0.3, 1.0), 3),
                    "source_type": source_type,
                    "source_file": path,
                    "extractor": "bench",
                },
                ensure_ascii=False,
            )
            out.write(line + "\n")
            if i < SEED_FACTS:
                seed_out.write(line + "\n")


def ensure_corpus(
    notes: int = 20_000, facts: int = 1_000_000, seed: int = 14, *, log: Any = print
) -> Corpus:
    """The corpus for these parameters, generated on first use (kept in the cache)."""
    facts = max(facts, SEED_FACTS)
    root = cache_root() / f"corpus-v{GENERATOR_VERSION}-s{seed}-n{notes}-f{facts}"
    done = root / "corpus.json"
    corpus = Corpus(root, notes, facts, seed)
    if done.exists():
        return corpus
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    generate(root, notes=notes, facts=facts, seed=seed)
    meta = {"notes": notes, "facts": facts, "seed": seed, "generator": GENERATOR_VERSION}
    done.write_text(json.dumps(meta) + "\n", encoding="utf-8")
    log(f"corpus: generated {notes} notes and {facts} facts in {time.perf_counter() - t0:.1f} s")
    return corpus


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """An embedder for loading the graph: vectors of texts seen before come from the
    corpus cache; others are embedded by the real model (loaded on first miss) and added.

    It has what ``sync_embeddings`` and ``calibrate_vault`` use: ``model_id``, ``dims``,
    ``embed``. ``save()`` writes new vectors back to the cache file.
    """

    def __init__(self, corpus: Corpus, model: Any) -> None:
        self._model = model  # pipeline.embed.Embedder, or a zero-argument loader of one
        self._file = corpus.embeddings_file(self.model_id)
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self.misses = 0
        if self._file.exists():
            data = np.load(self._file)
            for key, row in zip(data["keys"].tolist(), data["vectors"], strict=True):
                self._vectors[key] = row

    @property
    def model(self) -> Any:
        if callable(self._model):
            self._model = self._model()
        return self._model

    @property
    def model_id(self) -> str:
        from pipeline.embed import BUNDLED_MODEL_ID

        return getattr(self._model, "model_id", BUNDLED_MODEL_ID)

    @property
    def dims(self) -> int:
        return int(getattr(self._model, "dims", 384))

    def has(self, text: str) -> bool:
        return text_key(text) in self._vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [text_key(t) for t in texts]
        # New texts sorted by length: batches of similar lengths waste less padding.
        new = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        missing = sorted(new.items(), key=lambda kv: len(kv[1]))
        if missing:
            self.misses += len(missing)
            vectors = self.model.embed([t for _, t in missing])
            for (key, _), row in zip(missing, vectors, strict=True):
                self._vectors[key] = row
            self._dirty = True
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        if not self._dirty:
            return
        keys = sorted(self._vectors)
        tmp = self._file.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self._vectors[k] for k in keys]))
        tmp.replace(self._file)
        self._dirty = False


def embed_texts(vault: Path) -> dict[str, str]:
    """path -> the text the embed sync embeds for it (title plus body, or the title)."""
    from pipeline.config import load_settings
    from pipeline.vault.parse import read_note
    from pipeline.vault.scan import scan_vault

    settings = load_settings(vault, env={})
    out: dict[str, str] = {}
    for entry in scan_vault(settings):
        parsed = read_note(vault, entry.path, entry.source_type, settings.vault_max_note_bytes)
        out[entry.path] = parsed.embed_text.strip() or parsed.title or Path(entry.path).stem
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--embed", action="store_true", help="fill the embedding cache now")
    args = parser.parse_args()
    corpus = ensure_corpus(args.notes, args.facts, args.seed)
    if args.embed:
        from pipeline.embed import Embedder

        cache = CachedEmbedder(corpus, Embedder)
        by_path = list(embed_texts(corpus.vault).values())
        # Interleaved (every EMBED_STRIDE-th note first), saved every EMBED_CHUNK: a cache
        # filled only partly (it is resumable) still holds a uniform sample of the vault.
        texts = [
            by_path[i] for r in range(EMBED_STRIDE) for i in range(r, len(by_path), EMBED_STRIDE)
        ]
        t0 = time.perf_counter()
        for start in range(0, len(texts), EMBED_CHUNK):
            cache.embed(texts[start : start + EMBED_CHUNK])
            cache.save()
            done = min(start + EMBED_CHUNK, len(texts))
            print(f"embedded {done}/{len(texts)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        print(f"embeddings: {cache.misses} new in {time.perf_counter() - t0:.1f} s")
    print(corpus.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
