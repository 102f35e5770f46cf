#!/usr/bin/env bash
# The API's habits: who you are, a token with less power, one error body, pages, keys that make retries safe.
# Needs ALMANAC and TOKEN (an admin's token).
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")
json() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

# Who am I: the tenant, the token's role, every quota with its use.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/tenant" | json '["role"]'

# A read-only token for a dashboard (shown once: keep it).
viewer=$(curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/tokens" -d '{"name": "dashboard", "role": "viewer"}' | json '["token"]')

# A viewer may read but not change: 403 with the error body every refusal has.
curl -s -H "Authorization: Bearer $viewer" -H "Content-Type: application/json" \
  "$ALMANAC/api/v1/scripts" -d '{"name": "x", "source": "export default () => 1"}'
echo

# Another tenant's object, and one that does not exist, look the same: 404 not_found.
curl -s -H "Authorization: Bearer $viewer" "$ALMANAC/api/v1/schedules/999999"
echo

# A job with a key: sending it twice (a retry after a lost answer) leaves one job. 201, then 200.
script_id=$(curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts" \
              -d '{"name": "noop", "source": "export default async () => ({ok: true})"}' | json '["id"]')
for attempt in 1 2; do
  curl -s -o /dev/null -w '%{http_code}\n' -X PUT "${auth[@]}" "$ALMANAC/api/v1/jobs/invoice-2026-001" \
    -d "{\"script_id\": $script_id, \"run_at\": \"2030-01-01T09:00:00Z\", \"payload\": {\"invoice\": 1}}"
done

# Many jobs in one request: all or none, each item answered in order with its outcome.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/jobs/batch" -d "{\"jobs\": [
  {\"key\": \"invoice-2026-001\", \"script_id\": $script_id, \"run_at\": \"2030-01-01T09:00:00Z\", \"payload\": {\"invoice\": 1}},
  {\"key\": \"invoice-2026-002\", \"script_id\": $script_id, \"run_at\": \"2030-01-02T09:00:00Z\", \"payload\": {\"invoice\": 2}}]}"
echo

# Pages: pass next_cursor back as cursor until it is null.
cursor=""
while : ; do
  page=$(curl -s --fail-with-body -H "Authorization: Bearer $viewer" "$ALMANAC/api/v1/jobs?limit=1&cursor=$cursor")
  echo "$page" | json '["items"][0]["key"]'
  cursor=$(echo "$page" | python3 -c 'import json, sys; print(json.load(sys.stdin)["next_cursor"] or "")')
  [ -n "$cursor" ] || break
done
