"""Why the graph could not answer, in plain words for people: "the graph is not reachable
at 127.0.0.1:7687 (connection refused)". The driver's own text is for ``-v`` (logs), not
for answers and reports."""

from __future__ import annotations

from pipeline.errors import GraphError, GraphUnavailable

#: Phrases of driver and socket errors, and what they mean in a few words.
_CAUSES: tuple[tuple[str, str], ...] = (
    ("did not answer within", "no answer in time"),
    ("connection refused", "connection refused"),
    ("timed out", "timed out"),
    ("timeout", "timed out"),
    ("name or service not known", "unknown host name"),
    ("nodename nor servname", "unknown host name"),
    ("name resolution", "unknown host name"),
    ("getaddrinfo failed", "unknown host name"),
    ("connection reset", "connection reset"),
    ("no route to host", "no route to host"),
    ("network is unreachable", "network unreachable"),
    ("certificate", "TLS certificate rejected"),
)


def graph_reason(raw: str, url: str | None) -> str:
    """Why the graph could not be read, in words: "the graph is not reachable at
    127.0.0.1:7687 (connection refused)". A message already meant for people (the local
    graph is not started) and one with no known cause are kept as they are: the raw text
    then says more than a guess would."""
    where = f" at {_host_port(url)}" if url and _host_port(url) else ""
    lower = raw.lower()
    if lower.startswith("the local graph"):  # the client's own words (client._not_running)
        return raw
    if "slow, not down" in lower:
        return f"the graph{where} answers, but too slowly"
    if "refused the credentials" in lower:
        return f"the graph{where} refused the credentials (check graph_user and the password)"
    for phrase, words in _CAUSES:
        if phrase in lower:
            return f"the graph is not reachable{where} ({words})"
    if not raw:
        return f"the graph{where} did not answer"
    if "not started" in lower or not where or where[4:] in raw:
        return raw
    return f"the graph is not reachable{where}: {raw}"


def _host_port(url: str) -> str:
    """host:port of a graph URL, without its scheme or credentials ("" if there is none)."""
    from urllib.parse import urlsplit

    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    return netloc.rpartition("@")[2].split(" ")[0]


def in_words(exc: GraphError) -> str:
    """A graph error said in words only, never the driver's text: the cause when it is
    known, else that the graph did not answer or refused a query."""
    raw = str(exc)
    lower = raw.lower()
    url = exc.url
    where = f" at {_host_port(url)}" if url and _host_port(url) else ""
    if "invalid configuration" in lower:
        words = f"the graph's URL or settings are not valid{where and ' (' + where[4:] + ')'}"
    elif "half-open" in lower:
        words = f"another process is checking whether the graph{where} is back"
    elif "not started" in lower or not url:
        words = raw  # our own words (the local graph is not started, a missing Cypher file)
    else:
        words = graph_reason(raw, url)
        if words == raw or words.endswith(f": {raw}"):
            words = (
                f"the graph{where} did not answer"
                if isinstance(exc, GraphUnavailable)
                else f"the graph{where} refused a query"
            )
    return words


def retry_words(exc: GraphError, template: str = "it will be retried in {} s") -> str | None:
    """When the graph will be tried again, while the breaker holds calls back."""
    retry_in = getattr(exc, "retry_in", None)
    if retry_in is None:
        return None
    return template.format(max(1, round(retry_in)))
