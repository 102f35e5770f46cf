"""Summary and description for every operation of the OpenAPI document (SPEC section 12: /docs).

A handler's own docstring wins; this table speaks for handlers that have none, so the routers
stay untouched. `tests/integration/web_views/test_script_authoring.py` fails for an operation
that has neither, so a new route cannot ship undocumented.
"""

from __future__ import annotations

from typing import Any


# (method, path) -> (summary, description)
TEXT: dict[tuple[str, str], tuple[str, str]] = {
    ("get", "/healthz"): ("Liveness", "Answers 200 while the process is alive; touches nothing else."),
    ("get", "/readyz"): ("Readiness", "Answers 200 when the database is reachable, 503 otherwise."),
    ("get", "/metrics"): ("Prometheus metrics", "Runs by status, run duration, start lag, due backlog, "
                          "deliveries by status and sandbox workers, in Prometheus text format."),
    ("get", "/api/v1/deliveries"): ("List deliveries", "Deliveries of the tenant's events to its targets, "
                                    "newest first, with their status and attempts (admin)."),
    ("get", "/api/v1/deliveries/{delivery_id}"): ("Get a delivery", "One delivery with its attempts (admin)."),
    ("post", "/api/v1/deliveries/{delivery_id}/retry"): ("Retry a delivery", "Queues a failed or given-up "
                                                         "delivery to be sent again now (admin)."),
    ("get", "/api/v1/events/{event_id}/deliveries"): ("Deliveries of an event", "Every delivery of one "
                                                      "emitted event, one per target that subscribes (admin)."),
    ("get", "/api/v1/targets/{target_id}/deliveries"): ("Deliveries to a target", "The deliveries sent, or "
                                                        "to be sent, to one target, newest first (admin)."),
    ("put", "/api/v1/jobs/{key}"): ("Create or replace a one-off job", "Upserts the pending job with this key: "
                                    "a new time or payload replaces the old. `run_at` carries an offset or Z."),
    ("post", "/api/v1/jobs/batch"): ("Create or replace up to 1,000 jobs", "Upserts every job of the list in one "
                                     "transaction, each as PUT /api/v1/jobs/{key} would, and answers each one's "
                                     "outcome (`created`, `replaced`, `unchanged`). All or none: a bad item (an "
                                     "unknown script, a key given twice, a bad field) refuses the batch with "
                                     "422, naming each bad item by its index; the pending-jobs quota counts the "
                                     "whole batch (429)."),
    ("get", "/api/v1/jobs/{key}"): ("Get a job", "A one-off job by its key, with its state."),
    ("delete", "/api/v1/jobs/{key}"): ("Cancel a job", "Cancels the pending job with this key."),
    ("get", "/api/v1/egress"): ("Get the egress allowlist", "The hosts the tenant's scripts may reach with "
                                "`fetch` (admin); empty by default, which reaches nothing."),
    ("put", "/api/v1/egress"): ("Replace the egress allowlist", "Host names, `*.domain` wildcards and IP "
                                "addresses with optional `:port` (admin). Every address is still checked by the "
                                "outbound guard: private, loopback and metadata addresses stay refused."),
    ("get", "/api/v1/calendars"): ("List business calendars", "The tenant's stored calendars by name (any "
                                   "member); built-in place calendars such as DE or US-NY are not listed."),
    ("get", "/api/v1/calendars/{name}"): ("Get a business calendar", "A stored calendar, or, for a name the "
                                         "tenant has not stored that is a place code the holiday library "
                                         "knows (DE, DE-BY, US-NY), that place's public holidays with a "
                                         "Saturday-Sunday weekend, marked `builtin`."),
    ("put", "/api/v1/calendars/{name}"): ("Set a business calendar", "Creates (201) or replaces (200) a "
                                         "calendar (admin): country and subdivision, closed days and ranges "
                                         "with labels, weekend days. Schedules naming it are replanned at "
                                         "once; 422 never_fires when one of them would never fire under it."),
    ("delete", "/api/v1/calendars/{name}"): ("Delete a business calendar", "Deletes a stored calendar (admin); "
                                            "409 while a schedule names it."),
    ("get", "/api/v1/secrets"): ("List secrets", "Names and `updated_at` of the tenant's secrets (admin); "
                                 "values are never shown."),
    ("put", "/api/v1/secrets/{name}"): ("Set a secret", "Creates (201) or replaces (200) a secret; the value is "
                                        "encrypted at rest and readable only by the tenant's scripts (admin)."),
    ("delete", "/api/v1/secrets/{name}"): ("Delete a secret", "Scripts then read null for it (admin)."),
    ("get", "/api/v1/kv"): ("List keys", "The tenant's keys that start with `prefix`, in pages of at most "
                            "1,000 with `next_cursor`: the same data that scripts see."),
    ("get", "/api/v1/kv/{key}"): ("Get a value", "The JSON value stored under a key."),
    ("put", "/api/v1/kv/{key}"): ("Set a value", "Stores a JSON value (at most 64 KiB) under a key; "
                                  "the tenant's kv quota applies (429 quota_exceeded)."),
    ("delete", "/api/v1/kv/{key}"): ("Delete a value", "Removes a key and its value."),
    ("get", "/api/v1/members"): ("List members", "The tenant's people and their roles (admin)."),
    ("post", "/api/v1/members"): ("Invite a member", "Answers 201 with a one-time invitation_url, valid "
                                  "7 days and shown once; the same answer whether the email has an account."),
    ("patch", "/api/v1/members/{user_id}"): ("Change a member's role", "Sets the member's role (admin)."),
    ("delete", "/api/v1/members/{user_id}"): ("Remove a member", "Takes the person out of this tenant (admin)."),
    ("post", "/api/v1/recurrence/preview"): ("Preview a rule", "Parses a rule (RFC 5545, cron, English or an "
                                             "instant) and answers its canonical form, an English description "
                                             "and the next occurrences; 422 invalid_rule, never_fires or "
                                             "too_frequent otherwise."),
    ("get", "/api/v1/runs"): ("List runs", "Runs newest first, filtered by schedule, job key, status or time, "
                              "in pages with `next_cursor`."),
    ("get", "/api/v1/runs/{run_id}"): ("Get a run", "One run: what the script was given, output, logs, error "
                                       "at its line, duration and why it ended."),
    ("get", "/api/v1/schedules"): ("List schedules", "The tenant's schedules with their next run."),
    ("post", "/api/v1/schedules"): ("Create a schedule", "Answers 201 with the schedule, its canonical rrule, "
                                    "description and next_run_at; rule errors are those of the preview."),
    ("post", "/api/v1/schedules/batch"): ("Create up to 1,000 schedules", "Creates every schedule of the list in "
                                          "one transaction, each as POST /api/v1/schedules would, and answers 201 "
                                          "with them in order. All or none: a bad item (its rule, its script, a "
                                          "bad field) refuses the batch with 422, naming each bad item by its "
                                          "index; the schedules quota counts the whole batch (429)."),
    ("get", "/api/v1/schedules/{schedule_id}"): ("Get a schedule", "One schedule with its rule and policies."),
    ("patch", "/api/v1/schedules/{schedule_id}"): ("Change a schedule", "Changes the given fields; a new rule "
                                                   "replaces the planned occurrences."),
    ("delete", "/api/v1/schedules/{schedule_id}"): ("Delete a schedule", "Deletes it and its planned "
                                                    "occurrences; past runs stay in the history."),
    ("post", "/api/v1/schedules/{schedule_id}/pause"): ("Pause a schedule", "No occurrence runs until resumed."),
    ("post", "/api/v1/schedules/{schedule_id}/resume"): ("Resume a schedule", "Plans the next occurrence again."),
    ("post", "/api/v1/schedules/{schedule_id}/trigger"): ("Run a schedule now", "Queues one run now, besides "
                                                          "its planned occurrences; 409 `conflict` while the "
                                                          "schedule is paused (resume it first)."),
    ("get", "/api/v1/schedules/{schedule_id}/next"): ("Next occurrences", "The next `count` times it will run."),
    ("get", "/api/v1/scripts"): ("List scripts", "Every script with its current version and limits."),
    ("post", "/api/v1/scripts"): ("Create a script", "Answers 201 with id and version 1; a syntax error, or "
                                  "no default export, is 422 script_syntax_error with line and column (admin)."),
    ("get", "/api/v1/scripts/{script_id}"): ("Get a script", "The script with its current source."),
    ("delete", "/api/v1/scripts/{script_id}"): ("Delete a script", "409 conflict while schedules or pending "
                                                "jobs use it (admin)."),
    ("get", "/api/v1/scripts/{script_id}/versions/{version}"): ("Get one version", "A version's source, who "
                                                                "saved it and when."),
    ("get", "/api/v1/targets"): ("List targets", "Webhook and e-mail targets with their topics (admin)."),
    ("post", "/api/v1/targets"): ("Create a target", "A webhook (HMAC-SHA256 signed) or e-mail target for "
                                  "the topics given (admin)."),
    ("get", "/api/v1/targets/{target_id}"): ("Get a target", "One target (admin)."),
    ("patch", "/api/v1/targets/{target_id}"): ("Change a target", "Changes the given fields (admin)."),
    ("delete", "/api/v1/targets/{target_id}"): ("Delete a target", "Stops deliveries to it (admin)."),
    ("post", "/api/v1/targets/{target_id}/rotate-secret"): ("Rotate a webhook secret", "A new signing secret, "
                                                            "shown once (admin)."),
    ("get", "/api/v1/tenant"): ("This tenant", "The tenant of the token: slug, name, role, quotas and use."),
    ("get", "/api/v1/tokens"): ("List tokens", "API tokens with their role and last use; never the token (admin)."),
    ("post", "/api/v1/tokens"): ("Create a token", "Answers 201 with the token, shown this once (admin)."),
    ("delete", "/api/v1/tokens/{token_id}"): ("Revoke a token", "The token stops working at once (admin)."),
    ("get", "/api/v1/audit"): ("The audit log", "Every change with who made it, when, from which address and what "
                               "changed (never a secret's value), newest first; filter by `since` and `actor`, page "
                               "with `cursor` (admin)."),
    ("get", "/api/v1/invitations"): ("List invitations", "Pending, accepted, revoked and expired invitations, "
                                     "without their links (admin)."),
    ("delete", "/api/v1/invitations/{invitation_id}"): ("Revoke an invitation", "Its link stops working at once "
                                                        "(admin)."),
}


DESCRIPTION = ("Almanac runs tenants' JavaScript on schedule. Authenticate with `Authorization: Bearer <token>`; "
               'every error has the body `{"error": {"code", "message"}}`.')


def annotate(schema: dict[str, Any]) -> None:
    """Fill in a summary and description for every operation of the document (`openapi.document` calls this)."""
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            summary, description = TEXT.get((method, path), (None, None))
            if summary:  # FastAPI's own is the handler's name ("Create Script"): ours reads better
                operation["summary"] = summary
            if description and not operation.get("description"):
                operation["description"] = description
