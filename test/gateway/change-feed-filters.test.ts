import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import {
  collectFeed,
  cursorsOf,
  NO_POLLING,
  type StreamedEvent,
  statusesByJob,
} from "../helpers/feed-client.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const succeeded = (jobs: () => readonly string[]) => (events: readonly StreamedEvent[]) => {
  const byJob = statusesByJob(events);
  const ids = jobs();
  return ids.length > 0 && ids.every((id) => byJob.get(id)?.at(-1) === "succeeded");
};

describe.each(["sqlite", "postgres"] as const)("GET /v1/events filters on %s", (database) => {
  let gw: TestGateway;
  let agent: AgentHandle;
  const submit = async (n: number, metadata?: Record<string, string>) => {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { n }, ...(metadata ? { metadata } : {}) },
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };
  /** The store cursors inside the ids (sealed afresh on each stream): what to compare. */
  const ids = (events: readonly StreamedEvent[]) =>
    cursorsOf(
      gw.gateway,
      events.map((e) => e.id),
    );
  beforeAll(async () => {
    gw = await startTestGateway({ database, models: ["noop"], config: NO_POLLING });
    agent = await startTestAgent(gw, { models: ["noop"] });
  });
  afterAll(async () => {
    await agent?.stop();
    await gw?.close();
  });

  it("metadata.KEY=VALUE keeps only the tagged jobs, and a filtered resume is exact", async () => {
    const tagged: string[] = [];
    const others: string[] = [];
    const query = `?metadata.run=${database}-a&metadata.kind=test`;
    const events = await collectFeed(
      gw.api,
      succeeded(() => tagged),
      {
        query,
        onOpen: async () => {
          for (let i = 0; i < 3; i++) {
            others.push(await submit(i, { run: `${database}-b`, kind: "test" }));
            others.push(await submit(i, { run: `${database}-a` }));
            others.push(await submit(i));
            tagged.push(await submit(i, { run: `${database}-a`, kind: "test" }));
          }
        },
      },
    );
    const byJob = statusesByJob(events);
    expect([...byJob.keys()].sort()).toEqual([...tagged].sort());
    for (const id of tagged) expect(byJob.get(id)).toEqual(["queued", "running", "succeeded"]);

    // Cut after the 4th, resume with the same filter: the other 5, once each, no stranger.
    const cut = events[3];
    if (!cut) throw new Error("too few events");
    const rest = await collectFeed(gw.api, (seen) => seen.length >= events.length - 4, {
      query,
      lastEventId: cut.id,
    });
    expect(await ids(rest)).toEqual(await ids(events.slice(4)));
  });

  it("batch= keeps one batch's jobs; resumed from before it, it is the unfiltered feed's subset", async () => {
    const marker: string[] = [];
    const batchJobs: string[] = [];
    let batchId = "";
    const all = await collectFeed(
      gw.api,
      succeeded(() => [...marker, ...batchJobs]),
      {
        onOpen: async () => {
          marker.push(await submit(0));
          const response = await gw.api("/v1/batches", {
            method: "POST",
            json: { model: "noop", items: [0, 1, 2].map((n) => ({ input: { n } })) },
          });
          expect(response.status).toBe(202);
          batchId = ((await response.json()) as { id: string }).id;
          const jobs = await gw.api(`/v1/batches/${batchId}/jobs`);
          const page = (await jobs.json()) as { data: { id: string }[] };
          batchJobs.push(...page.data.map((job) => job.id));
          // A job outside the batch, between its events.
          marker.push(await submit(1));
        },
      },
    );
    expect(batchJobs).toHaveLength(3);
    const first = all[0];
    if (!first) throw new Error("no events");
    const expected = all.filter((e) => batchJobs.includes(e.job_id));
    expect(expected).toHaveLength(9);
    const filtered = await collectFeed(gw.api, (seen) => seen.length >= expected.length, {
      query: `?batch=${batchId}`,
      lastEventId: first.id,
    });
    expect(await ids(filtered)).toEqual(await ids(expected));
  });

  it("refuses a malformed batch id, a bad metadata key and too many metadata filters (422)", async () => {
    const codes: string[] = [];
    for (const query of [
      "?batch=job_123",
      "?metadata.bad%20key=x",
      "?metadata.a=1&metadata.b=2&metadata.c=3&metadata.d=4&metadata.e=5",
    ]) {
      const response = await gw.api(`/v1/events${query}`);
      expect(response.status).toBe(422);
      codes.push(((await response.json()) as { code: string }).code);
    }
    expect(codes[0]).toBe("invalid_filter");
    expect(codes[2]).toBe("too_many_filters");
  });
});
