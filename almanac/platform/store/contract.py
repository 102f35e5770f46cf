"""The claim / finish / lease contract between the timer and the database.

The timer knows only this protocol; `store.sql_store.SqlStore` implements it for SQLite
and PostgreSQL with the same SQL. Any number of processes may call these methods
for the same tenant at the same time: the database decides who runs what.

Life of an occurrence (one planned time of a schedule or job):

    planned --claim--> running --finish(succeeded / no retry left)--> done
       ^                  |  \\--finish(retryable, attempts left)--> planned (due at backoff)
       |                  \\--lease lapsed (process died)--> planned (new attempt) or done
    queued (overlap=queue: waits for the running one; due again when it finishes or its lease ends)

Each attempt is one row in `runs`, unique on (occurrence, attempt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from almanac.platform.decisions import policies
from almanac.platform.decisions.policies import Policy
from almanac.sandbox.contract import RunResult


@dataclass(frozen=True)
class Claim:
    """One attempt of one occurrence, leased to the caller until `lease_until`."""

    tenant: str
    occurrence_id: int | None  # None for a manual run
    run_id: int
    lease_token: str
    lease_until: datetime
    attempt: int
    trigger: str
    scheduled_for: datetime
    claimed_at: datetime
    schedule_id: int | None
    job_id: int | None
    job_key: str | None
    job_depth: int | None  # None for a schedule's run (its follow-ups start a chain)
    job_root: str | None  # the chain of the job's own run; None for any other run
    script_id: int
    script_version: int
    source: str
    timeout_ms: int
    memory_mb: int
    payload: Any
    policy: Policy  # snapshot taken at claim time: decides the retry on finish

    @property
    def chain_root(self) -> str:
        """The chain its follow-ups join (`policies.chain_root`): its job's, or one this run begins."""
        return policies.chain_root(self.job_root, self.run_id)

    def event(self, now_iso: str) -> dict[str, Any]:
        """The event the script receives (SPEC section 6)."""
        return {
            "payload": self.payload,
            "scheduledFor": self.scheduled_for.isoformat().replace("+00:00", "Z"),
            "firedAt": now_iso,
            "attempt": self.attempt,
            "scheduleId": self.schedule_id,
            "jobKey": self.job_key,
            "runId": self.run_id,
        }


@dataclass
class ClaimBatch:
    claims: list[Claim]
    handled: int  # occurrences looked at (claimed, skipped, expired, queued, recovered...)
    full: bool  # True when the limit was reached: more may be due right now
    recorded: list[tuple[str, int]] = field(default_factory=list)  # (status, count) of non-run records
    # When not full, as the claim transaction ended: what is still due and not running, and the earliest
    # due_at (None: nothing planned). None when full, or when the store does not say (ask it then).
    backlog: int | None = None
    next_due_at: datetime | None = None


class Store(Protocol):
    def claim_due(self, tenant: str, now: datetime, limit: int) -> ClaimBatch:
        """Claim up to `limit` runnable occurrences due at `now`, in one transaction.

        Looks at occurrences whose `due_at <= now` (planned, queued, or running
        with a lapsed lease), highest priority first. For each it applies the
        policies: a lapsed lease fails the dead attempt and replans a retry;
        misfire expands a late schedule occurrence into runs / skipped / expired
        and plans the schedule's next occurrence; expiry, overlap and stale
        versions are recorded. A runnable one is claimed by compare-and-set
        (new attempt, new lease token, lease end = timeout + margin) and its run
        row inserted; the unique keys make a second claim impossible.

        When the batch is not full it also reports, from the same transaction,
        `backlog` and `next_due_at` (as the methods of those names would), so
        the timer needs no further transaction to know when to look again.
        """

    def finish(self, claim: Claim, result: RunResult, started: datetime, now: datetime) -> bool:
        """Record how the attempt ended (its script started at `started`), in one transaction, fenced by the lease token.

        The run's row keeps the result's `event` (what the script was given), `cpu_ms` and
        `http` (its fetches) beside its status, output, error and logs.

        Applies only if the occurrence still holds `claim.lease_token` (else
        returns False and changes nothing). On success the result's buffered
        effects (kv writes, events, job upserts) are applied in the same
        transaction, once their quotas are checked again there (a run over a
        quota is recorded `failed` with the quota's message, applies nothing and
        is not retried); a retryable failure with attempts left replans the
        occurrence at the backoff time. Occurrences queued behind this one become due.
        """

    def finish_many(self, items: Sequence[tuple[Claim, RunResult, datetime, datetime]]) -> list[bool]:
        """`finish` for several attempts of one tenant, in one transaction; True for each that applied.

        Each attempt is fenced by its own lease token exactly as in `finish`: a fenced
        one changes nothing and its effects are dropped, the others still apply. If
        the transaction fails, none is recorded.
        """

    def renew_leases(self, tenant: str, claims: Sequence[Claim], now: datetime) -> set[int]:
        """Extend the leases of claims still held (waiting for a slot or running) to `now` + timeout + margin.

        Returns the run ids of those no longer held (recorded meanwhile, or their lease
        lapsed and another process took the occurrence over); the others' leases, and
        their `due_at`, now end later. Waiting is not dying (SPEC section 11).
        """

    def finish_unrecordable(self, claim: Claim, result: RunResult, started: datetime, problem: Exception,
                            now: datetime) -> bool:
        """`finish` for an attempt whose record failed: end it `failed`, with why, and nothing else.

        Keeps only what surely stores (status, times, the error text with anything
        that is not valid Unicode replaced, a reason naming the failure), drops the
        output, logs and effects, and does not retry: the same result would fail the
        same way. Fenced by the lease token like `finish`.
        """

    def next_due_at(self, tenant: str) -> datetime | None:
        """The earliest `due_at` of the tenant (one index lookup), or None."""

    def backlog(self, tenant: str, now: datetime) -> int:
        """How many occurrences are due at `now` and not yet running."""

    def kv_read(self, tenant: str, key: str) -> Any:
        """The committed value of a kv key (None when absent): a run's reads under its buffer."""

    def chain_keys(self, tenant: str, root: str) -> set[str]:
        """Keys of the jobs of the chain started by root job `root` (its own included), at most MAX_FOLLOW_UPS + 1."""

    def kv_keys(self, tenant: str, prefix: str) -> list[str]:
        """Committed kv keys starting with `prefix`, sorted."""
