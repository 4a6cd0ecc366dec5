/**
 * `Prefer: wait` on the Workers entry, in workerd through Miniflare (D1, R2). I/O cannot
 * cross requests there, so a waiter is not woken by the agent's report (another request)
 * but re-reads its job every 2 s on a timer of its own (gateway/jobs/wait.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker();
});
afterAll(() => worker?.close());

const submit = (json: unknown, prefer: string) =>
  worker.api("/v1/jobs", { method: "POST", json, headers: { prefer } });

/** The queued job whose input carries `n` (the earlier test leaves a queued job too). */
async function newestJob(n: number): Promise<string | null> {
  const listed = await worker.api("/v1/jobs?limit=5");
  const { data } = (await listed.json()) as {
    data: { id: string; status: string; input: { n?: number } }[];
  };
  return data.find((job) => job.status === "queued" && job.input.n === n)?.id ?? null;
}

describe("Prefer: wait in workerd", () => {
  it("answers 202 with the queued job when the wait runs out", async () => {
    const response = await submit({ model: "noop", input: {} }, "wait=1");
    expect(response.status).toBe(202);
    expect(response.headers.get("preference-applied")).toBe("wait=1");
    expect(((await response.json()) as { status: string }).status).toBe("queued");
  });

  it("answers 200 once an agent finishes the job during the wait", async () => {
    const credentials = await worker.agent("workerd-wait");
    const agent_id = credentials.agent_id;
    const held = submit({ model: "noop", input: { n: 7 } }, "wait=30");
    let id: string | null = null;
    await expect
      .poll(async () => {
        id = await newestJob(7);
        return id;
      })
      .not.toBeNull();
    expect(
      (await worker.signed(credentials, `/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 }))
        .status,
    ).toBe(200);
    const done = { v: 1, type: "succeeded", agent_id, attempt: 1, output: { n: 7 } };
    expect((await worker.signed(credentials, `/jobs/${id}/events`, done)).status).toBe(200);
    const response = await held;
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id, status: "succeeded", output: { n: 7 } });
  });

  it("takes submits sent together to one isolate, each answered with its own job", async () => {
    // An isolate's requests share its stores: no statement may carry two requests' jobs,
    // or one request's I/O would settle the other's promise, which workerd refuses.
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, n) =>
        worker.api("/v1/jobs", { method: "POST", json: { model: "noop", input: { n: 100 + n } } }),
      ),
    );
    const jobs = await Promise.all(
      answers.map(async (answer) => {
        expect(answer.status).toBe(202);
        return (await answer.json()) as { id: string; input: { n: number } };
      }),
    );
    expect(new Set(jobs.map((job) => job.id)).size).toBe(8);
    expect(jobs.map((job) => job.input.n).sort()).toEqual([100, 101, 102, 103, 104, 105, 106, 107]);
  });
});
