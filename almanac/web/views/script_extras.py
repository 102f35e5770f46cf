"""What the script pages show beside the editor: starter templates, the reference, version diffs.

The reference comes from `static/editor/almanac-api.json`, the one file generated from the
sandbox's capability registry (tools/gen_editor_api.py), so the page, the editor's completion
and the sandbox cannot disagree.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

API_TABLE = Path(__file__).resolve().parent.parent / "static" / "editor" / "almanac-api.json"


PAYLOAD_LINE = re.compile(r"^\s*//\s*Payload:\s*(\{.*\}|\[.*\])\s*$", re.M)


def sample_payload(source: str) -> str | None:
    """The sample payload a source names in a `// Payload: {...}` comment, if it is JSON.

    The sample lives in the source, not beside it, so a script saved from a template keeps it:
    the script page offers it for "Run now" and "Try draft" (docs/decisions/0191).
    """
    match = PAYLOAD_LINE.search(source)
    if match is None:
        return None
    try:
        json.loads(match.group(1))
    except ValueError:
        return None
    return match.group(1)


@dataclass(frozen=True)
class Starter:
    """A template: its source names its sample payload; `explains` is the setup step its comments
    ask for (a host to allow, a secret to set) and its first run's error names when it is missing."""

    slug: str
    title: str
    source: str
    explains: str | None = None

    @property
    def payload(self) -> str:
        return sample_payload(self.source) or "{}"


STARTERS = (
    Starter("abandoned-cart", "Abandoned-cart reminder", """\
// Abandoned-cart reminder: a one-off job planned a few hours after a cart was left.
// Payload: {"cart": "c-123", "email": "ann@example.com"}
export default async function (event) {
  const {cart, email} = event.payload ?? {};
  if (!cart || !email) throw new Error("the payload needs cart and email");
  const state = (await almanac.kv.get(`cart:${cart}`)) ?? {};
  if (state.ordered) {
    console.log("cart", cart, "was ordered: no reminder");
    return {reminded: false};
  }
  await almanac.emit("cart.reminder", {cart, email, items: state.items ?? []});
  await almanac.kv.set(`cart:${cart}`, {...state, remindedAt: event.firedAt});
  return {reminded: true};
}
"""),
    Starter("check-again-later", "Check again later, with a guard", """\
// Check again later: is the order shipped? If not, look again in an hour.
// The guard: at most 24 looks, then escalate, so the chain always ends.
// Payload: {"order": 7}
const MAX_CHECKS = 24;

export default async function (event) {
  const order = event.payload?.order;
  if (order == null) throw new Error("the payload needs an order");
  const counter = `order:${order}:checks`;
  const checks = ((await almanac.kv.get(counter)) ?? 0) + 1;
  await almanac.kv.set(counter, checks);
  if ((await almanac.kv.get(`order:${order}:status`)) === "shipped") {
    return {order, shipped: true, checks};
  }
  if (checks >= MAX_CHECKS) {
    await almanac.emit("order.escalate", {order, checks});
    return {order, escalated: true};
  }
  const later = new Date(Date.parse(event.firedAt) + 3600 * 1000).toISOString();
  await almanac.schedule.at(later, {order}, {key: `recheck-${order}`});
  return {order, checkAgainAt: later};
}
"""),
    Starter("exchange-rates", "Daily exchange rates, e-mailed on a 1 % move", """\
// Daily exchange rates: fetch today's rates, keep them in kv, and emit "rates.moved" (for an
// e-mail target subscribed to it) when a currency moved more than 1 % since the last run.
// Put api.frankfurter.app on the egress allowlist first (Egress page, or PUT /api/v1/egress).
// Payload: {"base": "EUR", "threshold": 0.01}
export default async function (event) {
  const base = event.payload?.base ?? "EUR";
  const threshold = event.payload?.threshold ?? 0.01;
  const response = await fetch(`https://api.frankfurter.app/latest?from=${base}`);
  if (!response.ok) throw new Error(`the rates service answered ${response.status}`);
  const {date, rates} = await response.json();
  const previous = await almanac.kv.get(`rates:${base}:latest`);
  await almanac.kv.set(`rates:${base}:${date}`, rates);
  await almanac.kv.set(`rates:${base}:latest`, {date, rates});
  const moves = Object.entries(rates)
    .filter(([code, rate]) => previous?.rates?.[code])
    .map(([code, rate]) => ({code, from: previous.rates[code], to: rate,
                             change: rate / previous.rates[code] - 1}))
    .filter((move) => Math.abs(move.change) > threshold);
  if (moves.length) await almanac.emit("rates.moved", {base, date, since: previous.date, moves});
  console.log("stored", Object.keys(rates).length, "rates for", date, "moved:", moves.map((m) => m.code));
  return {date, count: Object.keys(rates).length, moved: moves.length};
}
""", explains="api.frankfurter.app"),
    Starter("own-api-reminder", "Reminder through your own API (bearer secret)", """\
// A reminder sent through your own product's API, with an API key kept as a secret.
// Set it up once: a secret API_TOKEN (Secrets page, or PUT /api/v1/secrets/API_TOKEN) and
// your API's host on the egress allowlist. The key never shows in runs: it reads [secret API_TOKEN].
// Payload: {"customer": 42, "message": "Your trial ends in 3 days"}
const API = "https://api.example.com";

export default async function (event) {
  const {customer, message} = event.payload ?? {};
  if (!customer || !message) throw new Error("the payload needs customer and message");
  const token = await almanac.secrets.get("API_TOKEN");
  if (!token) throw new Error("set the secret API_TOKEN first");
  const headers = {Authorization: `Bearer ${token}`, "Content-Type": "application/json"};
  const account = await fetch(`${API}/v1/customers/${customer}`, {headers});
  if (account.status === 404) return {skipped: "no such customer"};
  if (!account.ok) throw new Error(`the API answered ${account.status}`);  // retried by the schedule
  if ((await account.json()).unsubscribed) return {skipped: "unsubscribed"};
  const sent = await fetch(`${API}/v1/customers/${customer}/notifications`, {
    method: "POST", headers, body: JSON.stringify({message, runId: event.runId})});
  if (!sent.ok) throw new Error(`the notification was refused: ${sent.status} ${await sent.text()}`);
  return {notified: customer};
}
""", explains="API_TOKEN"),
    Starter("weekly-totals", "Weekly totals, e-mailed", """\
// Weekly totals: add up the last seven daily counters ("sales:YYYY-MM-DD") and emit
// one event for an e-mail target. Schedule it with "every Monday at 8am".
// Payload: {"to": "boss@example.com"}
export default async function (event) {
  const end = Date.parse(event.scheduledFor ?? event.firedAt);
  const days = [];
  let total = 0;
  for (let i = 7; i >= 1; i--) {
    const day = new Date(end - i * 86400000).toISOString().slice(0, 10);
    const value = Number((await almanac.kv.get(`sales:${day}`)) ?? 0) || 0;
    days.push({day, value});
    total += value;
  }
  await almanac.emit("report.weekly", {to: event.payload?.to, total, days});
  return {total, days: days.length};
}
"""),
)


def starter(slug: str | None) -> Starter | None:
    return next((s for s in STARTERS if s.slug == slug), None)


@lru_cache(maxsize=1)
def _table_text() -> str:
    return API_TABLE.read_text(encoding="utf-8")


def api_table() -> dict[str, Any]:
    """The generated table: `globals` (the completion tree), `capabilities`, `event_fields`, `limits`."""
    return json.loads(_table_text())


def completion_json() -> str:
    """The completion tree, compact, for the editor (embedded in the page as JSON data)."""
    text = json.dumps({"globals": api_table()["globals"]}, separators=(",", ":"))
    return text.replace("<", "\\u003c")  # inside <script type="application/json">: no "</script>"


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff: line numbers and text on each side, and the kind of change."""

    kind: str  # "same", "changed", "removed", "added"
    left_no: int | None
    left: str
    right_no: int | None
    right: str


def side_by_side(old: str, new: str) -> list[DiffRow]:
    """Rows of a side-by-side diff of two sources (difflib's opcodes, line by line)."""
    a, b = old.splitlines(), new.splitlines()
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [DiffRow("same", i + 1, a[i], j + 1, b[j]) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            left = (i + 1, a[i]) if i < i2 else (None, "")
            right = (j + 1, b[j]) if j < j2 else (None, "")
            kind = "changed" if left[0] and right[0] else ("removed" if left[0] else "added")
            rows.append(DiffRow(kind, left[0], left[1], right[0], right[1]))
    return rows
