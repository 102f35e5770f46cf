// The graphile-worker side of bench/pg_scale_bench.py: one worker process draining a burst of no-op jobs.
//   node bench/graphile_worker.js DSN defaults|fast OUT.json   (GRAPHILE_DIR: the folder npm installed it in)
// It records each job's start lag (start - run_at) and the time of its last completion, and writes
// them to OUT.json when it is told to stop (SIGTERM), so that the measurement adds no query of its own.
"use strict";
const path = require("path");
const fs = require("fs");
const { run } = require(path.join(process.env.GRAPHILE_DIR, "node_modules", "graphile-worker"));

// "fast" is the configuration graphile-worker's performance page gives, with the 200 ms poll
// the comparison uses; "defaults" changes nothing.
const SETTINGS = {
  defaults: {},
  fast: { concurrentJobs: 24, maxPoolSize: 25, localQueue: { size: 500 }, completeJobBatchDelay: 0,
          failJobBatchDelay: 0, pollInterval: 200 },
};

async function main() {
  const [dsn, mode, out] = process.argv.slice(2);
  const lags = [];
  let lastDone = 0;
  let started = 0;
  const runner = await run({
    noHandleSignals: true,
    taskList: { noop: async () => {} },
    preset: { worker: { connectionString: dsn, ...SETTINGS[mode] } },
  });
  runner.events.on("job:start", ({ job }) => { started += 1; lags.push(Date.now() - new Date(job.run_at).getTime()); });
  runner.events.on("job:success", () => { lastDone = Date.now(); });
  const stop = async () => {
    await runner.stop();
    fs.writeFileSync(out, JSON.stringify({ started, last_done_ms: lastDone, lags_ms: lags }));
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await runner.promise;
}

main().catch((e) => { console.error(e); process.exit(1); });
