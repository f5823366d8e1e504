"""Watch mode, live: `vault-ko serve --watch` on the World's vault, as people leave it
running while they edit.

* edit → answer: ``--edits`` notes (20; quick 5) edited one at a time, a paragraph on a
  topic far from the corpus's put right under the title; ``POST /query`` with a question
  about it is asked until the note is among the first 5 hits: seconds from the write (p50,
  p95; target p95 ≤ 3 s, the model's time included; a note found before its edit is not
  counted);
* idle CPU: the watching service's own CPU time (``/proc/<pid>/stat``, every thread) over
  ``--idle`` seconds with nothing changing (300; quick 15), native file events; target
  ≤ 1 %;
* memory: one edit a second for ``--soak`` seconds (1,800; quick 30): the service's RSS
  at the start and at the end, growth (target ≤ 5 %);
* burst: ``--burst`` notes (1,000; quick 50) edited at once, as a `git checkout` does: how
  many runs the watcher made of it (target 1) and the wall time until it was applied
  (watcher lag back to null), against `vault-ko sync` (a fresh process, the way people run
  it) of the same kind of change to the same notes with the service stopped;
* polling: the service restarted with ``--polling``, its idle CPU over ``--idle-polling``
  seconds (60; quick 10), reported beside the native figure.

It edits the World's vault: bench/run.py runs it after ``sync``. Run alone:
``.venv/bin/python bench/watch_live.py [--quick]``; the last lines are ``RESULT …``. A run
whose answers were not semantic (the graph down, the model missing) stops with an error:
its figures would not be this mode's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import Report, Row, World, add_common_args, child_env, cli, log, pct, world_or

#: The issue's targets.
EDIT_P95_S = 3.0
IDLE_CPU_PCT = 1.0
SOAK_GROWTH_PCT = 5.0
#: Hits a found note must be among.
TOP = 5
#: Give up asking about one edit after this long (reported as not found).
EDIT_TIMEOUT_S = 30.0
RUN_LINE = re.compile(r"watch: (\d+) notes; embedded (\d+)")
#: What an edit puts under a note's title (a paragraph of three sentences on a topic far
#: from the corpus's software work, so that it weighs in the note's embedding as a new
#: section would) and the question that should then find the note.
EDITS = (
    (
        "Our sourdough starter is fed rye flour and honey every morning. The starter lives "
        "in a glass jar by the window. Bread from it is baked on Saturdays.",
        "how is the sourdough starter fed?",
    ),
    (
        "The office aquarium holds three axolotls named after jazz pianists. They eat frozen "
        "bloodworms twice a week. Everyone takes turns cleaning the aquarium filter.",
        "which animals live in the office aquarium?",
    ),
    (
        "The beehives swarmed twice this spring near the orchard. The beekeeper caught both "
        "swarms in empty boxes. Honey from the hives is shared in autumn.",
        "when did the beehives swarm?",
    ),
    (
        "The choir rehearses Bach's motets on Thursday evenings in the chapel. The tenors "
        "need more singers. A concert of the motets is planned for Easter.",
        "when does the choir rehearse Bach?",
    ),
    (
        "Grandmother's plum dumplings need cinnamon sugar and toasted breadcrumbs. The dough "
        "is made of potatoes and flour. Each dumpling hides a whole plum.",
        "recipe for plum dumplings",
    ),
    (
        "The telescope club photographed the Andromeda galaxy from the hilltop. The night "
        "was clear and moonless. The photo took four hours of exposure.",
        "who photographed the Andromeda galaxy?",
    ),
    (
        "Our rowing team trains on the river at dawn before the regatta. The coach rides "
        "along on a bicycle. The eight-oared boat is new this season.",
        "when does the rowing team train?",
    ),
    (
        "The vineyard harvest of Riesling grapes started in late September. Pickers cut the "
        "grapes by hand. The wine ferments in old oak barrels.",
        "when did the Riesling harvest start?",
    ),
    (
        "My knitting pattern for the wool scarf uses a herringbone stitch. The yarn is "
        "merino in forest green. The scarf is a gift for winter.",
        "which stitch does the scarf knitting pattern use?",
    ),
    (
        "The lighthouse keeper logged a humpback whale breaching offshore. The whale swam "
        "north with its calf. Seabirds followed them along the cliffs.",
        "who saw the humpback whale?",
    ),
    (
        "Origami cranes for the wedding were folded from washi paper. A thousand cranes hang "
        "above the tables. The bride's aunt folded most of them.",
        "what paper were the origami cranes folded from?",
    ),
    (
        "The mountain hut serves barley soup to hikers after the glacier crossing. Beds in "
        "the hut must be booked ahead. The hut keeper bakes bread every day.",
        "what does the mountain hut serve hikers?",
    ),
    (
        "The pottery kiln fires stoneware glazes overnight. Celadon and tenmoku glazes came "
        "out best. The potters unload the kiln on Sunday morning.",
        "how is the stoneware glazed in the kiln?",
    ),
    (
        "Our chess club studied the Sicilian defence this month. Members solved endgame "
        "puzzles after each lecture. The club tournament starts in spring.",
        "which chess opening did the club study?",
    ),
    (
        "The falconer trained a young peregrine to return to the glove. Training took six "
        "weeks of daily flights. The falcon now hunts over the meadows.",
        "how was the peregrine falcon trained?",
    ),
    (
        "Cherry blossoms in the park peaked during the first week of April. Families had "
        "picnics under the trees. Petals covered the paths for days.",
        "when did the cherry blossoms peak?",
    ),
    (
        "The violin's cracked bridge was replaced by the luthier downtown. The luthier also "
        "fitted new strings. The violin sounds warmer than before.",
        "who repaired the violin bridge?",
    ),
    (
        "We planted tomatoes, basil and marigolds in the raised garden beds. The beds get "
        "sun all afternoon. Slugs were kept away with copper tape.",
        "what did we plant in the raised garden beds?",
    ),
    (
        "The ferry to the island was cancelled because of the autumn storm. Waves broke over "
        "the harbour wall. Passengers waited in the terminal overnight.",
        "why was the island ferry cancelled?",
    ),
    (
        "The marathon route passes the cathedral and the old harbour. Runners cross three "
        "bridges on the way. The finish line is in the main square.",
        "where does the marathon route go?",
    ),
    (
        "Mushroom foraging in the beech forest found chanterelles and porcini. The baskets "
        "were full by noon. The mushrooms were fried with butter and garlic.",
        "which mushrooms did we find foraging?",
    ),
    (
        "The puppet theatre staged a fairy tale about a clever fox. Children laughed at the "
        "fox's tricks. The puppets were carved from linden wood.",
        "what did the puppet theatre stage?",
    ),
    (
        "The blacksmith forged a Damascus steel knife with an oak handle. The blade was "
        "folded many times in the forge. The knife was sold at the market.",
        "what knife did the blacksmith forge?",
    ),
    (
        "Our book club read a novel about a Victorian lighthouse family. The discussion "
        "lasted until midnight. Next month the club reads poetry.",
        "what novel did the book club read?",
    ),
)


def under_title(text: str, sentence: str) -> str:
    """``text`` with ``sentence`` as the first paragraph under its H1 (or at its top)."""
    match = re.search(r"^# .*\n", text, re.MULTILINE)
    at = match.end() if match else 0
    return f"{text[:at]}\n{sentence}\n{text[at:]}"


class Service:
    """`vault-ko serve --watch` on the World's vault, as a child process."""

    def __init__(self, vault: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.log_path = vault.parent / "serve-watch.log"
        self.proc = subprocess.Popen(
            [cli(), "--vault", str(vault), "serve", "--json", "--watch", *extra],
            stdout=subprocess.PIPE,
            stderr=self.log_path.open("a"),
            text=True,
            env=child_env(**(env or {})),
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 600)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            raise SystemExit(f"the service did not start: {self.said()[-2000:]}")
        self.host, port = json.loads(line)["url"].removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self.pid = self.proc.pid

    def said(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            payload = json.dumps(body) if body is not None else None
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, payload, headers)
            response = conn.getresponse()
            data = json.loads(response.read())
        finally:
            conn.close()
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status} {str(data)[:300]}")
        return data

    def ask(self, question: str) -> list[str]:
        data = self._call("POST", "/query", {"question": question, "hits": TOP})
        if data.get("mode") != "semantic":
            raise SystemExit(f"an answer was not semantic ({data.get('mode')}): figures void")
        return [h["path"] for h in data["hits"]]

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")  # type: ignore[no-any-return]

    def settle(self, since: float, timeout: float = 1800.0) -> float:
        """Wait until a watcher run ended after ``since`` and no change waits; seconds."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            w = self.health()["watcher"]
            if w["last_run"] and w["last_run"] > since and w["lag_s"] is None:
                return time.monotonic() - start
            time.sleep(0.2)
        raise SystemExit(f"the watcher did not settle in {timeout:.0f} s: {self.said()[-2000:]}")

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def warm(service: Service, started: float) -> None:
    """The catch-up run done and the note vectors in memory (answers before that come from
    the graph's index: a start, not the steady state measured here)."""
    service.settle(started - 1)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        service.ask("warm up the service")
        if service.health().get("warm_vectors"):
            return
        time.sleep(0.5)
    raise SystemExit("the service never held the note vectors")


def edit_latencies(
    service: Service, vault: Path, paths: list[str]
) -> tuple[list[float], list[float], list[str]]:
    """Each note edited in turn: seconds from the write until the watcher's run holding it
    ended (applied), and until its question found it (found); the notes whose question did
    not find them although the run was applied (retrieval's misses, not the watcher's)."""
    applied: list[float] = []
    found: list[float] = []
    missed: list[str] = []
    for rel, (paragraph, question) in zip(paths, EDITS, strict=False):
        if rel in service.ask(question):
            continue  # already an answer before the edit: it would measure nothing
        note = vault / rel
        wall = time.time()
        note.write_text(under_title(note.read_text("utf-8"), paragraph), "utf-8")
        t0 = time.monotonic()
        done: float | None = None
        hit: float | None = None
        while time.monotonic() - t0 < EDIT_TIMEOUT_S and hit is None:
            if hit is None and rel in service.ask(question):
                hit = time.monotonic() - t0
            if done is None:
                w = service.health()["watcher"]
                if w["last_run"] and w["last_run"] > wall and w["lag_s"] is None:
                    done = time.monotonic() - t0
            time.sleep(0.05)
        if done is None:
            service.settle(wall)
            done = time.monotonic() - t0
        applied.append(done)
        if hit is None:
            missed.append(rel)
            log(f"watch: edit of {rel} applied after {done:.2f} s; its question missed it")
        else:
            found.append(hit)
            log(f"watch: edit of {rel} applied after {done:.2f} s, found after {hit:.2f} s")
    return applied, found, missed


def idle_cpu_pct(service: Service, window: float) -> float:
    time.sleep(5)  # the last run's tail (the resident facts' reader, the vectors' refresh)
    c0, t0 = service.cpu_s(), time.monotonic()
    time.sleep(window)
    return 100.0 * (service.cpu_s() - c0) / (time.monotonic() - t0)


def soak(
    service: Service, vault: Path, paths: list[str], seconds: float
) -> tuple[float, float, float]:
    """One edit a second; RSS (MB) at the start, at the end, and the highest seen (logged
    once a minute, so a climb can be told from a plateau)."""
    start_rss = service.rss_mb()
    peak = start_rss
    t0 = time.monotonic()
    end = t0 + seconds
    i = 0
    while time.monotonic() < end:
        note = vault / paths[i % len(paths)]
        note.write_text(note.read_text("utf-8") + f"\nSoak edit {i}.\n", "utf-8")
        i += 1
        rss = service.rss_mb()
        peak = max(peak, rss)
        if i % 60 == 0:
            log(f"watch: soak {time.monotonic() - t0:.0f} s, RSS {rss:.0f} MB")
        time.sleep(1.0)
    service.settle(time.time() - 1)
    time.sleep(5)
    return start_rss, service.rss_mb(), peak


def burst(vault: Path, paths: list[str], tag: str) -> float:
    t = time.time()
    for rel in paths:
        note = vault / rel
        note.write_text(note.read_text("utf-8") + f"\nBurst {tag}.\n", "utf-8")
    return t


def runs_since(service: Service, offset: int) -> list[int]:
    """The notes embedded by each watcher run reported after ``offset`` of the log."""
    return [int(m.group(2)) for m in RUN_LINE.finditer(service.said()[offset:])]


def timed_sync(vault: Path) -> tuple[float, dict[str, Any]]:
    t0 = time.monotonic()
    done = subprocess.run(
        [cli(), "--vault", str(vault), "sync", "--json"],
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"vault-ko sync failed: {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    quick = args.quick
    n_edits = args.edits or (5 if quick else 20)
    n_burst = args.burst or (50 if quick else 1000)
    idle_s = args.idle or (15.0 if quick else 300.0)
    idle_poll_s = args.idle_polling or (10.0 if quick else 60.0)
    soak_s = args.soak or (30.0 if quick else 1800.0)
    rng = random.Random(38)
    with world_or(world, args, facts=False) as w:
        vault = w.vault
        notes = w.graph_notes
        paths = sorted(w.app.kodb.notes())
        chosen = rng.sample(paths, n_edits + n_burst + 10)
        edits, burst_paths, soak_paths = (
            chosen[:n_edits],
            chosen[n_edits : n_edits + n_burst],
            chosen[n_edits + n_burst :],
        )
        log(f"watch: starting `vault-ko serve --watch` on {notes:,} notes")
        started = time.time()
        service = Service(vault)
        try:
            warm(service, started)
            log(f"watch: service warm after {time.time() - started:.1f} s")
            applied, latencies, missed = edit_latencies(service, vault, edits)
            idle = idle_cpu_pct(service, idle_s)
            log(f"watch: idle CPU {idle:.2f} % over {idle_s:.0f} s")
            rss0, rss1, rss_peak = soak(service, vault, soak_paths, soak_s)
            log(f"watch: soak RSS {rss0:.0f} → {rss1:.0f} MB (peak {rss_peak:.0f})")
            offset = len(service.said())
            t_burst = burst(vault, burst_paths, "one")
            t0 = time.monotonic()
            service.settle(t_burst)
            burst_s = time.monotonic() - t0
            # A burst split in two would settle after its first run: look again once the
            # watcher's quiet step and debounce are over.
            last = service.health()["watcher"]["last_run"]
            time.sleep(2.0)
            if (
                service.health()["watcher"]["last_run"] != last
                or service.health()["watcher"]["lag_s"]
            ):
                service.settle(last)
                burst_s = time.monotonic() - t0
            runs = runs_since(service, offset)
        finally:
            service.stop()
        burst(vault, burst_paths, "two")
        sync_s, sync_doc = timed_sync(vault)
        started = time.time()
        polling = Service(vault, "--polling")
        try:
            polling.settle(started - 1)
            idle_poll = idle_cpu_pct(polling, idle_poll_s)
        finally:
            polling.stop()

    p50, p95 = pct(latencies, 50), pct(latencies, 95)
    a50, a95 = pct(applied, 50), pct(applied, 95)
    report.add(
        Row(
            f"`serve --watch`, {notes:,} notes: a note edited → a query about its new text "
            f"finds it (top {TOP}); {len(latencies)} of {len(applied)} edits found",
            f"p50 {p50:.2f} s, p95 {p95:.2f} s",
            f"the watcher's run applied: p50 {a50:.2f} s, p95 {a95:.2f} s"
            + (f"; not found once applied: {', '.join(missed)}" if missed else ""),
            "",
            f"target p95 ≤ {EDIT_P95_S:.0f} s: {'met' if p95 <= EDIT_P95_S else 'missed'}",
        ),
        watch_edit_p50_s=p50,
        watch_edit_p95_s=p95,
        watch_edits=len(applied),
        watch_edits_found=len(latencies),
        watch_applied_p50_s=a50,
        watch_applied_p95_s=a95,
    )
    embedded = sum(runs)
    report.add(
        Row(
            f"a burst of {n_burst:,} edited notes: watcher runs, wall time to applied",
            f"{len(runs)} run(s), {embedded:,} notes embedded, {burst_s:.1f} s",
            f"`vault-ko sync` of the same change: {sync_s:.1f} s "
            f"(embedded {sync_doc['embed']['embedded']:,})",
            f"{burst_s / sync_s:.2f}×",
            f"target one run: {'met' if len(runs) == 1 else 'missed'}",
        ),
        watch_burst_runs=len(runs),
        watch_burst_s=burst_s,
        watch_burst_sync_s=sync_s,
    )
    report.add(
        Row(
            f"idle CPU of the watching service, file events, {idle_s:.0f} s",
            f"{idle:.2f} %",
            f"polling mode: {idle_poll:.2f} % ({idle_poll_s:.0f} s)",
            "",
            f"target ≤ {IDLE_CPU_PCT:.0f} %: {'met' if idle <= IDLE_CPU_PCT else 'missed'}",
        ),
        watch_idle_cpu_pct=idle,
        watch_idle_cpu_polling_pct=idle_poll,
    )
    growth = 100.0 * (rss1 - rss0) / rss0 if rss0 else float("nan")
    report.add(
        Row(
            f"memory over {soak_s:.0f} s of one edit a second",
            f"RSS {rss0:.0f} → {rss1:.0f} MB ({growth:+.1f} %), peak {rss_peak:.0f} MB",
            "",
            "",
            f"target growth ≤ {SOAK_GROWTH_PCT:.0f} %: "
            f"{'met' if growth <= SOAK_GROWTH_PCT else 'missed'}",
        ),
        watch_soak_s=soak_s,
        watch_rss_start_mb=rss0,
        watch_rss_end_mb=rss1,
        watch_rss_growth_pct=growth,
    )


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--edits", type=int, help=f"edits timed one at a time (20; quick 5; at most {len(EDITS)})"
    )
    parser.add_argument("--burst", type=int, help="notes edited at once (1000; quick 50)")
    parser.add_argument("--idle", type=float, help="idle CPU window, s (300; quick 15)")
    parser.add_argument("--idle-polling", type=float, help="polling idle window (60; quick 10)")
    parser.add_argument("--soak", type=float, help="soak, s, one edit a second (1800; quick 30)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    add_args(parser)
    args = parser.parse_args()
    args.pg_url = ""  # this part writes through the service to the SQLite KO-DB only
    report = Report()
    run(report, args)
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
