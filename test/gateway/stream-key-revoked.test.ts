import { describe, expect, it } from "vitest";
import { revokeApiKey } from "../../gateway/store/api-keys.ts";
import {
  adminKey,
  createKey,
  createTenant,
  gw,
  useAdminGateway,
} from "../helpers/admin-gateway.ts";
import { readSse } from "../helpers/sse.ts";

/**
 * A revoked key is refused from its next request on, and an event stream it opened before
 * is no exception: a stream lasts up to 15 minutes, and without this a revoked key (a leaked
 * one its owner revoked) kept reading every change of the tenant's jobs until it ended.
 */
useAdminGateway();

type SseEvent = { event: string; id: string; data: string };

/** Reads a stream in the background; `ended` settles when the gateway closes it. */
function follow(response: Response) {
  const events: SseEvent[] = [];
  const ended = readSse(response, (event) => void events.push(event)).then(() => true);
  return { events, ended };
}

/** True once `ended` settles, false if it did not within `ms` (the stream stayed open). */
const within = (ended: Promise<boolean>, ms: number) =>
  Promise.race([ended, new Promise<false>((resolve) => setTimeout(() => resolve(false), ms))]);

const revoke = async (id: string) => {
  const response = await gw.request(`/v1/admin/keys/${id}/revoke`, {
    method: "POST",
    key: adminKey,
  });
  expect(response.status).toBe(200);
};

const revokedNotice = (events: SseEvent[]) => {
  const last = events.at(-1);
  expect(last?.event).toBe("error");
  const notice = JSON.parse(last?.data ?? "{}") as { code: string; message: string };
  expect(notice.code).toBe("key_revoked");
  expect(notice.message).toContain("revoked");
};

describe("an event stream whose key is revoked", () => {
  it("GET /v1/events ends with key_revoked and sends no change made after", async () => {
    await createTenant("ten_rev_feed");
    const watcher = await createKey("ten_rev_feed", ["jobs:read"]);
    const writer = (await createKey("ten_rev_feed")).key;
    const response = await gw.request("/v1/events", { key: watcher.key });
    expect(response.status).toBe(200);
    const stream = follow(response);
    await expect.poll(() => stream.events.map((e) => e.event)).toContain("ready");

    await revoke(watcher.id);
    expect(await within(stream.ended, 5_000)).toBe(true);
    revokedNotice(stream.events);

    const submitted = await gw.request("/v1/jobs", {
      method: "POST",
      key: writer,
      json: { model: "noop", input: {} },
    });
    expect(submitted.status).toBe(202);
    expect(stream.events.filter((e) => e.event === "status")).toEqual([]);
    // Gone from the tenant's count of open streams too.
    await expect.poll(() => gw.gateway.feed.openStreams("ten_rev_feed")).toBe(0);
  });

  it("GET /v1/jobs/{id}/events ends with key_revoked", async () => {
    await createTenant("ten_rev_job");
    const watcher = await createKey("ten_rev_job", ["jobs:read"]);
    const writer = (await createKey("ten_rev_job")).key;
    // No agent serves noop here: the job stays queued and its stream stays open.
    const submitted = await gw.request("/v1/jobs", {
      method: "POST",
      key: writer,
      json: { model: "noop", input: {} },
    });
    const { id } = (await submitted.json()) as { id: string };
    const response = await gw.request(`/v1/jobs/${id}/events`, { key: watcher.key });
    expect(response.status).toBe(200);
    const stream = follow(response);
    await expect.poll(() => stream.events.map((e) => e.event)).toContain("status");

    await revoke(watcher.id);
    expect(await within(stream.ended, 5_000)).toBe(true);
    revokedNotice(stream.events);
  });

  it("ends once the key's cached verification lapses when another process revoked it", async () => {
    // `gantry keys revoke` writes the database; this gateway learns it as every replica
    // does, when its remembered verification of the key (apiKeyCacheMs) runs out.
    await createTenant("ten_rev_cli");
    const watcher = await createKey("ten_rev_cli", ["jobs:read"]);
    const response = await gw.request("/v1/events", { key: watcher.key });
    const stream = follow(response);
    await expect.poll(() => stream.events.map((e) => e.event)).toContain("ready");

    await revokeApiKey(gw.db, watcher.id, gw.clock.now);
    gw.clock.advance(gw.gateway.config.apiKeyCacheMs + 1);
    expect(await within(stream.ended, 5_000)).toBe(true);
    revokedNotice(stream.events);
  });

  it("keeps a stream whose key still holds", async () => {
    await createTenant("ten_rev_kept");
    const key = (await createKey("ten_rev_kept", ["jobs:read"])).key;
    const client = new AbortController();
    const response = await gw.request("/v1/events", { key, signal: client.signal });
    const stream = follow(response);
    await expect.poll(() => stream.events.map((e) => e.event)).toContain("ready");
    gw.clock.advance(gw.gateway.config.apiKeyCacheMs + 1);
    expect(await within(stream.ended, 2_500)).toBe(false);
    client.abort();
  });
});
