/**
 * SSRF, the first layer: a tenant's webhook URL is checked at submission against the
 * operator's network (literal addresses in every spelling, loopback and internal names),
 * and the address ranges both layers refuse. The connect-time layer is `ssrf.test.ts`.
 */
import { describe, expect, it } from "vitest";
import { assertWebhookUrlAllowed, checkWebhookUrl } from "../../gateway/webhooks/url-policy.ts";
import { HttpProblem } from "../../shared/errors.ts";
import { classifyAddress, forbiddenAddress } from "../../shared/net/ip-ranges.ts";

const STRICT = { allowInsecure: false };
const EMBEDDED = { allowInsecure: true };

describe("webhook URL policy", () => {
  const refusedEverywhere = [
    "https://169.254.169.254/latest/meta-data/",
    "https://2852039166/latest/meta-data/", // 169.254.169.254 in decimal
    "https://0xa9fea9fe/", // and in hex
    "https://[fd00:ec2::254]/",
    "https://[::ffff:169.254.169.254]/",
    "https://metadata.google.internal/computeMetadata/v1/",
    "https://metadata/",
    "https://user:secret@example.com/hook",
    "https://:secret@example.com/hook",
    "https://example.com:25/hook",
    "https://example.com:0/hook",
    "ftp://example.com/hook",
    "not a url",
  ];

  const refusedOutsideEmbedded = [
    "http://example.com/hook",
    // Literal IPv4, then the spellings WHATWG URL parsing turns into 127.0.0.1.
    "https://127.0.0.1/hook",
    "https://127.255.255.254/hook",
    "https://2130706433/hook",
    "https://0x7f000001/hook",
    "https://0177.0.0.1/hook",
    "https://017700000001/hook",
    "https://127.1/hook",
    "https://0x7f.1/hook",
    "https://127.0.0.1./hook",
    "https://10.0.0.1/hook",
    "https://167772161/hook", // 10.0.0.1
    "https://172.16.0.1/hook",
    "https://172.31.255.255/hook",
    "https://192.168.1.1/hook",
    "https://0xc0a80101/hook", // 192.168.1.1
    "https://169.254.1.1/hook",
    "https://100.64.0.1/hook",
    "https://0.0.0.0/hook",
    "https://0/hook",
    "https://224.0.0.1/hook",
    "https://255.255.255.255/hook",
    "https://240.0.0.1/hook",
    // IPv6: loopback, mapped and compatible forms of private IPv4, NAT64, 6to4, ULA, link-local.
    "https://[::1]/hook",
    "https://[0:0:0:0:0:0:0:1]/hook",
    "https://[::]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:7f00:1]/hook",
    "https://[0:0:0:0:0:ffff:7f00:1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[::ffff:8.8.8.8]/hook", // mapped, even of a public address: no receiver needs it
    "https://[::127.0.0.1]/hook",
    "https://[::ffff:0:7f00:1]/hook",
    "https://[64:ff9b::127.0.0.1]/hook",
    "https://[64:ff9b::a00:1]/hook",
    "https://[2002:7f00:1::1]/hook",
    "https://[2002:c0a8:101::1]/hook",
    "https://[fc00::1]/hook",
    "https://[fd12:3456:789a::1]/hook",
    "https://[fe80::1]/hook",
    "https://[febf::1]/hook",
    "https://[ff02::1]/hook",
    // Names for loopback and internal hosts.
    "https://localhost/hook",
    "https://LOCALHOST/hook",
    "https://localhost./hook",
    "https://api.localhost/hook",
    "https://intranet/hook",
    "https://db.internal/hook",
    "https://printer.local/hook",
  ];

  const allowed = [
    "https://example.com/hook",
    "https://hooks.example.com:8443/gantry?x=1",
    "https://example.com./hook",
    "https://8.8.8.8/hook",
    "https://[2606:4700:4700::1111]/hook",
    "https://[64:ff9b::808:808]/hook", // NAT64 of a public address
    "https://172.32.0.1/hook",
  ];

  it.each(refusedOutsideEmbedded)("refuses %s outside embedded mode", (url) => {
    const check = checkWebhookUrl(url, STRICT);
    expect(check.ok, url).toBe(false);
  });

  it.each(refusedEverywhere)("refuses %s even in embedded mode", (url) => {
    expect(checkWebhookUrl(url, STRICT).ok).toBe(false);
    expect(checkWebhookUrl(url, EMBEDDED).ok).toBe(false);
  });

  it.each(allowed)("allows %s", (url) => {
    expect(checkWebhookUrl(url, STRICT)).toMatchObject({ ok: true });
  });

  it("allows http, loopback and private receivers in embedded mode", () => {
    for (const url of [
      "http://127.0.0.1:3000/hook",
      "http://localhost:3000/hook",
      "http://[::1]:3000/hook",
      "http://192.168.1.20/hook",
      "http://receiver:8080/hook",
    ]) {
      expect(checkWebhookUrl(url, EMBEDDED), url).toMatchObject({ ok: true });
    }
  });

  it("says why, in words a client can act on", () => {
    const reason = (url: string) => {
      const check = checkWebhookUrl(url, STRICT);
      return check.ok ? "" : check.reason;
    };
    expect(reason("http://example.com/")).toMatch(/must use https/);
    expect(reason("https://2130706433/")).toMatch(/127\.0\.0\.1.*loopback/);
    expect(reason("https://[::ffff:127.0.0.1]/")).toMatch(/IPv4-mapped.*127\.0\.0\.1.*loopback/);
    expect(reason("https://169.254.169.254/")).toMatch(/cloud metadata/);
    expect(reason("https://u:p@example.com/")).toMatch(/credentials/);
    expect(reason("https://intranet/")).toMatch(/single-label/);
  });

  it("assertWebhookUrlAllowed throws a 422 problem naming webhook.url", () => {
    expect(() => assertWebhookUrlAllowed("https://example.com/hook", STRICT)).not.toThrow();
    let thrown: unknown;
    try {
      assertWebhookUrlAllowed("https://0x7f000001/hook", STRICT);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(HttpProblem);
    expect(thrown).toMatchObject({
      status: 422,
      code: "webhook_url_not_allowed",
      extra: { errors: [{ path: "webhook.url" }] },
    });
  });
});

describe("address ranges", () => {
  it("classifies the forms resolvers return", () => {
    expect(classifyAddress("::ffff:127.0.0.1")?.reason).toMatch(/loopback/);
    expect(classifyAddress("fe80::1%eth0")?.reason).toMatch(/link-local/);
    expect(classifyAddress("fd00::1")?.reason).toMatch(/unique-local/);
    expect(classifyAddress("100.127.255.255")?.reason).toMatch(/carrier-grade NAT/);
    expect(classifyAddress("100.128.0.0")).toBeNull();
    expect(classifyAddress("2001:4860:4860::8888")).toBeNull();
    expect(classifyAddress("example.com")).toBeNull();
  });

  it("lets embedded mode reach private addresses but never cloud metadata", () => {
    expect(forbiddenAddress("127.0.0.1", { allowPrivate: true })).toBeNull();
    expect(forbiddenAddress("10.1.2.3", { allowPrivate: true })).toBeNull();
    expect(forbiddenAddress("169.254.169.254", { allowPrivate: true })?.always).toBe(true);
    expect(forbiddenAddress("fd00:ec2::254", { allowPrivate: true })?.always).toBe(true);
  });
});
