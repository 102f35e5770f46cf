#!/usr/bin/env bash
# The abandoned-cart tutorial: upload the script, then plan the first check of a cart.
# Needs ALMANAC and TOKEN (an admin's token to upload the script; an editor's is enough for jobs).
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
: "${FIRST_CHECK_IN:=3600}"     # seconds after the cart was left: an hour
: "${RECHECK_SECONDS:=86400}"   # then once a day
here=$(cd "$(dirname "$0")" && pwd)
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")

script_id=$(python3 -c 'import json, sys; print(json.dumps({"name": "cart reminder", "source": open(sys.argv[1]).read()}))' \
              "$here/cart-reminder.js" \
            | curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts" -d @- \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')

# Your shop calls this when a cart is left. PUT with a key: calling it twice plans one check.
run_at=$(python3 -c 'import datetime as d, sys; print((d.datetime.now(d.timezone.utc) + d.timedelta(seconds=int(sys.argv[1]))).isoformat())' "$FIRST_CHECK_IN")
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/jobs/cart-c-1001-0" -d "{
  \"script_id\": $script_id, \"run_at\": \"$run_at\",
  \"payload\": {\"cart\": \"c-1001\", \"email\": \"ada@example.com\", \"recheck_seconds\": $RECHECK_SECONDS}}"
echo
