import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebhookDelivery, WebhookDeliveryList } from "../../shared/protocol/webhook-api.ts";
import { type ScriptedReceiver, startScriptedReceiver } from "../helpers/scripted-receiver.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A batch's `batch.completed` webhook has a delivery log and a redelivery of its own, as a
 * job's webhooks do: before, its attempts were recorded where no route could show them, and
 * a failed one could not be sent again.
 */

let receiver: ScriptedReceiver;
let gw: TestGateway;

beforeAll(async () => {
  receiver = await startScriptedReceiver("receiver says no");
  // No agent: canceling the batch ends its jobs, and that completes it.
  gw = await startTestGateway({ models: ["noop"], sweepIntervalMs: 3_600_000 });
});

afterAll(async () => {
  await gw.close();
  await receiver.close();
});

it("lists a batch's webhook deliveries and sends one again", async () => {
  const created = await gw.api("/v1/batches", {
    method: "POST",
    json: { model: "noop", items: [{ input: {} }], webhook: { url: `${receiver.url}/batch` } },
  });
  const batch = (await created.json()) as { id: string };
  receiver.scripts.set("/batch", [500]);
  const first = receiver.nextRequest("/batch");
  expect((await gw.api(`/v1/batches/${batch.id}/cancel`, { method: "POST" })).status).toBe(200);
  await first;

  const listed = await gw.api(`/v1/batches/${batch.id}/webhooks`);
  expect(listed.status).toBe(200);
  const [delivery] = WebhookDeliveryList.parse(await listed.json()).data;
  expect(delivery).toMatchObject({
    event_type: "batch.completed",
    url: `${receiver.url}/batch`,
    state: "pending",
    attempt_count: 1,
    attempts: [{ n: 1, status_code: 500, reason: "http_status" }],
  });
  if (!delivery) throw new Error("no delivery");

  const again = await gw.api(`/v1/batches/${batch.id}/webhooks/${delivery.id}/redeliver`, {
    method: "POST",
  });
  expect(again.status).toBe(202);
  expect(WebhookDelivery.parse(await again.json())).toMatchObject({
    id: delivery.id,
    state: "delivered",
    attempt_count: 2,
  });
  const sent = receiver.received.at(-1);
  const event = new Webhook(gw.webhookSecret).verify(sent?.body ?? "", sent?.headers ?? {});
  expect(event).toMatchObject({ type: "batch.completed", data: { id: batch.id } });

  // Another tenant's batch is unknown here, as everywhere.
  const other = await gw.addTenant("ten_other");
  const theirs = await gw.api(`/v1/batches/${batch.id}/webhooks`, {
    headers: { authorization: `Bearer ${other}` },
  });
  expect(theirs.status).toBe(404);
  const redeliver = await gw.api(`/v1/batches/${batch.id}/webhooks/${delivery.id}/redeliver`, {
    method: "POST",
    headers: { authorization: `Bearer ${other}` },
  });
  expect(redeliver.status).toBe(404);
});
