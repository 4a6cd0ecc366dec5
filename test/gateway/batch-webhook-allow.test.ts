import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * GANTRY_WEBHOOK_ALLOW outside embedded mode: an internal receiver the operator listed is
 * taken as a batch's webhook as it is as a job's, and one not listed is refused by both.
 */
describe("a batch's webhook and GANTRY_WEBHOOK_ALLOW", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({
      models: ["noop"],
      allowInsecureWebhooks: false,
      config: { webhookAllow: ["10.20.0.0/16"] },
    });
  }, 60_000);
  afterAll(() => gw?.close());

  const submit = (path: string, url: string) => {
    const json =
      path === "/v1/jobs"
        ? { model: "noop", input: { delay_ms: 60_000 }, webhook: { url } }
        : { model: "noop", items: [{ input: { delay_ms: 60_000 } }], webhook: { url } };
    return gw.api(path, { method: "POST", json });
  };

  it("takes a listed internal receiver and refuses an unlisted one, for jobs and batches alike", async () => {
    for (const path of ["/v1/jobs", "/v1/batches"]) {
      const listed = await submit(path, "http://10.20.0.5:8080/hooks");
      expect(listed.status, path).toBe(202);
      const unlisted = await submit(path, "http://10.30.0.5:8080/hooks");
      expect(unlisted.status, path).toBe(422);
      expect(await unlisted.json(), path).toMatchObject({ code: "webhook_url_not_allowed" });
    }
  });
});
