import { afterAll, beforeAll, expect, it } from "vitest";
import { ofKind, ScaledObject, secretData } from "../helpers/k8s-manifests.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

/**
 * KEDA against a real gateway, as its metrics-api scaler reads it. The broker scalers
 * (keda/rabbitmq.yaml, sqs.yaml, redis.yaml, nats.yaml) count a queue's messages, but the
 * gateway hands a queue only a window of each model's jobs and keeps the backlog in its
 * store: with 40 jobs queued the queue held 8, so those triggers asked for 2 pods where 8
 * were allowed, and a running fleet stayed at a few pods under any backlog; the default
 * `sql` queue had no scaler at all. keda/gateway.yaml scales on the gateway's own count.
 */
const QUEUED = 40;
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["ocr"] });
  const image = await uploadFile(gw, await renderTextPng(["backlog"]), "image/png");
  for (let n = 0; n < QUEUED; n++) {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "ocr", input: { image } },
    });
    expect(response.status).toBe(202);
  }
});
afterAll(() => gw?.close());

/** The number at a GJSON path of plain keys (`state.queued`), as the scaler reads it. */
const at = (body: unknown, path: string): unknown =>
  path.split(".").reduce<unknown>((value, key) => (value as Record<string, unknown>)?.[key], body);

it("asks for every pod it may have under a backlog the queue itself never holds", async () => {
  const gatewayScaler = ofKind("ScaledObject").find((m) => m.file.endsWith("keda/gateway.yaml"));
  expect(gatewayScaler, "infra/k8s/keda/gateway.yaml").toBeDefined();
  const { spec } = ScaledObject.parse(gatewayScaler!.raw);
  const header = secretData("gantry-keda-gateway").authorization!;
  const wanted: number[] = [];
  for (const trigger of spec.triggers) {
    if (trigger.type !== "metrics-api") throw new Error(`unexpected trigger ${trigger.type}`);
    // The manifest's gateway, here the test's; its key in place of the placeholder.
    const { pathname } = new URL(trigger.metadata.url);
    const response = await fetch(`${gw.url}${pathname}`, {
      headers: { [trigger.metadata.keyParamName]: header.replace("REPLACE_ME", gw.apiKey) },
    });
    expect(response.status, pathname).toBe(200);
    const value = at(await response.json(), trigger.metadata.valueLocation);
    expect(typeof value, trigger.metadata.valueLocation).toBe("number");
    // The HPA's AverageValue target: one pod per targetValue.
    wanted.push(Math.ceil((value as number) / Number(trigger.metadata.targetValue)));
  }
  expect(Math.min(Math.max(...wanted), spec.maxReplicaCount)).toBe(spec.maxReplicaCount);
  // What a broker scaler counts: the release window, not the backlog.
  const depth = await gw.queue.depth("ocr");
  expect(depth.ready + depth.inFlight).toBeLessThan(QUEUED / 4);
});
