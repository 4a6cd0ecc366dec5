import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Sqlite from "better-sqlite3";
import { expect, it } from "vitest";
import { startTestGateway } from "../helpers/test-gateway.ts";

/** Reads a response body to its end as text. */
async function readAll(response: Response): Promise<string> {
  return await response.text();
}

it("a graceful shutdown ends streams with a reconnect hint and answers waits, then stops accepting", async () => {
  // No agent: jobs stay queued, so streams and waits stay open until the shutdown.
  const gw = await startTestGateway({ models: ["noop"] });
  const submitted = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: {} },
  });
  const job = (await submitted.json()) as { id: string };

  const jobStream = await gw.api(`/v1/jobs/${job.id}/events`);
  const feedStream = await gw.api("/v1/events");
  expect([jobStream.status, feedStream.status]).toEqual([200, 200]);
  const waiting = gw.api("/v1/jobs", {
    method: "POST",
    headers: { prefer: "wait=60" },
    json: { model: "noop", input: { waited: true } },
  });
  // The wait is in flight once its job exists.
  for (;;) {
    const list = (await (await gw.api("/v1/jobs?limit=5")).json()) as { data: unknown[] };
    if (list.data.length === 2) break;
  }

  const closing = gw.close();
  const [jobText, feedText, waited] = await Promise.all([
    readAll(jobStream),
    readAll(feedStream),
    waiting,
  ]);
  await closing;

  expect(jobText).toContain('"status":"queued"');
  expect(jobText).toContain("retry: 1000");
  expect(feedText).toContain("retry: 1000");
  // The wait answered with the job as it was, instead of a cut connection.
  expect(waited.status).toBe(202);
  expect(((await waited.json()) as { status: string }).status).toBe("queued");
  await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();
});

it("cuts short a webhook attempt whose receiver never answers, records it and keeps its retry", async () => {
  // A receiver that takes the request and never answers: the attempt's limit is 15 s.
  const held: ServerResponse[] = [];
  const receiver = createServer((_request, response) => held.push(response));
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const { port } = receiver.address() as AddressInfo;
  // The database outlives the gateway, to be read after its shutdown.
  const dir = mkdtempSync(join(tmpdir(), "gantry-shutdown-hook-"));
  const gw = await startTestGateway({
    models: ["noop"],
    database: { url: join(dir, "gantry.db") },
    sweepIntervalMs: 3_600_000,
  });
  try {
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {}, webhook: { url: `http://127.0.0.1:${port}/hook` } },
    });
    const job = (await submitted.json()) as { id: string };
    // No agent: canceling the queued job is what sends its webhook.
    expect((await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" })).status).toBe(200);
    while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));

    const started = Date.now();
    await gw.close();
    // Within the 10 s docs/reliability.md promises, not after the attempt's 15 s.
    expect(Date.now() - started).toBeLessThan(5_000);
  } finally {
    for (const response of held) response.destroy();
    receiver.close();
  }
  const sqlite = new Sqlite(join(dir, "gantry.db"), { readonly: true });
  try {
    const delivery = sqlite
      .prepare("SELECT id, state, attempts, next_attempt_at FROM webhook_deliveries")
      .get() as { id: string; state: string; attempts: number; next_attempt_at: number };
    // Still to be sent, on its schedule (the first retry waits 5 s), by the next gateway.
    expect(delivery).toMatchObject({ state: "pending", attempts: 1 });
    const attempt = sqlite
      .prepare("SELECT n, status_code, reason, error FROM webhook_attempts WHERE delivery_id = ?")
      .get(delivery.id);
    expect(attempt).toEqual({
      n: 1,
      status_code: null,
      reason: "timeout",
      error: "cut short: the gateway stopped before the receiver answered",
    });
  } finally {
    sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
