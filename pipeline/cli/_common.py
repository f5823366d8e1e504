"""Shared plumbing of the CLI shells: settings from the root group, JSON output, errors."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from rich.console import Console

from pipeline.config import Settings, load_settings
from pipeline.errors import VaultKoError
from pipeline.lock import Holder, vault_lock

F = TypeVar("F", bound=Callable[..., Any])

#: The exit code when whoever read the output stopped reading (``| head``): a process that
#: SIGPIPE ended has it (128 + 13), as ``yes | head`` leaves ``yes``. Click's and rich's own
#: is 1, which here means "ran, and found a problem".
READER_GONE: Final = 141


def _tolerant(stream: Any) -> None:
    """A console that cannot encode a character (``PYTHONIOENCODING=ascii``, a latin-1
    terminal) gets a ``\\u2726`` escape instead of a UnicodeEncodeError traceback; so do lone
    surrogates (a file name or an argument that was not UTF-8)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        # A closed or detached stream has nothing to print to.
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="backslashreplace")


_tolerant(sys.stdout)
_tolerant(sys.stderr)

#: Human output goes to stdout; logs, progress and warnings go to stderr. Piped output
#: (a pager, a log file) gets 120 columns instead of rich's 80, so tables stay readable.
_PIPE_WIDTH = int(os.environ.get("COLUMNS") or 120)


class _Output(Console):
    """stdout's console: when the reader stops reading, the command ends as ``leave`` says
    (rich's own ending is exit 1, which here means "ran, and found a problem")."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _to_nowhere()
        raise SystemExit(READER_GONE)


out = _Output(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else _PIPE_WIDTH)
err = Console(stderr=True, highlight=False)


@dataclass
class AppContext:
    """What the root group collects before any command runs."""

    vault: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def settings(self, vault: str | None = None, **overrides: Any) -> Settings:
        """Effective settings; a positional VAULT argument means the same as --vault, and
        the two naming other folders is refused (which one was meant?)."""
        if vault and self.vault and Path(vault).resolve() != Path(self.vault).resolve():
            raise click.UsageError(f"two vaults given: --vault {self.vault} and VAULT {vault}")
        merged = {**self.overrides, **{k: v for k, v in overrides.items() if v is not None}}
        return load_settings(vault or self.vault, overrides=merged)


pass_app = click.make_pass_decorator(AppContext, ensure=True)

#: Set by a command that answered in this process and closed its stores: the entry point
#: then ends the process without the interpreter's teardown (``leave``).
_prompt_exit = False


def exit_promptly() -> None:
    """Let the entry point skip the interpreter's teardown after this command: freeing
    ONNX Runtime's session, numpy's and the drivers' modules is a tenth of a cold
    question's wall time (BENCHMARKS.md), and nothing is left for it to do."""
    global _prompt_exit
    _prompt_exit = True


def reader_gone() -> bool:
    """Did the output's reader close it before all of it was written? Click has then
    wrapped stdout to stop its own complaint; a write still buffered finds out on flush.
    Either way the rest of the output goes nowhere, without the interpreter's complaint."""
    # Click names its wrapper PacifyFlushWrapper or, since 8.2, _PacifyFlushWrapper.
    gone = type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper"
    if not gone:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            gone = True
        except (OSError, ValueError):
            return False
    if gone:
        _to_nowhere()
    return gone


def _to_nowhere() -> None:
    """The rest of stdout, buffered or still to come, goes to the null device."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)


def leave(exc: SystemExit) -> None:
    """End the process with ``exc``'s code: at once (``os._exit``, after flushing the
    output and the log handlers) when the command asked for it, else as Python does. When
    the output's reader stopped reading, the code is ``READER_GONE`` and nothing is said."""
    if reader_gone():
        exc = SystemExit(READER_GONE)
    if not _prompt_exit:
        raise exc
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if exc.code is not None and not isinstance(exc.code, int):
        sys.stderr.write(f"{exc.code}\n")
    import logging

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def prepare_query_model(settings: Settings, *, quiet: bool) -> dict[str, Any]:
    """After sync or embed: make the query-time model unless it is ready, so the vault's
    cold questions never load torch; ``{ready, reason, prepared_dir}`` for --json. A
    model that cannot run without torch is said on stderr (questions still work)."""
    from pipeline.embed import prepare_model

    if settings.embed_runtime == "torch":
        return {"ready": False, "reason": "embed_runtime is torch", "prepared_dir": None}

    def slow(message: str) -> None:
        if not quiet:
            err.print(message, markup=False)

    status = prepare_model(settings, on_slow_load=slow)
    if not status["ready"] and not quiet:
        err.print(
            f"note: questions load the model in torch: {status['reason']}",
            markup=False,
            soft_wrap=True,
        )
    return {k: status[k] for k in ("ready", "reason", "prepared_dir")}


def json_option(func: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document for machines."
    )(func)


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout (UTF-8, stable key order as built)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=_default) + "\n")
    sys.stdout.flush()


def _default(value: Any) -> Any:
    from pathlib import Path

    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def no_wait_option(func: F) -> F:
    return click.option(
        "--no-wait",
        is_flag=True,
        help="Exit 2 at once when another vault-ko run is writing to this vault, "
        "instead of waiting for it.",
    )(func)


def check_output(out: Path, option: str, inputs: Iterable[tuple[str, Path]] = ()) -> None:
    """Refuse, before any work, an output file that cannot be written (its folder missing
    or not writable), or that is one of the command's inputs by any path to it (written
    after it was read, what it held would be lost; ``inputs``: what it is, and its path)."""
    folder = out.parent
    if not folder.is_dir():
        raise click.BadParameter(f"{folder} is not a folder", param_hint=option)
    if not os.access(out if out.exists() else folder, os.W_OK):
        raise click.BadParameter(f"{out} cannot be written (permission denied)", param_hint=option)
    refuse_same_file(out, option, inputs)


def refuse_same_file(out: Path, option: str, inputs: Iterable[tuple[str, Path]]) -> None:
    """Refuse an output that is one of the command's inputs, by any path to it."""
    for name, path in inputs:
        if _same_file(out, path):
            raise click.BadParameter(
                f"{out} is {name}: writing it would overwrite what this command reads from it",
                param_hint=option,
            )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist yet
        return a.resolve() == b.resolve()


def require_writable_state_dir(settings: Settings, command: str) -> None:
    """Refuse ``command`` in one line (exit 2) when it could not write to the vault's state
    dir (a read-only file system, no permission, a file in its way), before it opens a
    store or loads the model: found later, it would be a traceback after the slow part.
    Writing is tried (a probe file made and removed), since the permission bits do not
    tell for root or a read-only mount; KO-DB's SQLite file there must be writable too."""
    state = settings.state_dir
    db = state / "ko.db"
    try:
        state.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=state)
        os.close(fd)
        os.unlink(probe)
        if settings.kodb_url is None and db.exists() and not os.access(db, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(db))
    except OSError as exc:
        what = db if exc.filename == str(db) else state
        raise VaultKoError(
            f"{command} cannot write to {what}: {exc.strerror or exc}; make it writable, "
            "or set VAULT_KO_STATE_DIR to a writable folder"
        ) from None


@contextmanager
def writer_lock(
    settings: Settings, command: str, *, no_wait: bool, creates: bool = True
) -> Iterator[None]:
    """The vault's writer lock for a command that writes (see ``pipeline.lock``); while
    another run holds it, say so on stderr and wait, or with ``--no-wait`` fail (exit 2).
    A state dir it cannot write to is refused first (``require_writable_state_dir``); a
    command that only writes into stores ``sync`` made (``creates`` false) refuses a
    folder without a state dir rather than make one, which would count it as a vault."""
    if not creates and not settings.state_dir.is_dir():
        from pipeline.errors import KodbError

        raise KodbError(
            f"{command}: {settings.vault} has no vault-ko state ({settings.state_dir}); "
            "`vault-ko sync` makes it"
        )
    require_writable_state_dir(settings, command)

    def waiting(holder: Holder) -> None:
        err.print(
            f"waiting for another vault-ko run ({holder.describe()}) to finish…",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    with vault_lock(settings.state_dir, command, wait=not no_wait, on_wait=waiting):
        yield


#: Called as update(done, total) by long jobs (ingest, embed, load-context).
ProgressUpdate = Callable[[int, "int | None"], None]
#: Without a terminal, a job's first progress line comes after this many seconds (short
#: jobs say nothing), the next ones after every ``PROGRESS_LINE_S``.
QUIET_PROGRESS_S = 10.0
PROGRESS_LINE_S = 30.0


def _progress_lines(description: str) -> ProgressUpdate:
    """``update(done, total)`` printing "description: done/total (n %)" lines on stderr."""
    started = time.monotonic()
    due = started + QUIET_PROGRESS_S

    def update(done: int, total: int | None) -> None:
        nonlocal due
        now = time.monotonic()
        if now < due:
            return
        due = now + PROGRESS_LINE_S
        of = f"/{total:,} ({100 * done // total} %)" if total else ""
        err.print(f"{description}: {done:,}{of}, {now - started:.0f} s", markup=False)

    return update


@contextmanager
def progress_bar(
    description: str, *, enabled: bool, total: int | None = None, min_total: int = 0
) -> Iterator[ProgressUpdate | None]:
    """A transient rich progress bar on stderr for people at a terminal; None when not
    ``enabled``. Without a terminal (a cron job, a pipe), a line on stderr instead, once
    the job has run ``QUIET_PROGRESS_S`` and then every ``PROGRESS_LINE_S`` seconds, so a
    long sync is not silent for minutes.

    The bar shows once the job's total reaches ``min_total`` (small jobs finish first).
    """
    if not enabled:
        yield None
        return
    if not err.is_terminal:
        yield _progress_lines(description)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total, visible=(total or 0) >= min_total)

        def update(done: int, new_total: int | None) -> None:
            visible = new_total is None or new_total >= min_total
            bar.update(task, completed=done, total=new_total, visible=visible)

        yield update
