import { Webhook } from "standardwebhooks";
import { expect, it } from "vitest";
import { Gantry, GantryError, WebhookVerificationError } from "../../client/index.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";

/**
 * `webhooks.verify` reads the three Standard Webhooks headers whatever their case, as HTTP
 * header names are: a proxy that canonicalizes them (`Webhook-Id`, as Go's do) in front of
 * a framework that hands over a plain object must not turn a good delivery into a forgery.
 */
const secret = newWebhookSecret();
const gantry = new Gantry({ baseUrl: "http://gantry.test", apiKey: "gk_test" });
const body = JSON.stringify({ v: 1, type: "job.succeeded", data: { id: "job_x" } });
const at = new Date();
const signed = {
  id: "whd_01m98y0w9kf42qgfbxt7kajg06",
  timestamp: String(Math.floor(at.getTime() / 1000)),
  signature: new Webhook(secret).sign("whd_01m98y0w9kf42qgfbxt7kajg06", at, body),
};

it("verifies headers named in any case, in a plain object or as Headers", () => {
  const forms = [
    {
      "webhook-id": signed.id,
      "webhook-timestamp": signed.timestamp,
      "webhook-signature": signed.signature,
    },
    {
      "Webhook-Id": signed.id,
      "Webhook-Timestamp": signed.timestamp,
      "Webhook-Signature": signed.signature,
    },
    {
      "WEBHOOK-ID": [signed.id],
      "webhook-timestamp": signed.timestamp,
      "Webhook-Signature": signed.signature,
    },
    new Headers({
      "Webhook-Id": signed.id,
      "Webhook-Timestamp": signed.timestamp,
      "Webhook-Signature": signed.signature,
    }),
  ];
  for (const headers of forms) {
    expect(gantry.webhooks.verify(body, headers, secret)).toMatchObject({
      type: "job.succeeded",
      data: { id: "job_x" },
    });
  }
});

it("still refuses a forged or unsigned delivery", () => {
  const headers = { "Webhook-Id": signed.id, "Webhook-Timestamp": signed.timestamp };
  expect(() => gantry.webhooks.verify(body, headers, secret)).toThrow();
  const forged = { ...headers, "Webhook-Signature": signed.signature };
  expect(() => gantry.webhooks.verify(`${body} `, forged, secret)).toThrow();
});

it("throws a GantryError a caller can catch with the SDK's others, saying why", () => {
  const forged = {
    "webhook-id": signed.id,
    "webhook-timestamp": signed.timestamp,
    "webhook-signature": signed.signature,
  };
  const stale = { ...forged, "webhook-timestamp": String(Math.floor(at.getTime() / 1000) - 3600) };
  for (const [payload, headers] of [
    [`${body} `, forged],
    [body, stale],
    [body, { "webhook-id": signed.id }],
  ] as const) {
    let thrown: unknown;
    try {
      gantry.webhooks.verify(payload, headers, secret);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GantryError);
    expect(thrown).toBeInstanceOf(WebhookVerificationError);
    expect((thrown as Error).message).toMatch(/^webhook not verified: /);
  }
});
