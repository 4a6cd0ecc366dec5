/**
 * `GET /v1/jobs/{id}/events` on the Workers entry, in workerd (D1, R2): a stream may not be
 * woken by another request there. A wake from the request that changes the job settles a
 * promise of the stream's request, which workerd flags ("A promise was resolved or rejected
 * from a different request context") and, once the stream's request has ended, drops; until
 * that change, the ended stream's listener stayed in the isolate. The stream re-reads on its
 * own timer instead, as a `Prefer: wait` does (jobs/wait.ts).
 */
import type { Readable } from "node:stream";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import {
  bundleGatewayWorker,
  gatewayWorkerOptions,
  type WorkerBundle,
} from "../helpers/workerd.ts";

const ORIGIN = "http://gantry.test";
const apiKey = `gk_${randomToken(24)}`;
let bundle: WorkerBundle;
let mf: Miniflare;
/** What workerd writes to its stderr: its warnings. */
let runtimeErrors = "";

beforeAll(async () => {
  bundle = await bundleGatewayWorker();
  mf = new Miniflare({
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      stdout.resume();
      stderr.on("data", (chunk: Buffer) => {
        runtimeErrors += chunk.toString();
      });
    },
    workers: [
      gatewayWorkerOptions(bundle, {
        name: "gateway",
        r2: true,
        bindings: {
          GANTRY_BLOB_SECRET: randomToken(32),
          GANTRY_MODELS: "noop",
          GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
          GANTRY_BOOTSTRAP_API_KEY: apiKey,
        },
      }),
    ],
  });
  await mf.ready;
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
  bundle?.remove();
});

const api = (path: string, method = "GET", json?: unknown) =>
  mf.dispatchFetch(`${ORIGIN}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });

describe("a job's event stream in workerd", () => {
  it("is not woken from another request when its job changes", async () => {
    const submitted = await api("/v1/jobs", "POST", { model: "noop", input: {} });
    const { id } = (await submitted.json()) as { id: string };
    expect((await api(`/v1/jobs/${id}/cancel`, "POST")).status).toBe(200);
    // The stream sends queued, canceled and ends: its request is over.
    const stream = await api(`/v1/jobs/${id}/events`);
    expect(stream.status).toBe(200);
    expect(await stream.text()).toContain('"status":"canceled"');

    expect((await api(`/v1/jobs/${id}/retry`, "POST")).status).toBe(202);
    // A job read after the retry: workerd has written whatever the retry made it say.
    expect(((await (await api(`/v1/jobs/${id}`)).json()) as { status: string }).status).toBe(
      "queued",
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(runtimeErrors).not.toContain("different request context");
  });
});
