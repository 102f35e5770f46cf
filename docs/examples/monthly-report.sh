#!/usr/bin/env bash
# The monthly-report tutorial: an e-mail target for the managers, the script, its schedule, one run now.
# Needs ALMANAC and TOKEN (an admin's: targets and scripts are an admin's to make).
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
here=$(cd "$(dirname "$0")" && pwd)
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")

# 1. Where reports go: every event whose topic starts with "report." becomes one e-mail.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/targets" -d '{
  "kind": "email", "name": "managers", "recipients": ["anna@example.com", "ben@example.com"],
  "topics": ["report.*"],
  "subject_template": "Sales in {{ event.data.month }}: {{ event.data.total }}",
  "body_template": "{{ event.data.orders }} orders, {{ event.data.total }} EUR in {{ event.data.month }}."}'
echo

# 2. Some sales of last month, as the shop would have stored them.
month=$(python3 -c 'import datetime as d; print((d.date.today().replace(day=1) - d.timedelta(days=1)).strftime("%Y-%m"))')
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/kv/sales:$month" \
  -d '{"value": [{"order": 7, "amount": 120.5}, {"order": 8, "amount": 79.5}]}'
echo

# 3. The script, and its rule: the first day of every month at 8:00 in Vienna.
script_id=$(python3 -c 'import json, sys; print(json.dumps({"name": "monthly report", "source": open(sys.argv[1]).read()}))' \
              "$here/monthly-report.js" \
            | curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts" -d @- \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/schedules" -d "{
  \"name\": \"monthly report\", \"script_id\": $script_id,
  \"rule\": \"the 1st of every month at 8am\", \"timezone\": \"Europe/Vienna\"}"
echo

# 4. Send this month's report now instead of waiting for the 1st.
curl -s --fail-with-body "${auth[@]}" "$ALMANAC/api/v1/scripts/$script_id/run" -d '{"payload": {}}'
echo
