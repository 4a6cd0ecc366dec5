import { createGateway } from "../../gateway/app.ts";
import { GatewayConfig, type GatewayConfigInput } from "../../gateway/config.ts";
import type { Gateway } from "../../gateway/context.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { submitJob } from "../../gateway/jobs/submit.ts";
import type { JobRow } from "../../gateway/store/job-rows.ts";
import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import type { Tenant } from "../../gateway/store/tenants.ts";
import { createDiskBlobStore } from "../../shared/blob/disk.ts";
import type { OpenedDatabase } from "../../shared/db/open.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import type { JobQueue } from "../../shared/queue/port.ts";
import { openTestDatabase } from "./test-gateway.ts";

/**
 * A gateway core for driving the sweeper by hand: no server, no log, background work
 * dropped, and a clock the test moves. The sweep tests each built this the same way.
 */
export function sweepGateway(options: {
  database: OpenedDatabase;
  queue: JobQueue;
  blobDir: string;
  now: () => number;
  fetch?: typeof fetch;
  config?: Partial<GatewayConfigInput>;
}): Gateway {
  return createGateway({
    stores: createKyselyStores(options.database.db),
    queue: options.queue,
    blobs: createDiskBlobStore({
      root: options.blobDir,
      publicBaseUrl: "http://127.0.0.1:1",
      secret: randomToken(32),
    }),
    config: GatewayConfig.parse({
      publicUrl: "http://127.0.0.1:1",
      models: ["noop"],
      agentToken: randomToken(24),
      ...options.config,
    }),
    log: { info() {}, warn() {}, error() {} },
    now: options.now,
    fetch: options.fetch ?? globalThis.fetch,
    // Work the core starts in the background (published marks) may outlive the test's
    // database: its failure then is no failure of the test.
    background: (work) => void work.catch(() => {}),
  });
}

/**
 * A queued job stored as a submit stores it (released, no webhook, no key), for tests that
 * drive the sweeper and claims by hand; throws if the store refused it.
 */
export async function insertJob(
  gateway: Gateway,
  job: { tenantId: string; now: number; expiresAt: number; model?: string },
): Promise<JobRow> {
  const row = await gateway.stores.jobs.insert({
    id: newId("job", job.now),
    tenantId: job.tenantId,
    model: job.model ?? "noop",
    priority: 5,
    input: {},
    webhook: null,
    idempotencyKey: null,
    requestHash: null,
    traceparent: null,
    now: job.now,
    expiresAt: job.expiresAt,
  });
  if (!row) throw new Error("insert refused");
  return row;
}

/**
 * A `sweepGateway` on a fresh SQLite database and its sql queue, for tests of the release
 * passes (`noop` jobs). `close()` first lets the passes that claims and ends started finish,
 * and the published marks they batch (50 ms: job-batch-updates.ts), then closes the store.
 */
export async function releaseTestGateway(now: () => number, config: Partial<GatewayConfigInput>) {
  const database = await openTestDatabase("sqlite");
  const gateway = sweepGateway({
    database,
    queue: sqlQueueOn(database, { limits: { maxAttempts: 3 } }),
    blobDir: "/nonexistent",
    now,
    config,
  });
  return {
    database,
    gateway,
    /** A `noop` job submitted as the API submits it, for the passes to release. */
    submitNoop: (tenant: Tenant) =>
      submitJob(
        gateway,
        tenant,
        { model: "noop", input: {} },
        { idempotencyKey: null, traceparent: null },
      ),
    async close() {
      await releaseModel(gateway, "noop");
      await new Promise((resolve) => setTimeout(resolve, 200));
      await gateway.queue.close();
      await database.close();
    },
  };
}
