"""The client of a running service: HTTP/1.1 over a plain socket, standard library only.

The CLI's ``query``, the hook and the MCP server use it; the hook's fast path imports this
module and nothing heavier, so asking the service costs no torch, numpy, FastAPI or
SQLAlchemy import. It speaks just what the service needs (one request per connection,
``Connection: close``, a ``Content-Length`` body) on a socket rather than ``http.client``,
whose import (``email``, ``ssl``) alone is a noticeable share of a hook call. Every socket
and HTTP error becomes ``ServiceError`` here.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from pipeline.errors import ServiceError
from pipeline.service.record import ServiceRecord, live_record, settings_digest

# What the service accepts (its API schema is built from these, service/api.py), here so the
# clients that must not import FastAPI (the MCP server) can apply the same limits first.
#: Longest question or session prompt (characters): the CLI takes any, agents paste files.
MAX_QUESTION_CHARS = 200_000
#: A question or prompt holds something besides white space, what ``str.strip`` strips
#: (Python's ``\s``). Spelt out: ``\s`` of the published schema's ECMA-262 reading is
#: another set (U+FEFF in, U+001C-U+001F and U+0085 out), so a client that checks the
#: schema would send what the server refuses.
NOT_BLANK = r"[^\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
#: Most sessions in one /session-context request (load-context takes any number).
MAX_SESSIONS = 10_000
#: Longest session id (characters).
MAX_SESSION_ID_CHARS = 1000


def whole_number(value: Any) -> Any:
    """A count as JSON Schema's ``integer`` has it: 5.0 is 5 (a JSON number without a
    fraction); anything else is left for the strict check ("5", true and 5.5 are refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class ServiceClient:
    """Requests to one service; each call opens its own connection (a CLI run or a hook
    call makes one or two, and a fresh connection is what the timeout bounds)."""

    def __init__(self, record: ServiceRecord) -> None:
        self.record = record
        parts = urlsplit(record.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or record.port

    def _request(
        self, method: str, path: str, body: Any | None, timeout: float
    ) -> tuple[int, bytes]:
        data = b"" if body is None else request_bytes(body)
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self._host}:{self._port}",
            "Accept: application/json",
            "Connection: close",
            f"Content-Length: {len(data)}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        if self.record.token:
            head.append(f"Authorization: Bearer {self.record.token}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
        deadline = time.monotonic() + max(timeout, 0.01)
        chunks: list[bytes] = []
        try:
            with socket.create_connection(
                (self._host, self._port), timeout=max(timeout, 0.01)
            ) as sock:
                try:
                    sock.sendall(request)
                except OSError as exc:
                    # The service may answer before the body is all sent (413: too long)
                    # and close: the answer it sent, if any, is the answer.
                    with contextlib.suppress(OSError):
                        _read_to_end(sock, deadline, chunks)
                    if not chunks:
                        raise exc
                else:
                    _read_to_end(sock, deadline, chunks)
        except OSError as exc:
            reason = str(exc) or type(exc).__name__
            raise ServiceError(f"the service at {self.record.url} failed: {reason}") from exc
        return _parse_response(b"".join(chunks), self.record.url)

    def call(self, method: str, path: str, body: Any | None = None, *, timeout: float) -> Any:
        """The JSON of a 2xx answer; ServiceError (with the service's own reason) else."""
        status, raw = self._request(method, path, body, timeout)
        try:
            data = json.loads(raw) if raw else None
        except ValueError as exc:
            raise ServiceError(f"the service at {self.record.url} sent no JSON ({status})") from exc
        if not 200 <= status < 300:
            detail = data.get("error") if isinstance(data, dict) else None
            detail = detail or (data.get("detail") if isinstance(data, dict) else None)
            raise ServiceError(
                f"the service at {self.record.url} answered {status}: {detail}",
                status=status,
                detail=str(detail) if detail is not None else None,
            )
        return data

    def healthy(self, timeout: float) -> bool:
        """Whether /healthz answers ok within ``timeout`` (never raises)."""
        try:
            data = self.call("GET", "/healthz", timeout=timeout)
        except ServiceError:
            return False
        return isinstance(data, dict) and data.get("status") == "ok"


def _read_to_end(sock: socket.socket, deadline: float, chunks: list[bytes]) -> None:
    """Append what ``sock`` sends to ``chunks`` until it closes (OSError past the deadline
    or on a reset, with what came kept in ``chunks``)."""
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(65536)
        if not chunk:
            return
        chunks.append(chunk)


def _parse_response(raw: bytes, url: str) -> tuple[int, bytes]:
    """(status, body) of an HTTP/1.1 response read to the end of the connection."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2) if lines and sep else []
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ServiceError(f"the service at {url} sent no HTTP response")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _unchunk(body)
    elif headers.get("content-length", "").isdigit():
        body = body[: int(headers["content-length"])]
    return int(parts[1]), body


def _unchunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


def find_service(settings: Any, *, probe_timeout: float | None = None) -> ServiceClient | None:
    """A client of the service running for the vault of ``settings`` with the same
    answer-shaping settings: its record is there, its pid alive, and (when ``probe_timeout``
    is given) its /healthz answers within that time."""
    record = live_record(settings.state_dir, settings.vault, settings_digest(settings))
    if record is None:
        return None
    client = ServiceClient(record)
    if probe_timeout is not None and not client.healthy(probe_timeout):
        return None
    return client


def request_bytes(body: Any) -> bytes:
    """A request's JSON body as the client sends it (what ``service_max_body_bytes``
    measures)."""
    return json.dumps(body).encode("utf-8")


class Deadline:
    """The time left of a budget (the hook's)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


#: A question through the service may wait for the graph's retries, or for the model to
#: load when the graph came back after the service started: seconds, not milliseconds.
QUERY_TIMEOUT = 120.0


def query_body(question: str, opts: Any, *, full_precision: bool = False) -> dict[str, Any]:
    """The /query body asking exactly what ``opts`` (a resolved QueryOptions) asks, so the
    service's answer equals the in-process one whatever the service's own settings."""
    return {
        "question": question,
        "top_k": opts.top_k,
        "hits": opts.hits,
        "facts_per_subject": opts.facts_per_subject,
        "semantic": opts.semantic,
        "preset": opts.preset,
        "retrieval": opts.retrieval,
        "today": opts.today,
        "full_precision": full_precision,
    }
