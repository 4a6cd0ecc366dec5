import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANONYMOUS_POLICY, addressBucket } from "../../gateway/limits/address-limit.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Requests without a valid API key are limited per client address. Behind a
 * trusted proxy (here the test itself, 127.0.0.1) the address is the one the proxy put in
 * X-Forwarded-For; a client's own entries to the left of it count for nothing. Counts of
 * answers only: the bucket refills 5 a second, far less than the burst a test spends.
 */
let proxied: TestGateway;
let direct: TestGateway;

beforeAll(async () => {
  proxied = await startTestGateway({ models: ["noop"], trustedProxies: ["127.0.0.1/8"] });
  direct = await startTestGateway({ models: ["noop"] });
});
afterAll(async () => {
  await proxied?.close();
  await direct?.close();
});

const anonymous = (gw: TestGateway, forwardedFor?: string, key = "gk_wrong") =>
  fetch(`${gw.url}/v1/jobs`, {
    headers: {
      authorization: `Bearer ${key}`,
      ...(forwardedFor ? { "x-forwarded-for": forwardedFor } : {}),
    },
  }).then(async (response) => {
    await response.arrayBuffer();
    return response.status;
  });

/** `n` requests, ten at a time (the bucket refills while they run: spend it fast). */
async function statuses(gw: TestGateway, n: number, forwardedFor?: string) {
  const out: number[] = [];
  for (let i = 0; i < n; i += 10) {
    const wave = Array.from({ length: Math.min(10, n - i) }, () => anonymous(gw, forwardedFor));
    out.push(...(await Promise.all(wave)));
  }
  return out;
}

/**
 * Waves of ten requests from `address(i)` until one is refused (or six bursts' worth went
 * through: never refused). The bucket refills five tokens a second, so on a loaded machine
 * a count of refusals out of a fixed number of requests depends on how fast they ran; what
 * follows a wave with a refusal meets a bucket just emptied.
 */
async function spendUntilLimited(gw: TestGateway, address: (i: number) => string) {
  const out: number[] = [];
  while (!out.includes(429) && out.length < ANONYMOUS_POLICY.burst * 6) {
    const from = out.length;
    out.push(
      ...(await Promise.all(
        Array.from({ length: 10 }, (_, j) => anonymous(gw, address(from + j))),
      )),
    );
  }
  return out;
}

describe("requests without a valid key, per client address", () => {
  it("answers 429 once an address spent its burst of 401s, and only that address", async () => {
    const spent = await spendUntilLimited(proxied, () => "198.51.100.7");
    expect(spent.slice(0, 10).every((s) => s === 401)).toBe(true);
    expect(spent).toContain(429);
    expect(spent.every((s) => s === 401 || s === 429)).toBe(true);
    // Another client behind the same proxy is not limited by the first one.
    expect(await statuses(proxied, 10, "198.51.100.8")).toEqual(Array(10).fill(401));
    // A client naming another address to the left of the proxy's entry gains nothing: its
    // bucket is the one just spent (a few tokens refill while the requests run).
    expect(await statuses(proxied, 10, "203.0.113.1, 198.51.100.7")).toContain(429);
    // A valid key still works from the limited address.
    const ok = await fetch(`${proxied.url}/v1/jobs`, {
      headers: { authorization: `Bearer ${proxied.apiKey}`, "x-forwarded-for": "198.51.100.7" },
    });
    expect(ok.status).toBe(200);
  });

  it("counts an IPv6 client by its /64, not by each of the 2^64 addresses it holds", async () => {
    // One host of a /64 may take any address in it: a bucket per address limited nothing.
    const out = await spendUntilLimited(proxied, (i) => `2001:db8:7:8:${i.toString(16)}::1`);
    expect(out).toContain(429);
    // Spelled in full or compressed, the same /64; the next /64 is another client.
    expect(await statuses(proxied, 10, "2001:0db8:0007:0008:0000:0000:0000:0099")).toContain(429);
    expect(await statuses(proxied, 10, "2001:db8:7:9::1")).toEqual(Array(10).fill(401));
  });

  it("reads every spelling of an IPv6 address into its /64", () => {
    expect(addressBucket("198.51.100.7")).toBe("198.51.100.7");
    expect(addressBucket("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressBucket("2001:0DB8:0000:0000:0001::")).toBe("2001:db8:0:0::/64");
    expect(addressBucket("[2001:db8:0:0:ffff::2]")).toBe("2001:db8:0:0::/64");
    expect(addressBucket("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressBucket("64:ff9b::192.0.2.1")).toBe("64:ff9b:0:0::/64");
    expect(addressBucket("::ffff:192.0.2.1")).toBe("192.0.2.1");
    expect(addressBucket("::1")).toBe("0:0:0:0::/64");
    // What it cannot read counts as itself.
    expect(addressBucket("1:2:3")).toBe("1:2:3");
    expect(addressBucket("1::2::3")).toBe("1::2::3");
  });

  it("ignores X-Forwarded-For from a peer that is not a trusted proxy", async () => {
    expect(await spendUntilLimited(direct, () => "198.51.100.9")).toContain(429);
    // Every forwarded address is the same client: the socket's peer.
    expect(await statuses(direct, 10, "198.51.100.10")).toContain(429);
  });
});
