"""`vault-ko serve`: the resident service, keeping the model and the stores warm."""

from __future__ import annotations

import json
import sys

import click

from pipeline.cli._common import (
    AppContext,
    err,
    json_option,
    pass_app,
    require_writable_state_dir,
)


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs a token.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port to listen on [a free one]."
)
@click.option(
    "--token",
    envvar="VAULT_KO_SERVICE_TOKEN",
    help="Bearer token every request must send (Authorization: Bearer …); required off "
    "loopback. Also read from $VAULT_KO_SERVICE_TOKEN.",
)
@click.option(
    "--generate-token",
    is_flag=True,
    help="Make a random token and record it in <state dir>/service.json (mode 0600).",
)
@click.option(
    "--watch",
    "watch",
    is_flag=True,
    help="Also keep the vault current as its notes change, as `vault-ko watch` does.",
)
@click.option(
    "--debounce",
    type=click.FloatRange(0.05, 60.0),
    help="With --watch: the longest changes that keep coming are gathered before a run (a "
    "run starts once 0.2 s pass without one) [the watch_debounce setting: 1.0].",
)
@click.option(
    "--polling",
    is_flag=True,
    help="With --watch: poll the vault instead of listening for file events [the watch_mode "
    "setting].",
)
@json_option
@pass_app
def serve_cmd(
    app: AppContext,
    host: str,
    port: int,
    token: str | None,
    generate_token: bool,
    watch: bool,
    debounce: float | None,
    polling: bool,
    as_json: bool,
) -> None:
    """Serve the vault over HTTP JSON until SIGTERM or Ctrl-C (loopback by default).

    POST /query (the answer JSON), POST /session-context (packs), GET /freshness,
    GET /healthz, GET /metrics (Prometheus); OpenAPI at /docs. Loads the model once, keeps
    the graph driver and KO-DB open, and records host, port, pid and token in
    <state dir>/service.json, where `vault-ko query`, `vault-ko hook` and `vault-ko mcp`
    find it. Reloads the calibration when `vault-ko calibrate` stores a new one; answers in
    fallback when the graph is down, exactly as the CLI. --json prints one line
    {"url", "pid", "vault", "record"} on stdout once it accepts connections.

    With --watch the service keeps its vault current (a first run at start, then one per
    burst of changes; see `vault-ko watch --help`), reports its runs on stderr and its
    watcher in /healthz and /metrics; a vault with no KO-DB yet gets one. Exit 3 for a
    non-loopback --host without a token or a bad setting, 2 when the state dir cannot be
    written, KO-DB is unreachable, the port is taken or another watcher keeps the vault.
    """
    from pipeline.service.server import Started, new_token, preflight, serve
    from pipeline.watch import WatchSetup

    if generate_token and token:
        raise click.UsageError("--token and --generate-token: choose one")
    if (debounce is not None or polling) and not watch:
        raise click.UsageError("--debounce and --polling go with --watch")
    if generate_token:
        token = new_token()
    settings = app.settings()
    preflight(settings, host, token, watching=watch)  # a refusal is the only output
    # It records itself in service.json there, and writes the breaker and fallback logs.
    require_writable_state_dir(settings, "vault-ko serve")

    def started(info: Started) -> None:
        if info.warning:
            err.print(f"warning: {info.warning}", markup=False, soft_wrap=True)
        if as_json:
            doc = {
                "url": info.url,
                "pid": info.pid,
                "vault": info.vault,
                "record": info.record_path,
            }
            sys.stdout.write(json.dumps(doc) + "\n")
            sys.stdout.flush()
        auth = (
            f"; every request needs 'Authorization: Bearer <token>' (recorded in "
            f"{info.record_path})"
            if info.token_required
            else ""
        )
        err.print(
            f"vault-ko service for {info.vault} at {info.url} (pid {info.pid}); API docs at "
            f"{info.url}/docs{auth}; stop with Ctrl-C or `kill {info.pid}`",
            markup=False,
            soft_wrap=True,
        )

    setup = None
    if watch:
        seconds = settings.watch_debounce if debounce is None else debounce
        setup = WatchSetup(
            debounce_ms=int(seconds * 1000),
            polling=polling or settings.watch_mode == "polling",
            report=lambda line: err.print(
                f"watch: {line}", markup=False, highlight=False, soft_wrap=True
            ),
        )
    err.print("starting: opening KO-DB, checking the graph, loading the model…", markup=False)
    serve(settings, host=host, port=port, token=token, on_started=started, watch=setup)
    err.print("vault-ko service stopped", markup=False)
