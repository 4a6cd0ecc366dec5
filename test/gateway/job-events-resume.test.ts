import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Problem } from "../../shared/protocol/index.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `GET /v1/jobs/{id}/events` resumed with `Last-Event-ID`. An EventSource reconnects on its
 * own when the server closes the stream after the terminal event, sending that event's id:
 * the stream must close again at once, not stay open with nothing to send.
 */
let gw: TestGateway;
let jobId: string;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  // No agent: the job is queued (seq 1), then canceled (seq 2).
  const submitted = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: {} },
  });
  jobId = ((await submitted.json()) as { id: string }).id;
  expect((await gw.api(`/v1/jobs/${jobId}/cancel`, { method: "POST" })).status).toBe(200);
});
afterAll(() => gw?.close());

/** The whole stream, or what came within 3 s when it did not end. */
async function streamed(lastEventId?: string): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> =
    lastEventId === undefined ? {} : { "last-event-id": lastEventId };
  const response = await gw.api(`/v1/jobs/${jobId}/events`, {
    headers,
    signal: AbortSignal.timeout(3_000),
  });
  const text = await response.text().catch(() => "(still open after 3 s)");
  return { status: response.status, text };
}

const seqs = (text: string) => [...text.matchAll(/"seq":(\d+)/g)].map((match) => Number(match[1]));

describe("a job's event stream resumed", () => {
  it("replays what follows the id and closes after the terminal event", async () => {
    expect(seqs((await streamed()).text)).toEqual([1, 2]);
    const resumed = await streamed("1");
    expect(resumed.status).toBe(200);
    expect(seqs(resumed.text)).toEqual([2]);
  });

  it("closes at once when resumed after the terminal event", async () => {
    const resumed = await streamed("2");
    expect(resumed.status).toBe(200);
    expect(resumed.text).not.toContain("still open");
    expect(seqs(resumed.text)).toEqual([]);
  });

  it("refuses an id that is none of the job's events, saying so", async () => {
    for (const id of ["3", "abc", "-1", "1.5"]) {
      const response = await gw.api(`/v1/jobs/${jobId}/events`, {
        headers: { "last-event-id": id },
      });
      expect(response.status).toBe(400);
      const problem = (await response.json()) as Problem;
      expect(problem.code).toBe("invalid_last_event_id");
      expect(problem.detail).toContain("from 1 to 2");
    }
  });
});
