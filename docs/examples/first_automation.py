"""Your first automation through the API, with Python and httpx.

Needs ALMANAC (the server's address) and TOKEN (an editor's or admin's API token) in the environment.
"""

import os
from datetime import datetime, timedelta, timezone

import httpx

SOURCE = """
export default async function (event) {
  const n = ((await almanac.kv.get("greetings")) ?? 0) + 1;
  await almanac.kv.set("greetings", n);
  console.log("hello", event.payload);
  return {greetings: n};
}
"""

api = httpx.Client(base_url=os.environ.get("ALMANAC", "http://127.0.0.1:8000") + "/api/v1",
                   headers={"Authorization": f"Bearer {os.environ['TOKEN']}"}, timeout=60)

script = api.post("/scripts", json={"name": "greeter (python)", "source": SOURCE}).raise_for_status().json()

preview = api.post("/recurrence/preview", json={"rule": "every weekday at 9am", "timezone": "Europe/Berlin",
                                                "count": 3}).raise_for_status().json()
print(preview["description"], preview["next"])

run = api.post(f"/scripts/{script['id']}/run", json={"payload": {"name": "Ada"}}).raise_for_status().json()
print(run["status"], run["output"], run["logs"])

schedule = api.post("/schedules", json={"name": "morning hello (python)", "script_id": script["id"],
                                        "rule": "every weekday at 9am", "timezone": "Europe/Berlin",
                                        "payload": {"name": "team"}}).raise_for_status().json()
print(schedule["description"], schedule["next_run_at"])

run_at = datetime.now(timezone.utc) + timedelta(minutes=1)
job = api.put("/jobs/hello-once-python", json={"script_id": script["id"], "run_at": run_at.isoformat(),
                                                 "payload": {"name": "later"}}).raise_for_status().json()
print(job)

for run in api.get("/runs", params={"limit": 5}).raise_for_status().json()["items"]:
    print(run["id"], run["trigger"], run["status"], run["output"])
