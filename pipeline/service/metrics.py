"""The Prometheus metrics of one service, in its own registry (two services in one test
process never share a counter).

    vault_ko_requests_total{endpoint, status, mode, label}   requests answered
    vault_ko_request_duration_seconds{endpoint, mode, label} latency histogram
    vault_ko_fallback_answers_total                           degraded answers served
    vault_ko_graph_up                                         1 when the graph answered the
                                                              last probe (taken per scrape)
    vault_ko_model_loaded                                     1 once the model is in memory
    vault_ko_watcher_running                                  1 while a watcher keeps the
                                                              vault current (this service's
                                                              or a `vault-ko watch`)
    vault_ko_watcher_lag_seconds                              age of the oldest change not
                                                              applied yet (0: none waits)
    vault_ko_watcher_last_run_timestamp_seconds               when the watcher's last run
                                                              ended (0: none yet)

``mode`` and ``label`` are those of the answer (empty for endpoints that give none), so a
dashboard can tell "nothing relevant" (no_match) from "degraded" (fallback).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pipeline.model import WORDS_ASKED, Answer

#: Latency buckets, seconds: warm answers take milliseconds, a first model load seconds.
LATENCY_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServiceMetrics:
    def __init__(
        self,
        graph_up: Callable[[], bool],
        model_loaded: Callable[[], bool],
        watcher: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "vault_ko_requests",
            "Requests answered by the service.",
            ("endpoint", "status", "mode", "label"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "vault_ko_request_duration_seconds",
            "Time to answer a request.",
            ("endpoint", "mode", "label"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.fallbacks = Counter(
            "vault_ko_fallback_answers",
            "Degraded (fallback) answers served.",
            registry=self.registry,
        )
        self._graph_up = graph_up
        self.graph = Gauge(
            "vault_ko_graph_up", "1 when the graph answered the probe.", registry=self.registry
        )
        model = Gauge(
            "vault_ko_model_loaded",
            "1 once the embedding model is loaded.",
            registry=self.registry,
        )
        model.set_function(lambda: float(model_loaded()))
        self._watcher = watcher
        self.watcher_running = Gauge(
            "vault_ko_watcher_running",
            "1 while a watcher keeps the vault current.",
            registry=self.registry,
        )
        self.watcher_lag = Gauge(
            "vault_ko_watcher_lag_seconds",
            "Age of the oldest change the watcher has not applied yet (0: none waits).",
            registry=self.registry,
        )
        self.watcher_last_run = Gauge(
            "vault_ko_watcher_last_run_timestamp_seconds",
            "When the watcher's last run ended, Unix time (0: none yet).",
            registry=self.registry,
        )

    def observe(self, endpoint: str, status: int, mode: str, label: str, seconds: float) -> None:
        self.requests.labels(endpoint, str(status), mode, label).inc()
        self.latency.labels(endpoint, mode, label).observe(seconds)

    def answered(self, answers: list[Answer]) -> None:
        """Count the degraded answers among those just served (a word search the caller
        asked for is none: it is nothing to alert on)."""
        n = sum(1 for a in answers if a.mode == "fallback" and a.degraded_reason != WORDS_ASKED)
        if n:
            self.fallbacks.inc(n)

    def exposition(self) -> bytes:
        """The text exposition; the graph is probed now (one attempt, bounded)."""
        self.graph.set(1.0 if self._graph_up() else 0.0)
        if self._watcher is not None:
            w = self._watcher()
            self.watcher_running.set(1.0 if w["running"] else 0.0)
            self.watcher_lag.set(float(w["lag_s"] or 0.0))
            self.watcher_last_run.set(float(w["last_run"] or 0.0))
        return generate_latest(self.registry)
