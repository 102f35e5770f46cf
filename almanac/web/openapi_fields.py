"""What every field of the API means, with an example value, for the OpenAPI document (SPEC section 12).

`FIELDS` is keyed by the field's name, which means the same in every schema that has it;
`"Schema.field"` keys say it for one schema where the meaning differs. A description written on
the model itself (`Field(description=...)`) wins. `openapi.document` puts these on every schema
property, and builds each operation's example answer from the examples (and takes its example
request from `REQUESTS`); tests/integration/web_views/test_openapi_examples.py fails for a field
or an operation left without them, so a new one cannot ship undocumented.
"""

from __future__ import annotations

from typing import Any

AT = "2026-12-01T08:00:00Z"
SOURCE = "export default async function (event) {\n  return {ok: true, payload: event.payload};\n}\n"

# name -> (description, example); an example of None is built from the field's schema ($ref, list).
FIELDS: dict[str, tuple[str, Any]] = {
    "action": ("What was done, as `resource.verb`.", "schedule.create"),
    "actor": ("Who did it: a person's email or a token's name.", "ann@example.com"),
    "actor_kind": ("`person` (signed in to the pages) or `token` (an API token).", "person"),
    "address": ("The client's IP address, when known.", "203.0.113.7"),
    "at": ("When it happened (UTC).", AT),
    "attempt": ("Which attempt of its occurrence this run is, from 1.", 1),
    "attempt_log": ("Every attempt to deliver it, oldest first.", None),
    "attempts": ("How many delivery attempts were made.", 1),
    "author": ("Who saved this version: a person's email or `token <name>`.", "ann@example.com"),
    "body_template": ("E-mail body; `{{ data.x }}`, `{{ topic }}` and `{{ event_id }}` are filled in.",
                      "This week's total: {{ data.total }}"),
    "calendar": ("The business calendar it runs under: one the tenant stored, or a place code such as DE or "
                 "US-NY (null: none).", "DE-BY"),
    "calendar_policy": ("On a day that is not a business day: `skip` (default), `before` or `after` (the "
                        "previous or next business day, same time).", "before"),
    "country": ("The country whose public holidays count, as an ISO 3166 code (null: none).", "DE"),
    "subdivision": ("The country's region whose holidays count too, as the holiday library names it.", "BY"),
    "closed": ("The tenant's own closed days and ranges, each with a label.",
               [{"first": "2026-12-24", "last": "2026-12-31", "label": "Winter shutdown"}]),
    "weekend": ("The weekdays that are not business days.", ["saturday", "sunday"]),
    "updated_by": ("Who last changed it: a person's e-mail or a token's name.", "ann@example.com"),
    "first": ("The first closed day.", "2026-12-24"),
    "last": ("The last closed day (the same as `first` for one day).", "2026-12-31"),
    "label": ("Why it is closed, as previews show it.", "Winter shutdown"),
    "catchup_window_s": ("Occurrences missed longer ago than this many seconds are skipped, not run.", 86400),
    "changes": ("What changed, as given (never a secret's value).", {"name": "morning-report"}),
    "column": ("The column of the problem, from 1.", 14),
    "count": ("How many next occurrences to answer (1-50).", 10),
    "cpu_ms": ("The CPU time the script used, in milliseconds (null for runs recorded before it was kept).", 12),
    "created_at": ("When it was created (UTC).", "2026-11-20T09:00:00Z"),
    "depth": ("How many runs planned it in a row from its chain's root (0: planned from outside).", 0),
    "description": ("The rule in English, with its time zone.", "every weekday at 9:00 AM (Europe/Berlin)"),
    "duration_ms": ("How long the script ran, in milliseconds.", 42),
    "email": ("The person's email address.", "bo@example.com"),
    "enabled": ("False while paused: nothing runs or is delivered.", True),
    "error": ("The error the script threw (or why the platform stopped it).", "Error: the payload needs an order"),
    "error_line": ("The line of the script the error was thrown at.", 5),
    "event": ("The event the run was given, as the script saw it (null for runs recorded before it was kept).",
              {"payload": {"order": 7}, "scheduledFor": AT, "attempt": 1, "runId": 42}),
    "event_id": ("The emitted event this delivery carries.", 17),
    "events": ("The ids of the events the run emitted.", [17]),
    "event_public_id": ("The event's id as the target sees it (`X-Almanac-Event`).", "evt_01JD8X5Q9W3M"),
    "expire_after_s": ("A run that cannot start within this many seconds of its time is dropped.", 3600),
    "expires_at": ("When the invitation link stops working (UTC).", "2026-11-27T09:00:00Z"),
    "finished_at": ("When the run ended (UTC).", "2026-12-01T08:00:00.042Z"),
    "id": ("Its id within the tenant.", 42),
    "input_kind": ("How the rule was written: `rrule`, `cron`, `text` (English) or `at` (one instant).", "text"),
    "invitation_url": ("The one-time link to accept; answered once, when invited.",
                       "https://almanac.example.com/invite/5oTz3lXq"),
    "invited_by": ("Who invited the person.", "ann@example.com"),
    "items": ("This page of results.", None),
    "job_key": ("The job this run belongs to, for a job's run.", "recheck-7"),
    "key": ("The job's key, unique in the tenant.", "recheck-7"),
    "kind": ("`webhook` (an HTTPS POST, signed) or `email`.", "webhook"),
    "last_error": ("Why the last attempt failed, if it did.", "HTTP 503 from the target"),
    "last_latency_ms": ("How long the last attempt took, in milliseconds.", 120),
    "last_status_code": ("The HTTP status the target answered last.", 200),
    "last_used_at": ("When the token was last used (UTC).", AT),
    "latency_ms": ("How long the attempt took, in milliseconds.", 120),
    "limit": ("The quota.", 10000),
    "line": ("The line of the problem, from 1.", 2),
    "logs": ("What the script logged with `console.*`, one line each.", ["stored 31 rates for 2026-12-01"]),
    "max_attempts": ("How many times a failed run is tried in all (1-20).", 3),
    "memory_mb": ("The script's memory limit in MiB.", 32),
    "message": ("The first problem found, if any.", "Unexpected token ';'"),
    "min_interval_seconds": ("The shortest time between two runs a rule of this tenant may ask for.", 60),
    "misfire": ("Occurrences missed while Almanac was down: `run_once`, `run_all` or `skip`.", "run_once"),
    "name": ("Its name, unique in the tenant.", "morning-report"),
    "next": ("The next occurrences (UTC).", ["2026-12-01T08:00:00Z", "2026-12-02T08:00:00Z"]),
    "next_attempt_at": ("When the next attempt is due, while one is (UTC).", "2026-12-01T08:01:00Z"),
    "next_cursor": ("Pass as `cursor` for the next page; null on the last page.", "eyJpZCI6NDF9"),
    "next_run_at": ("When it runs next (UTC); null when paused or finished.", AT),
    "note": ("The move, in words.", "02:30 does not exist on 28 Mar 2027: runs at 03:30"),
    "number": ("Which attempt, from 1.", 1),
    "ok": ("True when the source parses and has a default export.", False),
    "outcome": ("How the attempt ended: `succeeded` or `failed`.", "succeeded"),
    "output": ("What the script's default export returned (JSON).", {"day": "2026-12-01", "count": 31}),
    "overlap": ("If the last run still runs when the next is due: `skip`, `queue` or `allow`.", "skip"),
    "pause_after_failures": ("Pause after this many failed runs in a row (null: never).", 5),
    "paused_reason": ("Why Almanac paused it, when it did.", None),
    "payload": ("JSON given to every run as `event.payload`.", {"order": 7}),
    "prefix": ("The token's first characters, to tell tokens apart.", "alm_3f9c"),
    "priority": ("Among runs due at once, higher runs first (-100 to 100).", 0),
    "quotas": ("Each quota with what is used of it.", None),
    "reason": ("Why the run ended as it did.", "the script returned"),
    "recipients": ("The e-mail addresses an `email` target sends to.", ["boss@example.com"]),
    "retry_backoff_s": ("Seconds before the first retry; doubled for each further one.", 10),
    "revoked_at": ("When the token was revoked (UTC), if it was.", None),
    "role": ("`admin`, `editor` or `viewer`.", "editor"),
    "root_key": ("The root of its chain of follow-ups: the key of the job that began it, or `run:<id>` "
                 "when a schedule's or a manual run did.", "recheck-7"),
    "rrule": ("The canonical RFC 5545 form of the rule (DTSTART with TZID, then RRULE lines).",
              "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"),
    "rule": ("When it runs: RFC 5545, cron, English (`every weekday at 9am`) or one ISO date-time.",
             "every weekday at 9am"),
    "run_at": ("When to run it: an ISO 8601 date-time with an offset or Z.", "2026-12-01T10:00:00Z"),
    "runs_at": ("When it runs instead.", "2027-03-28T03:30:00+02:00"),
    "schedule_id": ("The schedule this run belongs to, for a schedule's run.", 3),
    "scheduled": ("The wall-clock time the rule asks for (no offset: it does not exist).", "2027-03-28T02:30:00"),
    "scheduled_for": ("The time it was due (UTC).", AT),
    "script_id": ("The script it runs.", 5),
    "script_version": ("The script's version that ran.", 2),
    "secret": ("The signing secret (HMAC-SHA256 of the body); answered only when made or rotated.",
               "whsec_9c1bd0a2f4e84b7e"),
    "shifts": ("Occurrences a DST gap moves, with the time they run instead.", None),
    "slug": ("The tenant's short name.", "acme"),
    "source": ("The script's JavaScript: an ES module whose default export is called with the event.", SOURCE),
    "start": ("Wall-clock start in the rule's time zone; empty means now.", "2026-12-01T09:00:00"),
    "started_at": ("When the script started (UTC).", AT),
    "state": ("`pending` until it has run, then `done`; `cancelled` when cancelled.", "pending"),
    "status": ("Where it stands.", "succeeded"),
    "status_code": ("The HTTP status the target answered, if it answered.", 200),
    "subject_template": ("E-mail subject, filled in as the body is.", "Weekly totals"),
    "target": ("What it was done to.", "schedule 3"),
    "target_id": ("The target it goes to.", 2),
    "timeout_ms": ("The script's time limit in milliseconds.", 5000),
    "timezone": ("The IANA time zone the rule's times are in.", "Europe/Berlin"),
    "token": ("The token itself: answered once, when made; send it as `Authorization: Bearer`.",
              "alm_3f9c0b7d1e2a4c5b8d9e0f1a2b3c4d5e"),
    "topics": ("The event topics it receives (`report.*` matches every `report.` topic).", ["report.weekly"]),
    "trigger": ("What started the run: `schedule` (its rule), `trigger` (run now), `manual` (a script run "
                "with a payload), `trial` (a page's try with a payload: nothing it changed was applied) or `job`.",
                "schedule"),
    "updated_at": ("When it last changed (UTC).", "2026-11-21T10:30:00Z"),
    "url": ("The HTTPS address a `webhook` target posts to.", "https://hooks.example.com/almanac"),
    "used": ("How much of it is used.", 12),
    "used_bytes": ("Bytes used, for a quota counted in bytes.", 2048),
    "user_id": ("The person's id.", 9),
    "value": ("The JSON value.", {"day": "2026-12-01", "rates": {"USD": 1.05}}),
    "version": ("The version number, from 1; each saved change of source is a new one.", 2),
}

OVERRIDES: dict[str, tuple[str, Any]] = {
    "DeliveryOut.status": ("`pending`, `delivering`, `succeeded`, `failed` (tried again later) or `dead` (given up).",
                           "succeeded"),
    "InvitationOut.status": ("`pending`, `accepted`, `revoked` or `expired`.", "pending"),
    "RunOut.status": ("`pending`, `running`, `succeeded`, `failed`, `timed_out`, `memory_exceeded`, `skipped`, "
                      "`expired` or `cancelled`.", "succeeded"),
    "KvOut.key": ("The key.", "rates:EUR:latest"),
    "ErrorEnvelope.error": ("The error: a stable `code`, a `message` for people, sometimes `details`.", None),
    "TargetIn.name": ("Its name, unique in the tenant.", "reports-hook"),
    "TargetOut.name": ("Its name, unique in the tenant.", "reports-hook"),
    "TargetPatch.name": ("Its name, unique in the tenant.", "reports-hook"),
    "TokenIn.name": ("A name to tell the token by.", "deploy-bot"),
    "TokenOut.name": ("A name to tell the token by.", "deploy-bot"),
    "TenantOut.name": ("The tenant's display name.", "Acme Ltd"),
    "TenantOut.role": ("The role of the token (or person) asking.", "admin"),
    "ScriptIn.name": ("Its name, unique in the tenant.", "exchange-rates"),
    "ScriptOut.name": ("Its name, unique in the tenant.", "exchange-rates"),
    "ScriptPatch.name": ("Its name, unique in the tenant.", "exchange-rates"),
    "ScriptCheckOut.line": ("The line of the problem, from 1.", 2),
    "PreviewOut.description": ("The rule in English, with its time zone.", "every weekday at 9:00 AM (Europe/Berlin)"),
    "AttemptOut.error": ("Why the attempt failed, if it did.", None),
    "JobIn.payload": ("JSON given to the run as `event.payload`.", {"order": 7}),
    "JobOut.payload": ("JSON given to the run as `event.payload`.", {"order": 7}),
    "RunNowIn.payload": ("JSON given to the run as `event.payload`.", {"name": "Ann"}),
}

_SCHEDULE = {"name": "morning-report", "script_id": 5, "rule": "every weekday at 9am", "timezone": "Europe/Berlin",
             "payload": {"to": "boss@example.com"}}
# (method, path) -> the example request body.
REQUESTS: dict[tuple[str, str], Any] = {
    ("post", "/api/v1/members"): {"email": "bo@example.com", "role": "editor"},
    ("patch", "/api/v1/members/{user_id}"): {"role": "viewer"},
    ("put", "/api/v1/jobs/{key}"): {"script_id": 5, "run_at": "2026-12-01T10:00:00Z", "payload": {"order": 7}},
    ("put", "/api/v1/kv/{key}"): {"value": {"day": "2026-12-01", "rates": {"USD": 1.05}}},
    ("post", "/api/v1/recurrence/preview"): {"rule": "every weekday at 9am", "timezone": "Europe/Berlin",
                                             "count": 5},
    ("post", "/api/v1/schedules"): _SCHEDULE,
    ("patch", "/api/v1/schedules/{schedule_id}"): {"rule": "every weekday at 8:30am", "enabled": True},
    ("post", "/api/v1/scripts"): {"name": "exchange-rates", "source": SOURCE, "timeout_ms": 5000, "memory_mb": 32},
    ("post", "/api/v1/scripts/check"): {"source": "export default function (event) {\n  return 1 +;\n}\n"},
    ("put", "/api/v1/scripts/{script_id}"): {"source": SOURCE},
    ("post", "/api/v1/scripts/{script_id}/run"): {"payload": {"name": "Ann"}},
    # An e-mail target: a webhook's URL must resolve when it is made, and an example's host does not.
    ("post", "/api/v1/targets"): {"kind": "email", "name": "weekly-mail", "topics": ["report.weekly"],
                                  "recipients": ["boss@example.com"], "subject_template": "Weekly totals"},
    ("patch", "/api/v1/targets/{target_id}"): {"topics": ["report.*"], "enabled": True},
    ("post", "/api/v1/tokens"): {"name": "deploy-bot", "role": "editor"},
    ("put", "/api/v1/egress"): {"hosts": ["api.example.com", "*.example.org", "rates.example.net:8443"]},
    ("put", "/api/v1/secrets/{name}"): {"value": "sk_live_51Hx"},
    ("put", "/api/v1/calendars/{name}"): {"country": "DE", "subdivision": "BY", "weekend": ["saturday", "sunday"],
                                         "closed": [{"first": "2026-12-24", "last": "2026-12-31",
                                                     "label": "Winter shutdown"}]},
    ("post", "/api/v1/jobs/batch"): {"jobs": [{"key": "remind-order-7", "script_id": 5,
                                               "run_at": "2026-12-01T10:00:00Z", "payload": {"order": 7}}]},
    ("post", "/api/v1/schedules/batch"): {"schedules": [_SCHEDULE]},
}

# Answers that are not JSON built from a schema: path -> (media type, example).
PLAIN_ANSWERS: dict[str, tuple[str, Any]] = {
    "/healthz": ("application/json", {"status": "ok"}),
    "/readyz": ("application/json", {"status": "ready"}),
    "/metrics": ("text/plain", "# HELP almanac_runs_total Runs by status\n# TYPE almanac_runs_total counter\n"
                               'almanac_runs_total{status="succeeded"} 1042.0\n'),
}


def field_text(schema_name: str, field: str) -> tuple[str, Any] | None:
    return OVERRIDES.get(f"{schema_name}.{field}") or FIELDS.get(field)
