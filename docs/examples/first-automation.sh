#!/usr/bin/env bash
# Your first automation through the API, with curl. Needs ALMANAC (the server's address) and
# TOKEN (an editor's or admin's API token: `almanac token create --tenant demo --name me --role admin`).
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")

# 1. A script: the default export runs once per occurrence and gets the event.
script_id=$(curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts" -d '{
  "name": "greeter",
  "source": "export default async function (event) {\n  const n = ((await almanac.kv.get(\"greetings\")) ?? 0) + 1;\n  await almanac.kv.set(\"greetings\", n);\n  console.log(\"hello\", event.payload);\n  return {greetings: n};\n}"
}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
echo "script $script_id"

# 2. Try a rule before using it: the description and the next dates.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/recurrence/preview" \
  -d '{"rule": "every weekday at 9am", "timezone": "Europe/Berlin", "count": 3}'
echo

# 3. Run the script now, once, and see what it returned.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts/$script_id/run" -d '{"payload": {"name": "Ada"}}'
echo

# 4. A schedule: the script every weekday at 9:00 in Berlin.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/schedules" -d "{
  \"name\": \"morning greeting\", \"script_id\": $script_id,
  \"rule\": \"every weekday at 9am\", \"timezone\": \"Europe/Berlin\", \"payload\": {\"name\": \"team\"}
}"
echo

# 5. A one-off job: the same script once, in a minute. The key makes it idempotent.
run_at=$(python3 -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) + d.timedelta(minutes=1)).isoformat())')
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/jobs/hello-once" \
  -d "{\"script_id\": $script_id, \"run_at\": \"$run_at\", \"payload\": {\"name\": \"later\"}}"
echo

# 6. What ran: newest first.
curl -s --fail-with-body -H "Authorization: Bearer $TOKEN" "$ALMANAC/api/v1/runs?limit=5"
echo
