"""The timer: claim what is due, run it, record it, sleep until the next due time.

    scheduler.py      `Scheduler`: run slots, the fair queue, starting runs, lease renewal, the claim loop
    claim_paths.py    the claim contract (`ClaimPath`) and its two implementations: per tenant
                      (SQLite, or PostgreSQL without the due index) and across tenants (the due index)
    recorder.py       finished runs recorded many per transaction
    tenant_leases.py  which process runs which tenant's timer (the per-tenant path)
    liveness.py       which processes are alive; a dead one's runs made due again at once
    admission.py      runs a request starts (run now, run again, trials) into the timer's fair queue
    trial.py          a trial run: recorded, its writes only shown
    metrics.py        Prometheus metrics of the scheduler

Nothing here decides policy (`decisions`) or holds schedules (the store): the database is
the truth, and any number of processes may run a timer for the same tenants.
"""
