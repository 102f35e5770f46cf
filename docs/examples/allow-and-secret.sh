#!/usr/bin/env bash
# Allow the hosts scripts may reach and store a secret they may read. Needs ALMANAC and an admin's TOKEN.
set -euo pipefail
: "${ALMANAC:=http://127.0.0.1:8000}"
: "${API_HOST:=api.example.com}"          # a name, *.domain, or an address, with :port when not 443/80
: "${API_TOKEN_VALUE:?the secret to store}"
auth=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/egress" \
  -d "{\"hosts\": [\"api.frankfurter.app\", \"$API_HOST\"]}"
echo
curl -s --fail-with-body -X PUT "${auth[@]}" "$ALMANAC/api/v1/secrets/API_TOKEN" -d "{\"value\": \"$API_TOKEN_VALUE\"}"
echo
