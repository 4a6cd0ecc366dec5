import { describe, expect, it } from "vitest";
import { queueCheck } from "../../gpu-agent/doctor/connections.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { TEST_AMQP_URL } from "../helpers/fault-queue.ts";

/**
 * `gantry-agent doctor`'s queue row on an operator's wrong broker URL: it says why (the
 * broker's refusal, or the network error of a broker that does not answer), and what `run`
 * will do about it. It said "queue did not answer within 10 s" for both, and that `run`
 * waits for it, which a wrong password never ends.
 */
const TIMEOUT_MS = 2_000;

function amqpWith(change: (url: URL) => void): string {
  const url = new URL(TEST_AMQP_URL);
  change(url);
  url.searchParams.set("prefix", "gantry-doctor-refusal");
  return url.toString();
}

describe("the doctor's queue row on a wrong broker URL", () => {
  it("a refused password: FAIL with the refusal, and run stops on it", async () => {
    const url = amqpWith((parsed) => {
      parsed.password = "gantry-wrong-password";
    });
    const result = await queueCheck(url, ["noop"], TIMEOUT_MS, openQueue);
    expect(result.status).toBe("fail");
    expect(result.detail).toMatch(/refused the login of user "guest"/);
    expect(result.detail).not.toContain("gantry-wrong-password");
    expect(result.hint).toMatch(/stops at start/);
    expect(result.hint).not.toMatch(/waits for it/);
  });

  it("a port nothing listens on: FAIL with the network error, and run waits for it", async () => {
    const port = await freePort();
    const url = amqpWith((parsed) => {
      parsed.port = String(port);
    });
    const result = await queueCheck(url, ["noop"], TIMEOUT_MS, openQueue);
    expect(result.status).toBe("fail");
    expect(result.detail).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
    expect(result.hint).toMatch(/waits for it/);
  });

  it("a URL the adapter refuses (a misspelt parameter): FAIL saying why, and run stops on it", async () => {
    const url = amqpWith((parsed) => {
      parsed.searchParams.set("prefx", "gantry");
    });
    const result = await queueCheck(url, ["noop"], TIMEOUT_MS, openQueue);
    expect(result.status).toBe("fail");
    expect(result.detail).toMatch(/not "prefx"/);
    expect(result.hint).toMatch(/stops at start/);
  });
});
