"""Start and stop the service: the token rule, the bind, the warm-up, uvicorn, shutdown.

refuse a non-loopback bind without a token ─▶ refuse a second service for the vault
─▶ bind (a free port unless one is given) ─▶ warm up: KO-DB, then the graph, then the
model (only with the graph up) ─▶ prime: answer a throw-away question, which reads the warm
copies (note vectors, resident facts), wait for them (at most ``PRIME_SECONDS``), answer it
again ─▶ serve; the record is written once connections are accepted ─▶ SIGTERM / SIGINT:
in-flight requests finish, the record is removed, the stores are closed, exit 0
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline import __version__
from pipeline.app import App
from pipeline.config import Settings
from pipeline.errors import ConfigError, GraphError, KodbError, ServiceError, VaultKoError
from pipeline.service.record import (
    ServiceRecord,
    is_loopback,
    live_record,
    remove_record,
    settings_digest,
    write_record,
)
from pipeline.watch import Watch, WatchSetup, only_watcher, sync_runner, watcher_status

if TYPE_CHECKING:
    from pipeline.service.warm import WarmAnswers

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
#: Seconds in-flight requests get to finish after SIGTERM before connections are closed.
GRACEFUL_SHUTDOWN_SECONDS = 10
#: A text embedded once at start, so the first question does not pay torch's first-call
#: set-up (tens of milliseconds on top of the load).
WARM_UP_TEXT = "warm up the model"
#: torch threads per model call in the service. Calls are serialised (embed.MODEL_LOCK) and
#: one forward already uses every core: on a shared machine more threads only contend, and
#: the vectors are bit-identical (figures in docs/benchmarks-history.md). An ONNX Runtime
#: session (embed_onnx) takes the same count when it is made.
SERVICE_TORCH_THREADS = 1
#: BLAS (numpy's OpenBLAS) threads in the service, for the exact search over the warm note
#: matrix: one thread scans it faster than OpenBLAS's default threads on a shared, loaded
#: machine (figures in docs/benchmarks-history.md).
SERVICE_BLAS_THREADS = 1
#: The longest the start waits for the warm copies (vectors, resident facts) before it
#: accepts connections; a vault too large for that starts anyway and loads on.
PRIME_SECONDS = 60.0


@dataclass(frozen=True)
class Started:
    """What a starting service tells its shell (never the token itself)."""

    url: str
    pid: int
    vault: str
    token_required: bool
    record_path: str
    model_loaded: bool
    warning: str | None


def check_bind(host: str, token: str | None) -> None:
    """A service off loopback answers anyone who can reach the port: it needs a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"binding {host} (not loopback) needs a bearer token: pass --token TOKEN "
            "(or VAULT_KO_SERVICE_TOKEN), or --generate-token to make one and record it "
            "in the state dir; refusing to start"
        )


def new_token() -> str:
    return secrets.token_urlsafe(32)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServiceError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def warm_up(app: App) -> str | None:
    """Open KO-DB (an error stops the start), check the graph, load the model when the
    graph is up; a warning when the model is left for later."""
    app.kodb  # noqa: B018 - unreachable KO-DB: the service could answer nothing
    try:
        app.graph.ping()
    except GraphError as exc:
        from pipeline.graph.reason import in_words

        log.info("the graph failed at start: %s", exc)
        return f"{in_words(exc)} at start; answers come from the notes' words until it is back"
    app.load_model().embed([WARM_UP_TEXT])
    app.refresh_calibration()
    return None


def prime(warm: WarmAnswers) -> None:
    """Read the warm copies and answer through them before connections are accepted (the
    record is written after), so the first question is answered as warm as the next; a
    failure is logged and the service starts anyway, its questions reading the copies as
    they would have."""
    t0 = time.monotonic()
    try:
        done = warm.prime(WARM_UP_TEXT, PRIME_SECONDS)
    except VaultKoError as exc:
        log.warning("warming the answers failed, the first questions read the stores: %s", exc)
        return
    except Exception:  # a failed warm-up must not stop a service that could answer
        log.exception("warming the answers failed; the first questions read the stores")
        return
    if done:
        log.info("answers warm in %.1f s", time.monotonic() - t0)
    else:
        log.warning(
            "the warm copies were still loading after %.0f s; the service starts, and questions "
            "read the stores until they are in",
            PRIME_SECONDS,
        )


def service_threads() -> None:
    """The service's thread limits: the model's (ONNX Runtime, or torch once it loads) and
    numpy's BLAS."""
    from threadpoolctl import threadpool_limits

    from pipeline.embed import set_model_threads

    set_model_threads(SERVICE_TORCH_THREADS)
    threadpool_limits(limits=SERVICE_BLAS_THREADS, user_api="blas")


class _Server:
    """uvicorn's Server, told when it accepts connections and kept from re-raising the
    signal that stopped it (uvicorn re-raises SIGTERM after shutdown, which would kill the
    process before the record is removed)."""

    def __init__(
        self,
        config: Any,
        on_started: Callable[[], None],
        on_exit: Callable[[], None] = lambda: None,
    ) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets=sockets)
                if self.started:
                    on_started()

            def handle_exit(self, sig: int, frame: Any) -> None:
                on_exit()  # the watcher stops at once, while requests finish
                super().handle_exit(sig, frame)

            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                if threading.current_thread() is not threading.main_thread():
                    yield
                    return
                signals = (signal.SIGINT, signal.SIGTERM)
                before = {s: signal.signal(s, self.handle_exit) for s in signals}
                try:
                    yield
                finally:
                    for s, handler in before.items():
                        signal.signal(s, handler)

        self.server = Server(config)

    def run(self, sock: socket.socket) -> None:
        self.server.run(sockets=[sock])


def preflight(settings: Settings, host: str, token: str | None, *, watching: bool) -> None:
    """What refuses a service before anything is opened or made: a bind off loopback
    without a token, and a vault without any state (``refuse_without_kodb``)."""
    check_bind(host, token)
    refuse_without_kodb(settings, watching=watching)


def refuse_without_kodb(settings: Settings, *, watching: bool) -> None:
    """A service in a folder without vault-ko state stops before it makes the state dir
    (its claim, its record): the folder would then count as a vault. With a state dir,
    App says it when it opens KO-DB; a watching service makes KO-DB (its first run fills
    it)."""
    kodb = settings.state_dir / "ko.db"
    if watching or settings.kodb_url is not None or settings.state_dir.exists():
        return
    raise KodbError(f"no KO-DB at {kodb}: `vault-ko sync` (or `ingest`) makes it")


def serve(
    settings: Settings,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    token: str | None = None,
    on_started: Callable[[Started], None] | None = None,
    app: App | None = None,
    watch: WatchSetup | None = None,
) -> None:
    """Run the service of ``settings.vault`` until SIGTERM or SIGINT; with ``watch``, it
    also keeps the vault current (``pipeline/watch.py``) in a thread of its own."""
    import uvicorn

    from pipeline.service.api import create_api
    from pipeline.service.metrics import ServiceMetrics

    refuse_without_kodb(settings, watching=watch is not None)
    claims, sock = _claim_and_bind(settings, host, port, token, watching=watch is not None)
    actual_port = sock.getsockname()[1]
    # The model's threads are set before anything loads it: warm-up, or a question's
    # preload when the graph was down at start (setting them never imports torch).
    service_threads()
    # A watching service makes its KO-DB on a new vault (its first run fills it).
    app = app or App(settings, creates_kodb=watch is not None)
    pid = os.getpid()
    watcher: _Watcher | None = None
    try:
        warning = warm_up(app)
        if warning:
            log.warning("%s", warning)
        state_dir = settings.state_dir
        metrics = ServiceMetrics(
            graph_up=lambda: app.graph.probe().up,
            model_loaded=lambda: app.model_loaded,
            watcher=lambda: watcher_status(state_dir),
        )
        api = create_api(app, metrics, token=token)
        if warning is None:
            prime(api.state.warm)
        started = _on_started(settings, app, host, actual_port, token, warning, on_started)
        config = uvicorn.Config(
            api,
            log_config=None,  # our logging (stderr, -v) stays as the CLI set it
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        )
        if watch is not None:
            watcher = _Watcher(app, watch, claims)
        on_exit = watcher.watch.stop.set if watcher is not None else (lambda: None)
        _Server(config, started, on_exit).run(sock)
    finally:
        running = watcher is not None and not watcher.stop()
        remove_record(settings.state_dir, pid)
        sock.close()
        if not running:  # a run still writing keeps its stores and lock; the exit ends them
            app.close()
            claims.close()


def _claim_and_bind(
    settings: Settings, host: str, port: int, token: str | None, *, watching: bool
) -> tuple[contextlib.ExitStack, socket.socket]:
    """The refusals (off loopback without a token, a second service, a second watcher)
    before anything starts, then the listening socket; the watcher's claim is returned."""
    check_bind(host, token)
    running = live_record(settings.state_dir, settings.vault)
    if running is not None:
        raise ServiceError(
            f"a service already runs for {settings.vault} at {running.url} (pid "
            f"{running.pid}); stop it first (kill {running.pid})"
        )
    claims = contextlib.ExitStack()
    if watching:
        claims.enter_context(only_watcher(settings.state_dir))
    try:
        return claims, bind(host, port)
    except BaseException:
        claims.close()
        raise


def _on_started(
    settings: Settings,
    app: App,
    host: str,
    port: int,
    token: str | None,
    warning: str | None,
    on_started: Callable[[Started], None] | None,
) -> Callable[[], None]:
    """What runs once connections are accepted: the record written, the shell told."""
    pid = os.getpid()
    record = ServiceRecord(
        host=host,
        port=port,
        pid=pid,
        vault=str(settings.vault),
        token=token,
        started_at=time.time(),
        version=__version__,
        settings_digest=settings_digest(settings),
    )

    def started() -> None:
        write_record(settings.state_dir, record)
        if on_started is not None:
            on_started(
                Started(
                    url=record.url,
                    pid=pid,
                    vault=record.vault,
                    token_required=token is not None,
                    record_path=str(settings.state_dir / "service.json"),
                    model_loaded=app.model_loaded,
                    warning=warning,
                )
            )

    return started


class _Watcher:
    """The service's watch loop in a thread (its stores and model are the service's own).
    The thread owns the watcher lock's claim: a loop that dies releases it, so the vault
    shows no watcher rather than a dead one."""

    def __init__(self, app: App, setup: WatchSetup, claim: contextlib.ExitStack) -> None:
        self._claim = claim
        self.watch = Watch(
            app.settings,
            sync_runner(app, setup.report),
            report=setup.report,
            debounce_ms=setup.debounce_ms,
            polling=setup.polling,
            holder="vault-ko serve --watch",
        )
        self._thread = threading.Thread(target=self._loop, name="vault-ko-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            self.watch.loop()
        except Exception:  # a background thread must not die silently
            log.exception("the watcher stopped; the service answers on without it")
        finally:
            self._claim.close()

    def stop(self) -> bool:
        """Stop watching; a run in progress gets the shutdown grace to finish (a run cut
        short is completed by the next one, as after a kill). False: it is still running."""
        self.watch.stop.set()
        self._thread.join(GRACEFUL_SHUTDOWN_SECONDS)
        if self._thread.is_alive():
            log.warning("the watcher's run was cut short; the next run completes it")
            return False
        return True
