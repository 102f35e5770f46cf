#!/usr/bin/env bash
# The exchange-rates tutorial: allow the service, upload the script, schedule it, try it once.
# Needs ALMANAC (the server) and TOKEN (an admin's token: the allowlist is an admin's to set).
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
: "${RATES_URL:=https://api.frankfurter.app/latest?from=EUR}"
here=$(cd "$(dirname "$0")" && pwd)
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")

# 1. Scripts reach only the hosts the tenant allowed. This replaces the list: keep your other hosts in it.
host=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).netloc)' "$RATES_URL")
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/egress" -d "{\"hosts\": [\"$host\"]}"
echo

# 2. The script, sent as JSON (python3 quotes the file for us).
script_id=$(python3 -c 'import json, sys; print(json.dumps({"name": "exchange rates", "source": open(sys.argv[1]).read()}))' \
              "$here/exchange-rates.js" \
            | curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts" -d @- \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')

# 3. Every weekday at 7:00 in Frankfurt, with the service's address as the payload.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/schedules" -d "{
  \"name\": \"exchange rates\", \"script_id\": $script_id, \"rule\": \"every weekday at 7am\",
  \"timezone\": \"Europe/Berlin\", \"payload\": {\"source\": \"$RATES_URL\"}}"
echo

# 4. Try it now rather than wait for tomorrow morning, then read what it stored.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts/$script_id/run" -d "{\"payload\": {\"source\": \"$RATES_URL\"}}"
echo
curl -s --fail-with-body -H "Authorization: Bearer $TOKEN" "$ALMANAC/api/v1/kv/rates:latest"
echo
