"""`vault-ko watch`: keep the vault's KO-DB and graph current as notes change."""

from __future__ import annotations

import signal
import time
from typing import Any

import click

from pipeline.cli._common import (
    AppContext,
    emit_json,
    err,
    json_option,
    pass_app,
    require_writable_state_dir,
)


@click.command("watch")
@click.argument("vault", required=False, type=click.Path(file_okay=False))
@click.option(
    "--debounce",
    type=click.FloatRange(0.05, 60.0),
    help="The longest changes that keep coming are gathered before a run (a run starts once "
    "0.2 s pass without one) [the watch_debounce setting: 1.0].",
)
@click.option(
    "--polling",
    is_flag=True,
    help="Poll the vault instead of listening for file events (network shares, some "
    "container mounts) [the watch_mode setting].",
)
@json_option
@pass_app
def watch_cmd(
    app: AppContext, vault: str | None, debounce: float | None, polling: bool, as_json: bool
) -> None:
    """Keep the vault current as its notes change; Ctrl-C stops it.

    Runs `sync` at start (catching up with what changed meanwhile), then once per burst of
    changes to notes: changed notes ingested and embedded, deleted ones removed,
    recalibration when the drift rule says so. It holds the vault's writer lock only
    while a run writes, so `vault-ko sync` still works beside it. One watcher per vault.
    A failed run (the graph down, KO-DB unreachable) is reported and tried again.
    With --json, each report is a JSON line on stdout: {"at", "message"}.
    """
    from pipeline.app import App
    from pipeline.watch import Watch, only_watcher, sync_runner

    settings = app.settings(vault)
    require_writable_state_dir(settings, "vault-ko watch")
    seconds = settings.watch_debounce if debounce is None else debounce
    poll = polling or settings.watch_mode == "polling"

    def report(line: str) -> None:
        if as_json:
            emit_json({"at": round(time.time(), 3), "message": line})
        else:
            err.print(f"watch: {line}", markup=False, highlight=False, soft_wrap=True)

    with App(settings, creates_kodb=True) as stores:
        watch = Watch(
            settings,
            sync_runner(stores, report),
            report=report,
            debounce_ms=int(seconds * 1000),
            polling=poll,
        )

        def stop(*_: Any) -> None:
            watch.stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        mode = "polling" if poll else "file events"
        with only_watcher(settings.state_dir):  # a second watcher is refused before a word
            report(f"watching {settings.vault} ({mode}, {seconds:g} s debounce); Ctrl-C stops")
            watch.loop()
        report("stopped")
