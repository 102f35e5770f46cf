"""What the API does, inside the caller's transaction (one per request); nothing here commits.

    resources.py       scripts, schedules, jobs, runs and kv as the API uses them
    batch_writes.py    batches of up to 1,000 schedules or jobs: all or none
    job_create.py      PostgreSQL: a new job in one statement (the delay queue's common PUT)
    calendar_store.py  a tenant's business calendars, stored by name or built in by place

Every query runs in the caller's tenant schema; errors are `almanac.errors` classes.
"""
