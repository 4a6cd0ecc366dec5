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
