import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APIError, Gantry, GantryError, JobFailedError } from "../../client/index.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { AMQP_URL } from "../helpers/amqp-fixture.ts";
import { startDropProxy } from "../helpers/drop-proxy.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

interface Setup {
  name: string;
  start(): Promise<TestGateway>;
}

const SETUPS: Setup[] = [
  { name: "embedded default (SQLite, sql queue)", start: () => startTestGateway() },
  {
    name: "Postgres + RabbitMQ",
    start: () =>
      startTestGateway({
        database: "postgres",
        queueUrl: `${AMQP_URL}?queue_type=classic&prefix=gantry-sdk-${crypto.randomUUID().slice(0, 8)}`,
      }),
  },
];

const jobCount = async (gw: TestGateway): Promise<number> => {
  const row = await gw.db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<string | number>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
};

describe.each(SETUPS)("the SDK against a real gateway: $name", (setup) => {
  let gw: TestGateway;
  let agent: AgentHandle;
  let gantry: Gantry;

  beforeAll(async () => {
    gw = await setup.start();
    agent = await startTestAgent(gw);
    gantry = new Gantry({ baseUrl: gw.url, apiKey: gw.apiKey });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    const queue = gw?.queue as { deleteTopology?: () => Promise<void> } | undefined;
    await queue?.deleteTopology?.().catch(() => {});
    await gw?.close();
  });

  it("run() uploads an OCR image (Uint8Array, Blob and path) and returns its text", async () => {
    const png = await renderTextPng(["Receipt 5310", "paid in full"]);
    const updates: string[] = [];
    const output = await gantry.run(
      "ocr",
      { image: png },
      { onProgress: (u) => updates.push(u.status) },
    );
    expect(output.text.toLowerCase()).toContain("5310");
    expect(output.text.toLowerCase()).toContain("paid");
    expect(output.lines.length).toBeGreaterThanOrEqual(2);
    expect(updates.at(-1)).toBe("succeeded");

    const fromBlob = await gantry.run("ocr", { image: new Blob([new Uint8Array(png)]) });
    expect(fromBlob.text).toBe(output.text);
    const path = join(gw.dataDir, "receipt.png");
    writeFileSync(path, png);
    expect((await gantry.run("ocr", { image: path })).text).toBe(output.text);
  });

  it("run() throws JobFailedError with the job's error code", async () => {
    const failure = await gantry
      .run("noop", { fail: "permanent" })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(JobFailedError);
    expect((failure as JobFailedError).job.status).toBe("failed");
    expect((failure as JobFailedError).code).toBe((failure as JobFailedError).error?.code);
    expect((failure as JobFailedError).code.length).toBeGreaterThan(0);
  });

  it("errors carry the problem+json body", async () => {
    const error = await gantry.jobs
      .create({ model: "noop", input: { delay_ms: -5 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(422);
    expect((error as APIError).code).toBe("invalid_input");
    expect((error as APIError).errors[0]?.path).toContain("delay_ms");
  });

  it("create() takes timeout_seconds in its options; the job shows it", async () => {
    const job = await gantry.jobs.create({ model: "noop", input: {} }, { timeout_seconds: 7 });
    expect(job.timeout_seconds).toBe(7);
    const own = await gantry.jobs.create(
      { model: "noop", input: {}, timeout_seconds: 9 },
      { timeout_seconds: 7 },
    );
    expect(own.timeout_seconds).toBe(9);
  });

  it("a submit retried after the connection dropped returns the same job", async () => {
    let dropped = false;
    const proxy = await startDropProxy(gw.url, (method, path) => {
      if (method === "POST" && path === "/v1/jobs" && !dropped) {
        dropped = true;
        return "drop-response";
      }
      return "pass";
    });
    try {
      const before = await jobCount(gw);
      const client = new Gantry({ baseUrl: proxy.url, apiKey: gw.apiKey, maxRetries: 3 });
      const job = await client.jobs.create({ model: "noop", input: { marker: "once" } });
      const posts = proxy.seen.filter((r) => r.method === "POST");
      expect(posts).toHaveLength(2);
      expect(posts[0]?.headers["idempotency-key"]).toBeTruthy();
      expect(posts[1]?.headers["idempotency-key"]).toBe(posts[0]?.headers["idempotency-key"]);
      expect(await jobCount(gw)).toBe(before + 1);
      expect((await gantry.jobs.wait(job.id)).status).toBe("succeeded");
    } finally {
      await proxy.close();
    }
  });

  it("run() asks the gateway to hold the answer (Prefer: wait)", async () => {
    const proxy = await startDropProxy(gw.url, () => "pass");
    try {
      const client = new Gantry({ baseUrl: proxy.url, apiKey: gw.apiKey });
      expect(await client.run("noop", { marker: "held" }, { wait: 20 })).toMatchObject({
        marker: "held",
      });
      const post = proxy.seen.find((r) => r.method === "POST" && r.path === "/v1/jobs");
      expect(post?.headers.prefer).toBe("wait=20");
    } finally {
      await proxy.close();
    }
  });

  it("wait() polls where no event stream can be had", async () => {
    const paths: string[] = [];
    const client = new Gantry({
      baseUrl: gw.url,
      apiKey: gw.apiKey,
      fetch: async (input, init) => {
        const url = String(input);
        paths.push(new URL(url).pathname);
        // A proxy that refuses streams, as some corporate ones do.
        if (url.endsWith("/events")) return new Response("no streams here", { status: 501 });
        return fetch(input, init);
      },
    });
    const job = await client.jobs.create({ model: "noop", input: { delay_ms: 300 } });
    const done = await client.jobs.wait(job.id);
    expect(done.status).toBe("succeeded");
    expect(paths.filter((p) => p.endsWith("/events"))).toHaveLength(1);
    expect(paths.filter((p) => p === `/v1/jobs/${job.id}`).length).toBeGreaterThanOrEqual(1);
  });

  it("wait() polls when the gateway holds the tenant's most job streams (429 too_many_streams)", async () => {
    const paths: string[] = [];
    const client = new Gantry({
      baseUrl: gw.url,
      apiKey: gw.apiKey,
      maxRetries: 0,
      fetch: async (input, init) => {
        const url = String(input);
        paths.push(new URL(url).pathname);
        if (!url.endsWith("/events")) return fetch(input, init);
        // What a gateway answers a tenant past its job streams (gateway/feed/job-streams.ts).
        const problem = {
          type: "about:blank",
          title: "Too many",
          status: 429,
          code: "too_many_streams",
        };
        const headers = { "content-type": "application/problem+json", "retry-after": "1" };
        return new Response(JSON.stringify(problem), { status: 429, headers });
      },
    });
    const job = await client.jobs.create({ model: "noop", input: { delay_ms: 300 } });
    const done = await client.jobs.wait(job.id);
    expect(done.status).toBe("succeeded");
    expect(paths.filter((p) => p === `/v1/jobs/${job.id}`).length).toBeGreaterThanOrEqual(1);
  });

  it("list() iterates past several pages", async () => {
    const made = new Set<string>();
    for (let i = 0; i < 23; i++)
      made.add((await gantry.jobs.create({ model: "noop", input: { i } })).id);
    const seen: string[] = [];
    let pages = 0;
    for await (const page of gantry.jobs.pages({ limit: 5 })) {
      pages++;
      seen.push(...page.data.map((job) => job.id));
    }
    expect(pages).toBeGreaterThanOrEqual(5);
    const listed: string[] = [];
    for await (const job of gantry.jobs.list({ limit: 5 })) listed.push(job.id);
    expect(listed).toEqual(seen);
    expect(new Set(listed).size).toBe(listed.length);
    for (const id of made) expect(listed).toContain(id);
  });

  it("list() filters by model and metadata, as GET /v1/jobs does", async () => {
    const tag = `list-${Date.now()}`;
    const tagged = await gantry.jobs.create({ model: "noop", input: {}, metadata: { tag } });
    await gantry.jobs.create({ model: "noop", input: {}, metadata: { tag: `${tag}-other` } });
    const listed: string[] = [];
    for await (const job of gantry.jobs.list({ model: "noop", metadata: { tag } }))
      listed.push(job.id);
    expect(listed).toEqual([tagged.id]);
    const otherModel: string[] = [];
    for await (const job of gantry.jobs.list({ model: "ocr", metadata: { tag } }))
      otherModel.push(job.id);
    expect(otherModel).toEqual([]);
  });

  it("events() resumes with Last-Event-ID after the server drops the stream", async () => {
    const job = await gantry.jobs.create({ model: "noop", input: { delay_ms: 1500 } });
    let streams = 0;
    const proxy = await startDropProxy(gw.url, (_method, path) => {
      if (!path.endsWith("/events")) return "pass";
      streams++;
      return streams === 1 ? "drop-after-first-chunk" : "pass";
    });
    try {
      const client = new Gantry({ baseUrl: proxy.url, apiKey: gw.apiKey });
      const seqs: number[] = [];
      const statuses: string[] = [];
      for await (const event of client.jobs.events(job.id)) {
        if (event.type !== "status") continue;
        seqs.push(event.data.seq);
        statuses.push(event.data.status);
      }
      expect(streams).toBeGreaterThanOrEqual(2);
      const resumed = proxy.seen.filter((r) => r.path.endsWith("/events"))[1];
      expect(Number(resumed?.headers["last-event-id"])).toBeGreaterThan(0);
      expect(statuses[0]).toBe("queued");
      expect(statuses.at(-1)).toBe("succeeded");
      expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    } finally {
      await proxy.close();
    }
  });

  it("events() of a failed job retried runs to its latest end, not its first", async () => {
    const created = await gantry.jobs.create({ model: "noop", input: { fail: "permanent" } });
    expect((await gantry.jobs.wait(created.id)).status).toBe("failed");
    const retried = await gw.api(`/v1/jobs/${created.id}/retry`, { method: "POST" });
    expect(retried.status).toBeLessThan(300);
    const statuses: string[] = [];
    for await (const event of gantry.jobs.events(created.id))
      if (event.type === "status") statuses.push(event.data.status);
    expect(statuses.filter((s) => s === "failed")).toHaveLength(2);
    expect(statuses.at(-1)).toBe("failed");
    expect(statuses.filter((s) => s === "queued")).toHaveLength(2);
  });

  it("waits out a 429 with Retry-After", async () => {
    const tenant = `ten_rl${crypto.randomUUID().slice(0, 8).replace(/-/g, "")}`;
    const made = await gw.api("/v1/admin/tenants", {
      method: "POST",
      json: { id: tenant, name: tenant, plan: "free", limits: { rate_per_second: 1, burst: 2 } },
    });
    expect(made.status).toBe(201);
    const keyed = await gw.api(`/v1/admin/tenants/${tenant}/keys`, { method: "POST", json: {} });
    const { key } = (await keyed.json()) as { key: string };
    const statuses: number[] = [];
    const retryAfter: (string | null)[] = [];
    const client = new Gantry({
      baseUrl: gw.url,
      apiKey: key,
      maxRetries: 5,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        statuses.push(response.status);
        if (response.status === 429) retryAfter.push(response.headers.get("retry-after"));
        return response;
      },
    });
    const jobs = await Promise.all(
      [1, 2, 3, 4].map((i) => client.jobs.create({ model: "noop", input: { i } })),
    );
    expect(new Set(jobs.map((j) => j.id)).size).toBe(4);
    expect(statuses).toContain(429);
    expect(Number(retryAfter[0])).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 202)).toHaveLength(4);
  });
});

describe("the SDK's file paths", () => {
  it("says which path it cannot read and why, before any request", async () => {
    // Nothing listens there: a request made would fail as a ConnectionError instead.
    const gantry = new Gantry({ baseUrl: "http://127.0.0.1:9", apiKey: "gk_unused" });
    const missing = await gantry.uploads
      .create(join(import.meta.dirname, "no-such-scan.png"))
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(GantryError);
    expect((missing as Error).message).toMatch(/^cannot read ".*no-such-scan\.png": no such file$/);
    const folder = await gantry.run("ocr", { image: import.meta.dirname }).catch((e: unknown) => e);
    expect(folder).toBeInstanceOf(GantryError);
    expect((folder as Error).message).toMatch(/: it is not a file$/);
    const http = await gantry
      .run("ocr", { image: "http://example.com/scan.png" })
      .catch((e: unknown) => e);
    expect(http).toBeInstanceOf(GantryError);
    expect((http as Error).message).toMatch(/input URLs must be https/);
  });
});
