"""A run's reach beyond its tenant's data: `fetch` through the tenant's egress allowlist, the
tenant's secrets, and the redaction of their values from everything the run leaves behind.

Composition, like `worker.py`: the platform knows nothing of HTTP or encryption, so the worker's
`SandboxRunner` asks `Outbound.for_run` for a `RunOutbound` per run and routes the sandbox's
`fetch` and `secrets.get` calls to it; once the run ends, `finish` puts its fetch records on
its result (`RunResult.http`) and redacts the result and those records (SPEC section 6: a
secret's value never appears in a stored output, log, error or http record), and the payloads of
the jobs the run planned and the events it emitted (what viewers read, and webhooks send). kv
values are not redacted: kv is the tenant's own data, written on purpose, and a secret kept there
is data like any other (see the user guide). Fetch errors are redacted as they are made, before
they are cut to length (`egress.fetch.Fetcher.redact`).

Redaction uses the tenant's secrets as of this run: read fresh when the run called
`secrets.get`, else from a per-process copy at most `SECRETS_TTL_S` old (a run that never read
a secret can hold a value only if its author wrote it into the script or the data).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from almanac.db import Database
from almanac.egress import fetch as egress_fetch
from almanac.egress import store as egress_store
from almanac.egress.metrics import get_fetch_metrics
from almanac.sandbox.contract import Effects, RunResult
from almanac.settings import Settings
from almanac.vault import keyring, store as vault_store
from almanac.vault.redact import Redactor

SECRETS_TTL_S = 10.0
# Where the sandbox cuts what a script hands over, before the host sees it: its last log line before
# this marker (at `Limits.log_bytes`), and an error's message at this many characters (bootstrap.js).
TRUNCATED_LINE = "[truncated]"
ERROR_MESSAGE_CUT = 65536
DEADLINE_SLACK_S = 2.0  # the sandbox pool's own grace past a run's deadline


class Outbound:
    """One per process: the database, the key, and a short-lived copy of each tenant's secrets."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db, self.settings = db, settings
        self._secrets: dict[str, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()
        self.metrics = get_fetch_metrics()

    def for_run(self, tenant: str, timeout_ms: int) -> RunOutbound:
        """Called where the run is handed over (the scheduler's thread), so its end needs no database."""
        return RunOutbound(self, tenant, timeout_ms / 1000, self.secrets(tenant, fresh=False))

    def secrets(self, tenant: str, fresh: bool) -> dict[str, str]:
        with self._lock:
            cached = self._secrets.get(tenant)
        if cached is not None and not fresh and time.monotonic() - cached[0] < SECRETS_TTL_S:
            return cached[1]
        with self.db.tenant_session(tenant) as session:
            values = vault_store.values(session, keyring.for_settings(self.settings))
        with self._lock:
            self._secrets[tenant] = (time.monotonic(), values)
        return values

    def forget(self, tenant: str) -> None:
        """A secret of the tenant changed in this process: the next redaction reads them again."""
        with self._lock:
            self._secrets.pop(tenant, None)


class RunOutbound:
    """One run's fetches (count, records, deadline) and secrets; used from one thread at a time.

    Made when the run is handed over, which may be long before its script starts (it waits for a
    sandbox process): its deadline counts from the script's start, which the sandbox passes with
    each call, never from the hand-over.
    """

    def __init__(self, outbound: Outbound, tenant: str, timeout_s: float, known: dict[str, str]) -> None:
        self.outbound, self.tenant, self.timeout_s, self._known = outbound, tenant, timeout_s, known
        self._fetcher: egress_fetch.Fetcher | None = None
        self._secrets: dict[str, str] | None = None

    def secrets_get(self, name: str) -> str | None:
        if self._secrets is None:
            self._secrets = self.outbound.secrets(self.tenant, fresh=True)
        return self._secrets.get(name)

    def fetch(self, url: Any, method: Any, headers: Any, body: Any, deadline: float) -> dict[str, Any]:
        """The sandbox's `fetch`; raises `egress.fetch.FetchError` for the script to see.

        `deadline` is the sandbox's (time.monotonic()): when the run ends, counted from its script's
        start (its own clock, so that a fetch cut by it ends the run `timed_out`). It is held to at
        most the timeout (and the pool's grace) from now, since the script started before this call.
        """
        deadline = min(deadline, time.monotonic() + self.timeout_s + DEADLINE_SLACK_S)
        if self._fetcher is None:
            with self.outbound.db.tenant_session(self.tenant) as session:
                entries = egress_store.entries(session)
            metrics = self.outbound.metrics
            self._fetcher = egress_fetch.Fetcher(entries, deadline,
                                                 allow_private=self.outbound.settings.allow_private_targets,
                                                 observe=metrics.observe, redact=self.redact)
        self._fetcher.deadline = deadline  # counted from when the script started (the sandbox's clock)
        started = time.monotonic()
        try:
            return self._fetcher.call(url, method, headers, body)
        finally:
            self.outbound.metrics.duration.observe(time.monotonic() - started)

    @property
    def records(self) -> list[dict[str, Any]]:
        return [] if self._fetcher is None else self._fetcher.records

    def redactor(self) -> Redactor:
        return Redactor({**self._known, **(self._secrets or {})})

    def redact(self, text: str) -> str:
        """`text` with the secrets this run knows of replaced (those it read, and the tenant's as cached)."""
        return self.redactor().text(text)

    def finish(self, result: RunResult) -> RunResult:
        """The run's result with its fetch records (`http`), and secret values redacted from its
        output, error, logs, those records, and the jobs and events it leaves to apply."""
        redactor = self.redactor()
        http = tuple(redactor.value(self.records))
        if not redactor:
            return replace(result, http=http) if http else result
        return replace(result, http=http, output=redactor.value(result.output),
                       error=None if result.error is None else redacted_error(redactor, result.error),
                       logs=redacted_logs(redactor, result.logs),
                       effects=redacted_effects(redactor, result.effects))


def redacted_logs(redactor: Redactor, logs: tuple[str, ...]) -> tuple[str, ...]:
    """Log lines redacted; the line the sandbox cut at its log cap (the one before its `[truncated]`
    line) may end in part of a value, which is replaced too."""
    cut = len(logs) - 2 if logs and logs[-1] == TRUNCATED_LINE else -1
    return tuple(redactor.cut_text(line) if i == cut else redactor.text(line) for i, line in enumerate(logs))


def redacted_error(redactor: Redactor, error: str) -> str:
    """The error redacted; one as long as the sandbox's cut of a message may end in part of a value."""
    return redactor.cut_text(error) if len(error) >= ERROR_MESSAGE_CUT else redactor.text(error)


def redacted_effects(redactor: Redactor, effects: Effects) -> Effects:
    """Planned jobs' payloads and emitted events (topic and data) redacted; kv as written.

    A job's key is not: it names the job (a later `schedule.at` with it replaces the job), and a
    key changed here would plan a job the script never named."""
    if not effects.events and not effects.jobs:
        return effects
    return Effects(kv=effects.kv,
                   events=tuple((redactor.text(topic), redactor.json_text(data)) for topic, data in effects.events),
                   jobs={key: (run_at, redactor.json_text(payload)) for key, (run_at, payload) in effects.jobs.items()})
