// pg-boss's adapter for alkstore's peer harness (protocol: bench/harness_proto.py).
//
// Its documented surface: new PgBoss({connectionString, max: 10}), start()
// (installs its schema), createQueue with a 10 s expiry (a killed worker's
// jobs are retried by the supervisor, run every 2 s), insert() for the
// producer's batches, and work() with localConcurrency WORKER_COUNT, each
// of those workers running the jobs of its fetched batch one after the
// other (WORKER_COUNT jobs at once, as the other systems). pg-boss's work
// loop waits out its polling interval (0.5 s, the smallest it takes) after
// every fetch, empty or not, so a worker runs at most batchSize jobs per
// 0.5 s: batchSize is PGBOSS_BATCH (default 32; upstream's adapter picks
// up to 64 from the producer rate).
import { PgBoss } from "pg-boss";
import { createInterface } from "node:readline";
import { writeSync } from "node:fs";

const URL = process.env.DATABASE_URL;
const WORKERS = parseInt(process.env.WORKER_COUNT || "4", 10);
const WORK_MS = parseFloat(process.env.JOB_WORK_MS || "1");
const PAYLOAD_BYTES = parseInt(process.env.PAYLOAD_BYTES || "256", 10);
const BATCH_MAX = parseInt(process.env.BATCH_MAX || "128", 10);
let nextId = parseInt(process.env.ID_BASE || "0", 10);
const PAD = "x".repeat(Math.max(0, PAYLOAD_BYTES - 48));
const QUEUE = "harness";

function emit(record) {
  // Straight to the pipe: a SIGKILL loses nothing already written.
  writeSync(1, JSON.stringify(record) + "\n");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const boss = new PgBoss({
    connectionString: URL,
    max: 10,
    application_name: "harness-pgboss",
    superviseIntervalSeconds: 2,
    schedule: false,
  });
  boss.on("error", (err) => emit({ k: "err", msg: String(err).slice(0, 300) }));
  await boss.start();
  if (!(await boss.getQueue(QUEUE))) {
    try {
      await boss.createQueue(QUEUE, { expireInSeconds: 10, retryLimit: 25, retryDelay: 0 });
    } catch (err) {
      process.stderr.write(`[pgboss] createQueue: ${err}\n`); // another replica made it
    }
  }

  const b = parseInt(process.env.PGBOSS_BATCH || "32", 10);
  await boss.work(
    QUEUE,
    { batchSize: b, localConcurrency: WORKERS, pollingIntervalSeconds: 0.5 },
    async (jobs) => {
      for (const job of jobs) {
        const lat = Math.round((Date.now() / 1000 - job.data.t) * 100000) / 100;
        await sleep(WORK_MS);
        writeSync(1, `D ${job.data.id} ${lat}\n`);
      }
    },
  );

  let pending = 0;
  let stopped = false;
  let wake = null;
  const rl = createInterface({ input: process.stdin });
  rl.on("line", (line) => {
    const [cmd, n] = line.trim().split(/\s+/);
    if (cmd === "ENQ") pending += parseInt(n, 10);
    else if (cmd === "STOP") stopped = true;
    if (wake) wake();
  });
  rl.on("close", () => {
    stopped = true;
    if (wake) wake();
  });

  let shuttingDown = false;
  process.on("SIGTERM", async () => {
    if (shuttingDown) return;
    shuttingDown = true;
    stopped = true;
    if (wake) wake();
    await boss.stop({ graceful: true, timeout: 2000 }).catch(() => {});
    process.exit(0);
  });

  emit({ k: "ready", system: "pgboss", version: "12.18.2", schema: "pgboss", pid: process.pid });

  while (!stopped) {
    if (pending === 0) {
      await new Promise((resolve) => {
        wake = resolve;
      });
      wake = null;
      continue;
    }
    const n = Math.min(pending, BATCH_MAX);
    pending -= n;
    const ids = [];
    for (let i = 0; i < n; i++) ids.push(nextId++);
    for (;;) {
      const now = Date.now() / 1000;
      try {
        await boss.insert(
          QUEUE,
          ids.map((id) => ({ data: { id, t: now, pad: PAD } })),
        );
        emit({ k: "enq", ids });
        break;
      } catch (err) {
        emit({ k: "err", msg: `enqueue: ${err}`.slice(0, 300) });
        await sleep(200);
      }
    }
  }
}

main().catch((err) => {
  process.stderr.write(`[pgboss] fatal: ${err && err.stack ? err.stack : err}\n`);
  process.exit(3);
});
