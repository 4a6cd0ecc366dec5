/**
 * D1 queries per Worker invocation (workerd-counted.ts) for an operator's redrive of dead
 * letters (`POST /v1/admin/dead-letters/redrive`, up to 500 a call).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  type CountedWorker,
  D1_BOUND,
  numberedItems,
  startCountedWorker,
} from "../helpers/workerd-counted.ts";

const JOBS = 150;

let counting: CountedWorker;
beforeAll(async () => {
  // A window that lets every job out at once, so that each can be claimed straight away.
  counting = await startCountedWorker({ GANTRY_RELEASE_WINDOW: String(JOBS) });
}, 60_000);
afterAll(() => counting?.worker.close());

/** A batch's jobs, each claimed and failed for good by a hand-driven agent. */
async function deadLetters(): Promise<{ batch: string; ids: string[] }> {
  const { worker } = counting;
  const json = { model: "noop", items: numberedItems(JOBS) };
  const made = (await (await worker.api("/v1/batches", { method: "POST", json })).json()) as {
    id: string;
  };
  const ids: string[] = [];
  for (const path of [`/v1/batches/${made.id}/jobs?limit=100`]) {
    let next: string | null = path;
    while (next) {
      const page = (await (await worker.api(next)).json()) as {
        data: { id: string }[];
        next_cursor: string | null;
      };
      ids.push(...page.data.map((job) => job.id));
      next = page.next_cursor ? `${path}&cursor=${page.next_cursor}` : null;
    }
  }
  const agent = await worker.agent("redrive-agent");
  const { agent_id } = agent;
  for (const id of ids) {
    const claim = { v: 1, agent_id, attempt: 1 };
    expect((await worker.signed(agent, `/jobs/${id}/claim`, claim)).status).toBe(200);
    const error = { type: "permanent", code: "bad_input", message: "no" };
    const failed = { v: 1, type: "failed", agent_id, attempt: 1, error, will_retry: false };
    expect((await worker.signed(agent, `/jobs/${id}/events`, failed)).status).toBe(200);
  }
  await counting.invocations();
  return { batch: made.id, ids };
}

it("redrives a page of dead letters in a bounded number of statements, each once", async () => {
  const { batch, ids } = await deadLetters();
  const redrive = await counting.counted("/v1/admin/dead-letters/redrive", {
    method: "POST",
    json: { limit: 500 },
  });
  expect(redrive.status).toBe(200);
  const body = redrive.body as { redriven: string[]; skipped: unknown[]; next_cursor: null };
  expect(body.skipped).toEqual([]);
  expect([...body.redriven].sort()).toEqual([...ids].sort());
  expect(redrive.statements, redrive.texts).toBeLessThanOrEqual(D1_BOUND);
  // Queued again, each once, and their batch in progress again.
  const view = await counting.worker.api(`/v1/batches/${batch}`);
  expect(await view.json()).toMatchObject({
    status: "in_progress",
    request_counts: { total: JOBS, failed: 0 },
  });
  await counting.invocations();
  const again = await counting.counted("/v1/admin/dead-letters/redrive", {
    method: "POST",
    json: { limit: 500 },
  });
  expect(again.body).toMatchObject({ redriven: [], skipped: [] });
}, 120_000);
