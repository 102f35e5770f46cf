"""Pure decisions: no database, no threads, no clock of their own; each takes what it decides on and `now`.

    policies.py   an occurrence's fate: misfire, overlap, expiry, retry and backoff, lease length
    slots.py      run slots shared fairly between tenants: the run limit, each tenant's room, the fair queue
    pacing.py     how much a process claims ahead and when it looks again at the due index
"""
