#!/usr/bin/env bash
# Your shop marks the order shipped: the next check finds it and plans no other.
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
curl -s --fail-with-body -X PUT -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
  "$ALMANAC/api/v1/kv/order:c-1001" -d '{"value": {"shipped": true}}'
echo
