"""Misfire, overlap, expiry, retry, lease and follow-up decisions.

Every function here is pure: it takes the state it decides on and `now`, and
returns a decision. The store applies decisions inside its transactions; the
timer never decides anything itself. Tests drive these with a ManualClock.

The numbers, in one place:

- MISFIRE_GRACE_S = 60: an occurrence more than a minute late is missed even if
  its schedule's next occurrence is not due yet; one whose next occurrence fell
  due before it could start is missed sooner (a 2-second schedule after a 10 s
  outage has missed five); `misfire` applies to missed ones.
- LEASE_MARGIN_S = 30: a claimed run holds its lease for the script's timeout
  plus this margin; only after that may another process declare it dead.
- MAX_FOLLOW_UPS = 100: a chain of jobs made by `almanac.schedule.at` from one
  root holds at most 100 jobs in all (SPEC section 8): every job descended from
  it counts, not the depth. The root is the run that began it: a job's run
  extends its job's chain (the root job counts), any other run (a schedule's
  occurrence, a manual run) begins a chain of its own, named by `chain_root`.
  A run refused for this, or any other platform limit, is not retried.
- MAX_AHEAD = 366 days: a follow-up may not be planned further ahead.
- MAX_SCHEDULE_AT_PER_RUN = 50: upserts one run may make.
- MAX_MISSED_RECORDED = 100: skipped/expired history rows written for one
  misfire; the rest are counted in a log line, not stored one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from almanac.sandbox.capabilities import RUN_CHAIN_PREFIX

MISFIRE_GRACE_S = 60
LEASE_MARGIN_S = 30.0
MAX_FOLLOW_UPS = 100
MAX_AHEAD = timedelta(days=366)
MAX_SCHEDULE_AT_PER_RUN = 50
MAX_MISSED_RECORDED = 100
MAX_BACKOFF_S = 24 * 3600

MISFIRE_CHOICES = ("run_once", "run_all", "skip")
OVERLAP_CHOICES = ("skip", "queue", "allow")


@dataclass(frozen=True)
class Policy:
    """The timing policy of one schedule or job (SPEC sections 7 and 8)."""

    misfire: str = "run_once"
    catchup_window_s: int = 86400
    overlap: str = "skip"
    expire_after_s: int | None = None
    max_attempts: int = 3
    retry_backoff_s: int = 10

    def __post_init__(self) -> None:
        if self.misfire not in MISFIRE_CHOICES:
            raise ValueError(f"misfire must be one of {MISFIRE_CHOICES}")
        if self.overlap not in OVERLAP_CHOICES:
            raise ValueError(f"overlap must be one of {OVERLAP_CHOICES}")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")


@dataclass(frozen=True)
class MisfirePlan:
    """What to do with the times of a schedule that are due at `now`, oldest first."""

    run: list[datetime] = field(default_factory=list)
    skipped: list[datetime] = field(default_factory=list)  # coalesced or skipped misfires
    expired: list[datetime] = field(default_factory=list)  # older than catchup_window_s


def plan_misfire(policy: Policy, due_times: list[datetime], now: datetime) -> MisfirePlan:
    """Split a schedule's due times (all <= now, ascending) into run / skipped / expired.

    A time is *missed* (SPEC section 7) when it could not start before the
    schedule's next occurrence fell due, or when it is more than
    MISFIRE_GRACE_S late, whichever comes first. Every due time but the last
    has its successor in the list (due too), so all of them are missed; the
    last is missed only if it is more than the grace late. Missed times older
    than the catch-up window expire. Among the other missed ones: `run_once`
    runs one catch-up run carrying the latest missed time (the others are
    recorded skipped: coalesced), `run_all` runs each in order, `skip` runs
    none. A time that is not missed runs whatever the policy.
    """
    if not due_times:
        return MisfirePlan()
    window = timedelta(seconds=policy.catchup_window_s)
    last = due_times[-1]
    on_time = [] if now - last > timedelta(seconds=MISFIRE_GRACE_S) else [last]
    missed = due_times[:-1] if on_time else list(due_times)
    expired = [t for t in missed if now - t > window]
    missed = [t for t in missed if now - t <= window]
    if policy.misfire == "run_all":
        return MisfirePlan(run=missed + on_time, expired=expired)
    if policy.misfire == "run_once":
        return MisfirePlan(run=missed[-1:] + on_time, skipped=missed[:-1], expired=expired)
    return MisfirePlan(run=on_time, skipped=missed, expired=expired)


def is_expired(policy: Policy, scheduled_for: datetime, now: datetime, attempt: int) -> bool:
    """`expire_after_s`: a first attempt not started this long after its time is not run.

    Retries are exempt: their lateness is the platform's own backoff.
    """
    if policy.expire_after_s is None or attempt > 1:
        return False
    return (now - scheduled_for).total_seconds() > policy.expire_after_s


def decide_overlap(policy: Policy, busy: bool, *, catch_up: bool = False) -> str:
    """'run', 'skip' or 'queue' for an occurrence of a schedule whose previous run may still run.

    Catch-up occurrences of `misfire=run_all` wait for each other ("each, in
    order") whatever the overlap setting, except `allow`.
    """
    if not busy or policy.overlap == "allow":
        return "run"
    if policy.overlap == "queue" or catch_up:
        return "queue"
    return "skip"


def retry_at(policy: Policy, status: str, attempt: int, now: datetime) -> datetime | None:
    """When to try again after an attempt ended with `status`, or None for no retry.

    The backoff doubles: retry_backoff_s after attempt 1, twice that after 2...
    capped at a day so a large max_attempts cannot overflow.
    """
    if status not in ("failed", "timed_out", "memory_exceeded") or attempt >= policy.max_attempts:
        return None
    delay = min(policy.retry_backoff_s * (2 ** (attempt - 1)), MAX_BACKOFF_S)
    return now + timedelta(seconds=delay)


def lease_until(now: datetime, timeout_ms: int, margin_s: float = LEASE_MARGIN_S) -> datetime:
    """End of a claim's lease: the script's own timeout plus a margin for the platform."""
    return now + timedelta(milliseconds=timeout_ms) + timedelta(seconds=margin_s)


def renewal_due(held_until: datetime, now: datetime, timeout_ms: int, margin_s: float, every: timedelta) -> bool:
    """Whether a held lease is renewed at this round of renewals (rounds are `every` apart).

    Not when renewing it now would move its end by less than one round: it was claimed or
    renewed less than a round ago, and the next round renews it with at least the script's
    timeout plus one round left (renewing at every round left a round more). Under a burst
    most claims are recorded within a round of their claim: renewing them was a statement per
    tenant per round, most of it spent waiting on rows that claim passes and the recorder held.
    """
    return held_until <= lease_until(now, timeout_ms, margin_s) - every


def chain_root(job_root: str | None, run_id: int) -> str:
    """The root key of the chain that a run's follow-ups join: its job's chain, or, for a run that is
    not a job's (a schedule's occurrence, a manual run), a chain the run itself begins."""
    return job_root if job_root is not None else f"{RUN_CHAIN_PREFIX}{run_id}"


def run_of_chain(root_key: str) -> int | None:
    """The run that began the chain `root_key`, or None for a chain that a job began."""
    number = root_key[len(RUN_CHAIN_PREFIX):] if root_key.startswith(RUN_CHAIN_PREFIX) else ""
    return int(number) if number.isdigit() else None


def chain_problem(chain_size: int) -> str | None:
    """Why a chain may not hold `chain_size` jobs, or None."""
    if chain_size > MAX_FOLLOW_UPS:
        return f"a chain of jobs from one root may hold at most {MAX_FOLLOW_UPS} jobs in all"
    return None


def follow_up_problem(chain_size: int, run_at: datetime, now: datetime, made_in_run: int) -> str | None:
    """Why a script's `schedule.at` must be refused, or None if it may be planned.

    `chain_size` is how many jobs the follow-up's chain would hold with it (every
    job of the chain's root; a chain begun by this run holds only its follow-ups).
    """
    if made_in_run >= MAX_SCHEDULE_AT_PER_RUN:
        return f"a run may plan at most {MAX_SCHEDULE_AT_PER_RUN} jobs"
    problem = chain_problem(chain_size)
    if problem:
        return problem
    if run_at - now > MAX_AHEAD:
        return f"a job may be planned at most {MAX_AHEAD.days} days ahead"
    return None


# A dead process's running attempts are made due this long before the moment they are reaped
# (`timer.liveness`): they were started once already, so they come first in the pick's ranking,
# ahead of work still waiting (`store.due_index.claim.TAKEN_OVER_BEFORE`). Misfire and expiry go
# by `scheduled_for`, so this moves only the order.
REAPED_AHEAD = timedelta(days=1)
