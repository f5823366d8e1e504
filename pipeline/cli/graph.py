"""`vault-ko graph up | down | status`: the local graph server and graph reachability."""

from __future__ import annotations

import logging
import time

import click
from rich.table import Table

from pipeline.cli._common import (
    AppContext,
    emit_json,
    err,
    json_option,
    out,
    pass_app,
    require_writable_state_dir,
)
from pipeline.config import mask_url
from pipeline.errors import EXIT_UNAVAILABLE
from pipeline.graph.breaker import CLOSED
from pipeline.graph.local import DEFAULT_DIMS, DEFAULT_HEAP, DEFAULT_START_TIMEOUT
from pipeline.graph.records import MAX_DIMS


@click.group("graph")
def graph_group() -> None:
    """Start, stop and check the graph (the local ArcadeDB server, or your own graph)."""


@graph_group.command("up")
@click.option(
    "--dims",
    type=click.IntRange(1, MAX_DIMS),
    default=None,
    help="Dimensions of the vector index (the embedding model's size). Default: keep the "
    f"existing index, else {DEFAULT_DIMS}. A different value drops the notes embedded "
    "with other dimensions.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1.0),
    default=DEFAULT_START_TIMEOUT,
    show_default=True,
    help="Seconds to wait for the server to answer on Bolt.",
)
@click.option("--heap", default=DEFAULT_HEAP, show_default=True, help="Java heap of the server.")
@json_option
@pass_app
def graph_up(app: AppContext, dims: int | None, timeout: float, heap: str, as_json: bool) -> None:
    """Start the local graph server for this vault (idempotent).

    Runs ArcadeDB from the arcadedb-embedded package in the background, bound to 127.0.0.1
    on free ports recorded in <vault>/.vault-ko/graph/local.json, with a generated root
    password (mode 0600) there too; creates the database and the vector index; resets the
    graph circuit breaker. On a running server it only reports it.
    """
    from pipeline.app import App

    settings = app.settings()
    require_writable_state_dir(settings, "vault-ko graph up")  # its data and record live there
    local = App(settings).local_graph(heap=heap)
    result = local.up(dims=dims, timeout=timeout, settings=settings)
    record = result.record
    if as_json:
        emit_json(
            {
                "started": result.started,
                "url": record.url,
                "http_url": record.http_url,
                "database": record.database,
                "pid": record.pid,
                "dims": result.dims,
                "state_dir": str(settings.state_dir),
                "stale_pid": result.stale_pid,
            }
        )
        return
    if result.stale_pid is not None:
        err.print(f"note: pid {result.stale_pid} in local.json was not our server; restarted")
    verb = "started" if result.started else "already running"
    out.print(
        f"local graph {verb}: {record.url} (pid {record.pid}, database {record.database!r}, "
        f"data in {local.dir})"
    )
    if settings.graph_url and settings.graph_url != record.url:
        err.print(
            f"note: graph_url is set to {mask_url(settings.graph_url)}; queries use that graph"
        )


@graph_group.command("down")
@json_option
@pass_app
def graph_down(app: AppContext, as_json: bool) -> None:
    """Stop the local graph server (idempotent).

    Queries fall back to KO-DB term search while it is down (the circuit breaker records
    the stop); `vault-ko graph up` brings it back with its data.
    """
    from pipeline.app import App

    settings = app.settings()
    was_running = App(settings).local_graph().down()
    if as_json:
        emit_json({"stopped": was_running, "state_dir": str(settings.state_dir)})
        return
    out.print("local graph stopped" if was_running else "local graph was not running")


@graph_group.command("status")
@json_option
@click.pass_context
def graph_status(ctx: click.Context, as_json: bool) -> None:
    """Probe the graph once (no retries) and report it; exit 0 when up, 2 when down.

    --json prints exactly {up, url, dialect, agent, latency_ms, reason, detail}: the reason
    in words, and the driver's own text when it says more.
    """
    # Imported here: the client pulls in numpy and tenacity, which `vault-ko --help` and
    # the other commands' start-up need not pay for.
    from pipeline.app import App
    from pipeline.graph.reason import graph_reason

    app = ctx.ensure_object(AppContext)
    settings = app.settings()
    with App(settings) as stores:
        status = stores.graph.probe()
        breaker = stores.graph.breaker.read()
        info = stores.local_graph().info()
    if as_json:
        # The reason in words, as the table and freshness --json give it; the driver's own
        # text beside it, as freshness has it.
        said = graph_reason(status.reason, status.url) if status.reason else None
        detail = status.reason if status.reason and status.reason != said else None
        emit_json(status.to_dict() | {"reason": said, "detail": detail})
    else:
        table = Table(title="vault-ko graph", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value")
        table.add_row("up", "[green]yes[/]" if status.up else "[red]no[/]")
        table.add_row("url", status.url)
        table.add_row("dialect", status.dialect or "-")
        table.add_row("agent", status.agent or "-")
        latency = "-" if status.latency_ms is None else f"{status.latency_ms:.1f} ms"
        table.add_row("latency", latency)
        verbose = logging.getLogger("pipeline").isEnabledFor(logging.INFO)
        if status.reason:
            table.add_row("reason", graph_reason(status.reason, status.url))
            if verbose:
                table.add_row("detail", status.reason)
        circuit = breaker.state
        if breaker.opened_at is not None and breaker.state != CLOSED:
            age = time.time() - breaker.opened_at
            circuit += f" ({age:.0f}s ago: {graph_reason(breaker.reason or '', status.url)})"
        table.add_row("circuit", circuit)
        if info.record is not None:
            local = f"pid {info.record.pid}" if info.running else "not running"
            if info.stale_pid is not None:
                local += f" (stale pid {info.stale_pid})"
            table.add_row("local server", f"{local}; data in {settings.state_dir / 'graph'}")
        out.print(table)
    if not status.up:
        ctx.exit(EXIT_UNAVAILABLE)
