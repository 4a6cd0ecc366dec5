import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readSettings } from "../../cli/settings.ts";
import { webhookPolicyNote } from "../../cli/webhook-note.ts";
import { readWorkerSettings } from "../../gateway/runtime/workers/settings.ts";
import { checkWebhookUrl } from "../../gateway/webhooks/url-policy.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import type { R2BucketLike } from "../../shared/blob/r2.ts";
import { randomToken } from "../../shared/ids.ts";
import { logFormatFor } from "../../shared/log.ts";
import { allowsAddress, allowsHost, parseAllowList } from "../../shared/net/allow-list.ts";
import {
  createSafeWebhookFetch,
  ForbiddenAddressError,
  type ResolvedAddress,
} from "../../shared/net/safe-fetch.ts";

/**
 * The operator's settings: the allow-lists (GANTRY_WEBHOOK_ALLOW,
 * GANTRY_INPUT_URL_ALLOW), the queue bounds (GANTRY_MAX_QUEUE_DEPTH[_BY_MODEL]) on the Node
 * gateway and on Workers, and GANTRY_LOG_FORMAT. The spawned `gantry gateway` test
 * (cli-gateway-settings.test.ts) shows them working end to end.
 */

describe("allow-lists", () => {
  it("matches names, *.suffixes, addresses and CIDR ranges in any spelling", () => {
    const list = parseAllowList(
      "hooks.corp.example, *.svc.corp.example,10.0.0.0/8,fd00::/8,192.0.2.7",
    );
    expect(allowsHost(list, "HOOKS.corp.example.")).toBe(true);
    expect(allowsHost(list, "a.svc.corp.example")).toBe(true);
    expect(allowsHost(list, "svc.corp.example")).toBe(false);
    expect(allowsHost(list, "evil-hooks.corp.example")).toBe(false);
    expect(allowsHost(list, "167772161")).toBe(true); // 10.0.0.1 in decimal
    expect(allowsHost(list, "[fd00::1]")).toBe(true);
    expect(allowsAddress(list, "::ffff:10.9.9.9")).toBe(true);
    expect(allowsAddress(list, "192.0.2.7")).toBe(true);
    expect(allowsAddress(list, "192.0.2.8")).toBe(false);
    expect(allowsAddress(list, "11.0.0.1")).toBe(false);
  });

  it("refuses entries that are neither names nor ranges", () => {
    for (const bad of ["http://x.example", "10.0.0.0/33", "a b", "x.example/8", "-x.example"]) {
      expect(() => parseAllowList(bad), bad).toThrow();
    }
    expect(() => readSettings({ GANTRY_WEBHOOK_ALLOW: "10.0.0.0/40" })).toThrow(
      /GANTRY_WEBHOOK_ALLOW/,
    );
    expect(() => parseAgentConfig(agentEnv({ GANTRY_INPUT_URL_ALLOW: "a b" }))).toThrow(
      /GANTRY_INPUT_URL_ALLOW/,
    );
  });

  it("lets listed webhook hosts through at submission, over http too, never metadata", () => {
    const allow = parseAllowList("127.0.0.1,hooks.corp.internal,10.0.0.0/8");
    const policy = { allowInsecure: false, allow };
    for (const url of [
      "http://127.0.0.1:8080/hook",
      "http://hooks.corp.internal/hook",
      "https://10.1.2.3/hook",
      "http://[::ffff:10.1.2.3]/hook",
    ]) {
      expect(checkWebhookUrl(url, policy).ok, url).toBe(true);
    }
    for (const url of [
      "http://localhost/hook",
      "http://127.0.0.2/hook",
      "http://example.com/hook",
      "https://192.168.1.1/hook",
      "http://169.254.169.254/",
    ]) {
      expect(checkWebhookUrl(url, policy).ok, url).toBe(false);
    }
    expect(checkWebhookUrl("http://127.0.0.1:8080/hook", { allowInsecure: false }).ok).toBe(false);
  });
});

describe("allow-list at connect time (webhooks)", () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  const LOOPBACK: ResolvedAddress = { address: "127.0.0.1", family: 4 };
  const resolve = async (name: string): Promise<ResolvedAddress[]> =>
    name === "meta.corp.example" ? [{ address: "169.254.169.254", family: 4 }] : [LOOPBACK];

  beforeAll(async () => {
    server = createServer((_req, res) => res.writeHead(204).end());
    server.on("connection", () => connections++);
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((done) => server.close(done)));
  beforeEach(() => {
    connections = 0;
  });

  const refusal = async (promise: Promise<Response>) => {
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    return error instanceof Error && error.cause instanceof ForbiddenAddressError;
  };

  it("reaches a listed name or range, and refuses an unlisted name resolving to the same address", async () => {
    const safeFetch = createSafeWebhookFetch({
      allowPrivate: false,
      allow: parseAllowList("hooks.corp.example,meta.corp.example"),
      resolve,
    });
    expect((await safeFetch(`http://hooks.corp.example:${port}/hook`)).status).toBe(204);
    expect(await refusal(safeFetch(`http://other.corp.example:${port}/hook`))).toBe(true);
    expect(await refusal(safeFetch("http://meta.corp.example/"))).toBe(true);
    expect(connections).toBe(1);
    const byRange = createSafeWebhookFetch({
      allowPrivate: false,
      allow: parseAllowList("127.0.0.0/8"),
      resolve,
    });
    expect((await byRange(`http://any.corp.example:${port}/hook`)).status).toBe(204);
    expect((await byRange(`http://127.0.0.1:${port}/hook`)).status).toBe(204);
  });
});

describe("queue bounds", () => {
  it("reach the Node gateway's config from GANTRY_MAX_QUEUE_DEPTH[_BY_MODEL]", () => {
    const settings = readSettings({
      GANTRY_MODELS: "ocr,noop",
      GANTRY_MAX_QUEUE_DEPTH: "250",
      GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "ocr=500, noop=100000",
    });
    expect(settings.maxQueueDepth).toBe(250);
    expect(settings.queueBounds).toEqual({ ocr: 500, noop: 100_000 });
    expect(readSettings({}).maxQueueDepth).toBe(10_000);
    expect(() => readSettings({ GANTRY_MAX_QUEUE_DEPTH: "0" })).toThrow(/GANTRY_MAX_QUEUE_DEPTH/);
    expect(() => readSettings({ GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "ocr:5" })).toThrow(
      /GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "ocr:5" is not model=bound/,
    );
    expect(() =>
      readSettings({ GANTRY_MODELS: "noop", GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "ocr=5" }),
    ).toThrow(/not a served model/);
  });

  it("reach the Workers gateway's config from the same vars", () => {
    const r2: R2BucketLike = {
      head: async () => null,
      get: async () => null,
      put: async () => null,
      delete: async () => {},
    };
    const env = {
      GANTRY_AGENT_TOKEN: randomToken(32),
      GANTRY_BLOB_SECRET: randomToken(32),
      BLOBS: r2,
      GANTRY_MODELS: "ocr,noop",
    };
    const url = "https://gantry.example.com";
    const settings = readWorkerSettings(
      {
        ...env,
        GANTRY_MAX_QUEUE_DEPTH: 50,
        GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "noop=7",
        GANTRY_WEBHOOK_ALLOW: "hooks.corp.example",
        GANTRY_INPUT_URL_ALLOW: "10.0.0.0/8",
        GANTRY_CORS_ORIGINS: "https://app.example, http://localhost:5173",
      },
      url,
    );
    expect(settings.config).toMatchObject({
      maxQueueDepth: 50,
      queueBounds: { noop: 7 },
      webhookAllow: ["hooks.corp.example"],
      inputUrlAllow: ["10.0.0.0/8"],
      corsOrigins: ["https://app.example", "http://localhost:5173"],
    });
    expect(readWorkerSettings(env, url).config.corsOrigins).toEqual([]);
    expect(readWorkerSettings(env, url).config.maxQueueDepth).toBe(10_000);
    expect(() => readWorkerSettings({ ...env, GANTRY_MAX_QUEUE_DEPTH: "lots" }, url)).toThrow(
      /GANTRY_MAX_QUEUE_DEPTH: must be a whole number/,
    );
    expect(() =>
      readWorkerSettings({ ...env, GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "yolo=3" }, url),
    ).toThrow(/GANTRY_MAX_QUEUE_DEPTH_BY_MODEL/);
  });
});

describe("browser origins (GANTRY_CORS_ORIGINS)", () => {
  it("takes origins or *, and refuses anything with a path, a query or another scheme", () => {
    expect(readSettings({ GANTRY_CORS_ORIGINS: "https://app.example,*" }).corsOrigins).toEqual([
      "https://app.example",
      "*",
    ]);
    expect(readSettings({}).corsOrigins).toEqual([]);
    for (const bad of [
      "https://app.example/",
      "https://app.example/x",
      "app.example",
      "ftp://a.example",
      "https://a.example?x=1",
    ]) {
      expect(() => readSettings({ GANTRY_CORS_ORIGINS: bad }), bad).toThrow(
        /GANTRY_CORS_ORIGINS: .* is no origin/,
      );
    }
  });
});

describe("log format and the banner's webhook line", () => {
  it("is pretty in a terminal and JSON elsewhere, unless GANTRY_LOG_FORMAT says", () => {
    expect(logFormatFor(null, true)).toBe("pretty");
    expect(logFormatFor(null, false)).toBe("json");
    expect(logFormatFor("json", true)).toBe("json");
    expect(logFormatFor("pretty", false)).toBe("pretty");
    expect(readSettings({ GANTRY_LOG_FORMAT: "json" }).logFormat).toBe("json");
    expect(() => readSettings({ GANTRY_LOG_FORMAT: "yaml" })).toThrow(/GANTRY_LOG_FORMAT/);
  });

  it("says what each command does with http and loopback receivers", () => {
    expect(webhookPolicyNote("start", [])).toMatch(/allowed \(embedded mode/);
    expect(webhookPolicyNote("gateway", [])).toMatch(/refused/);
    expect(webhookPolicyNote("gateway", ["10.0.0.0/8", "hooks.corp.example"])).toBe(
      "https to public addresses, and http(s) to GANTRY_WEBHOOK_ALLOW: 10.0.0.0/8, hooks.corp.example",
    );
  });
});

function agentEnv(extra: Record<string, string>) {
  return {
    GANTRY_GATEWAY_URL: "http://127.0.0.1:8787",
    GANTRY_QUEUE_URL: "sqlite:./x.db",
    GANTRY_AGENT_TOKEN: "t".repeat(16),
    ...extra,
  };
}
