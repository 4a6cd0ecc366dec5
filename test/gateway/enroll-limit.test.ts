import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENROLL_POLICY } from "../../gateway/limits/address-limit.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Enrollment buys an agent, and an agent takes every tenant's jobs and reads their inputs:
 * the fleet's enrollment token is worth guessing, and without a limit an address could send
 * guesses as fast as the gateway answered (each one a 401 `unauthorized`). An address that
 * spent its burst of wrong tokens is now refused before its token is compared, whatever it
 * sends, until its bucket refills; another address enrolls as before.
 */
let gw: TestGateway;

beforeAll(async () => {
  // The test is the trusted proxy: X-Forwarded-For names each client.
  gw = await startTestGateway({ models: ["noop"], trustedProxies: ["127.0.0.1/8"] });
});
afterAll(() => gw?.close());

async function enroll(token: string, forwardedFor: string) {
  const response = await fetch(`${gw.url}/internal/v1/agents/enroll`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "x-forwarded-for": forwardedFor,
    },
    body: JSON.stringify({ v: 1 }),
  });
  const body = (await response.json()) as { code?: string; detail?: string };
  return { status: response.status, body, retryAfter: response.headers.get("retry-after") };
}

describe("agent enrollment, per client address", () => {
  it("refuses guesses past the burst before comparing them, the right token too", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < ENROLL_POLICY.burst + 5; i++) {
      statuses.push((await enroll(`gat_wrong_guess_${i}_padding`, "198.51.100.20")).status);
    }
    expect(statuses.slice(0, 5)).toEqual(Array(5).fill(401));
    expect(statuses.slice(-3)).toEqual(Array(3).fill(429));

    const right = await enroll(gw.agentToken, "198.51.100.20");
    expect(right.status).toBe(429);
    expect(right.body.code).toBe("rate_limited");
    expect(right.body.detail).toContain("enrollment");
    expect(Number(right.retryAfter)).toBeGreaterThanOrEqual(1);
  });

  it("lets another address enroll, and never counts a right token against it", async () => {
    for (let i = 0; i < ENROLL_POLICY.burst + 5; i++) {
      expect((await enroll(gw.agentToken, "198.51.100.21")).status).toBe(201);
    }
  });
});
