"""Event delivery: events that runs emitted, sent to the tenant's webhooks and e-mail targets.

The scheduler writes `events` in the transaction that records a run as succeeded. From there:
`fanout` turns each new event into one `deliveries` row per matching enabled target, `dispatcher`
claims due deliveries with a lease and hands them to `webhook` or `email`, records each attempt,
and plans the next try with backoff or declares the delivery dead. `netguard` keeps tenants off
the platform's own network, `signing` signs webhook requests. This package imports only
almanac.db, errors, settings and platform.models.
"""
