"""The scheduling core. Knows nothing of HTTP, of tenants' people, or of JavaScript.

Folders, by role; each opens with its own map. Imports point down this list, never up:

    recurrence/   rules in four forms, their English, their occurrences, business calendars (pure)
    decisions/    what to do with an occurrence, and whose run starts next (pure, take `now`)
    store/        the tables, the store's contract (`store.contract`) and its SQL: plan, claim and
                  record one tenant's runs in transactions; quotas; PostgreSQL's functions (`store/sql/`);
                  and `store/due_index/`, PostgreSQL's shared index of every tenant's due work, through
                  which one pass claims and records the runs of many tenants in a few statements
    timer/        the loop that claims, runs and records (one `Scheduler`, given one of the two claim
                  paths of `timer.claim_paths`), leases, liveness, and runs started by a request
    service/      what the API does in a request's transaction: scripts, schedules, jobs, batches, calendars

Three edges are passed in rather than reached for, so that tests replace them:

    clock.py      time (`Clock`; `ManualClock` for tests)
    runner.py     scripts (`Runner`; `almanac.worker` fills it with the sandbox pool)
    notify.py     wake-ups between processes (PostgreSQL LISTEN/NOTIFY)

A run's life through these folders is walked in docs/architecture.md.
"""
