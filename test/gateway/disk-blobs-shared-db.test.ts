/**
 * Gateways on one Postgres database with blobs on their own disks (a replica missing its
 * GANTRY_S3_* settings) broke uploads across them with no word: a file PUT through one was
 * 409 upload_incomplete through the other. One gateway on Postgres with disk blobs is valid,
 * so the start line says the blobs are this gateway's only and names GANTRY_S3_BUCKET; once
 * the shared limiter's rounds see another gateway on the database, the gateway warns.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import pino from "pino";
import { afterAll, describe, expect, it, vi } from "vitest";
import { DISK_BLOBS_ON_POSTGRES } from "../../gateway/runtime/node/blobs.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { gatewayStartOutput } from "../helpers/gateway-process.ts";
import { freshPostgresUrl, startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const dir = mkdtempSync(join(tmpdir(), "helper-blobs-disk-"));
const gateways: TestGateway[] = [];
afterAll(async () => {
  // The first made (and drops) the schema: it closes last.
  for (const gw of gateways.reverse()) await gw.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A logger whose entries the test reads. */
function capturedLogger() {
  const entries: { level: number; msg: string; gateways?: number }[] = [];
  const stream = new PassThrough();
  stream.on("data", (line: Buffer) => {
    for (const text of line.toString("utf8").split("\n").filter(Boolean)) {
      entries.push(JSON.parse(text) as (typeof entries)[number]);
    }
  });
  return { logger: pino({ level: "warn" }, stream), entries };
}

describe("gantry gateway on Postgres with blobs on disk", () => {
  it("says at start that the blobs are its own, naming GANTRY_S3_BUCKET", async () => {
    const database = freshPostgresUrl("hk");
    try {
      const { stderr } = await gatewayStartOutput({
        GANTRY_DATA_DIR: join(dir, "cli"),
        GANTRY_DATABASE_URL: database.url,
      });
      expect(stderr).toContain(`gantry: ${DISK_BLOBS_ON_POSTGRES}\n`);
      expect(DISK_BLOBS_ON_POSTGRES).toContain("GANTRY_S3_BUCKET");
    } finally {
      await dropPostgresSchema(database.url, database.schema);
    }
  });

  it("warns once it sees another gateway on the database", async () => {
    const first = capturedLogger();
    const sharedLimits = { intervalMs: 50 };
    gateways.push(
      await startTestGateway({ database: "postgres", logger: first.logger, sharedLimits }),
    );
    const url = gateways[0]?.databaseUrl ?? "";
    const second = capturedLogger();
    gateways.push(
      await startTestGateway({ database: { url }, logger: second.logger, sharedLimits }),
    );
    for (const { entries } of [first, second]) {
      await vi.waitFor(() => expect(entries.some((e) => e.gateways === 2)).toBe(true), {
        timeout: 20_000,
      });
      const warnings = entries.filter((e) => e.msg.includes("GANTRY_S3_BUCKET"));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, gateways: 2 });
    }
  });
});
