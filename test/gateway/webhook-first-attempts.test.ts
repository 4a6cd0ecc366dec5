/**
 * A tenant's burst of webhooks to a receiver that takes each request and never answers:
 * the gateway sends at most FIRST_ATTEMPTS_PER_TENANT first attempts at once, each holding
 * its connection for the attempt's timeout; the rest stay recorded and due, and the
 * dispatcher sends them in its own share of slots.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { FIRST_ATTEMPTS_PER_TENANT } from "../../gateway/webhooks/first-attempts.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const BURST = FIRST_ATTEMPTS_PER_TENANT + 5;
const held: ServerResponse[] = [];
const receiver = createServer((_request, response) => held.push(response));
let gw: TestGateway;
let hook: string;

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  // Neither the sweep nor the dispatcher runs on its own: only the fast path sends.
  gw = await startTestGateway({
    models: ["noop"],
    sweepIntervalMs: 3_600_000,
    webhooks: { intervalMs: 3_600_000 },
  });
});
afterAll(async () => {
  for (const response of held) response.destroy();
  await gw?.close();
  receiver.close();
});

const until = async (what: () => boolean) => {
  while (!what()) await new Promise((resolve) => setTimeout(resolve, 20));
};

it("holds a tenant's first attempts to its share; the dispatcher sends the rest", async () => {
  const ids: string[] = [];
  for (let n = 0; n < BURST; n++) {
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { n }, webhook: { url: hook } },
    });
    ids.push(((await submitted.json()) as { id: string }).id);
  }
  // No agent: canceling each queued job is what sends its webhook.
  for (const id of ids) {
    expect((await gw.api(`/v1/jobs/${id}/cancel`, { method: "POST" })).status).toBe(200);
  }
  await until(() => held.length >= FIRST_ATTEMPTS_PER_TENANT);
  // Every cancel's delivery is recorded; those past the share wait, due, never claimed.
  const untried = async () => {
    let count = 0;
    for (const id of ids) {
      const log = (await (await gw.api(`/v1/jobs/${id}/webhooks`)).json()) as {
        data: { attempt_count: number }[];
      };
      if (log.data.length === 0) return null; // its record is still being written
      if (log.data[0]?.attempt_count === 0) count++;
    }
    return count;
  };
  let waiting = await untried();
  while (waiting === null) waiting = await untried();
  expect(waiting).toBe(BURST - FIRST_ATTEMPTS_PER_TENANT);
  expect(held).toHaveLength(FIRST_ATTEMPTS_PER_TENANT);
  // The dispatcher's own share (a fifth of its 50 slots) takes them.
  await gw.sendWebhooksNow();
  await until(() => held.length === BURST);
});
