"""`vault-ko embed` throughput vs a bare ``SentenceTransformer.encode`` of the same texts.

Run against a vault that is ingested and whose local graph is up (``vault-ko graph up``,
``vault-ko ingest``). In one process, with the same torch and MKL settings:

1. bare: ``SentenceTransformer.encode(texts, batch_size=embed_batch_size)`` of the texts the
   sync embeds (read as the sync reads them), nothing else; run before and after 2, the
   mean counts;
2. full: ``sync_embeddings(full=True)`` (parse, embed, graph writes, links);
3. incremental: after rewriting ``--change`` (default 1 %) of the notes' bodies (restored
   at the end) and ingesting them, a plain sync; then a no-op sync.

The last line is ``RESULT notes=… bare_s=… full_s=… ratio=… incremental_s=…
incremental_share=… noop_s=…`` (ratio = bare / full: 1.0 means the sync runs at the model's
speed; incremental_share = incremental / full).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.embed_sync import _read, _text_of, sync_embeddings
from pipeline.ingest import ingest_vault


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--change", type=float, default=0.01, help="share of notes edited")
    args = parser.parse_args(argv)
    settings = load_settings(str(args.vault))
    with App(settings) as app:
        registry = app.kodb.notes()
        texts = [
            _text_of(_read(args.vault, p, n, settings.vault_max_note_bytes))
            for p, n in sorted(registry.items())
        ]
        from sentence_transformers import SentenceTransformer

        from pipeline.embed import resolve_model

        source, _ = resolve_model(settings.embed_model, base_dir=settings.vault)
        encoder = SentenceTransformer(source, device="cpu")  # bare encode, the yardstick
        encoder.encode(texts[:8], batch_size=8)  # warm-up

        def bare_encode() -> float:
            t0 = time.perf_counter()
            encoder.encode(texts, batch_size=settings.embed_batch_size, show_progress_bar=False)
            return time.perf_counter() - t0

        # The bare encode runs before and after the sync and counts as their mean, so a
        # change of the machine's load during the run weighs on both sides alike.
        first = bare_encode()
        t0 = time.perf_counter()
        sync_embeddings(settings, app.kodb, app.graph, app.embedder, full=True)
        full = time.perf_counter() - t0
        bare = (first + bare_encode()) / 2

        changed = sorted(registry)[:: max(1, round(1 / args.change))]
        originals = {p: (args.vault / p).read_text(encoding="utf-8") for p in changed}
        try:
            for p, text in originals.items():
                (args.vault / p).write_text(text + "\nedited for the benchmark.\n", "utf-8")
            ingest_vault(settings, app.kodb)
            t0 = time.perf_counter()
            report = sync_embeddings(settings, app.kodb, app.graph, app.embedder)
            incremental = time.perf_counter() - t0
            t0 = time.perf_counter()
            sync_embeddings(settings, app.kodb, app.graph, app.embedder)
            noop = time.perf_counter() - t0
        finally:
            for p, text in originals.items():
                (args.vault / p).write_text(text, "utf-8")
    print(
        f"RESULT notes={len(texts)} bare_s={bare:.2f} full_s={full:.2f} "
        f"ratio={bare / full:.3f} incremental_notes={report.embedded} "
        f"incremental_s={incremental:.2f} incremental_share={incremental / full:.3f} "
        f"noop_s={noop:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
