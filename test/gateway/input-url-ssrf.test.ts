import { readFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import { type AddressInfo, createServer, type Server } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { downloadInputs, type JobFailure } from "../../gpu-agent/transfer/files.ts";
import type { InputUrlOptions } from "../../gpu-agent/transfer/input-url.ts";
import { parseAllowList } from "../../shared/net/allow-list.ts";
import { checkInputUrl } from "../../shared/net/destination-policy.ts";
import type { ResolvedAddress, Resolver } from "../../shared/net/safe-fetch.ts";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";

/**
 * SSRF through input URLs: the agent fetches a tenant's `input.image` from inside the
 * operator's network. Every refused form is tried against real listeners on 127.0.0.1 and
 * ::1 that count TCP connections: a refusal must leave them at zero. Names resolve through
 * an injected resolver; an https server with a test CA stands in for a public input host.
 */

const TLS = new URL("../fixtures/tls/", import.meta.url);
const CA = readFileSync(new URL("cert.pem", TLS), "utf8");
const LOOPBACK: ResolvedAddress = { address: "127.0.0.1", family: 4 };
const PNG = new Uint8Array(3000).fill(7);

let trap4: Server;
let trap6: Server | null = null;
let connections = 0;
let host: HttpsServer;
let hostPort = 0;
let port4 = 0;
let port6 = 0;

const resolver: Resolver = async (name) => {
  const table: Record<string, ResolvedAddress[]> = {
    "files.example.test": [LOOPBACK],
    "hop.example.test": [LOOPBACK],
    "evil.example.test": [LOOPBACK],
    "mixed.example.test": [{ address: "93.184.216.34", family: 4 }, LOOPBACK],
    "meta.example.test": [{ address: "169.254.169.254", family: 4 }],
  };
  const found = table[name];
  if (!found) throw Object.assign(new Error(`no such name ${name}`), { code: "ENOTFOUND" });
  return found;
};

/** The operator listed the test's input host: it stands for a public one. */
const allowed = (extra = ""): InputUrlOptions => ({
  allow: ["files.example.test", "hop.example.test", ...extra.split(",").filter(Boolean)],
  resolve: resolver,
  ca: CA,
});
const strict: InputUrlOptions = { allow: [], resolve: resolver, ca: CA };

function listen(server: Server | HttpsServer, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, address, () => resolve((server.address() as AddressInfo).port));
  });
}

beforeAll(async () => {
  trap4 = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  port4 = await listen(trap4, "127.0.0.1");
  const v6 = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  port6 = await listen(v6, "::1").catch(() => 0);
  trap6 = port6 ? v6 : null;
  host = createHttpsServer(
    { cert: CA, key: readFileSync(new URL("key.pem", TLS), "utf8") },
    (request, response) => {
      const path = request.url ?? "/";
      const redirect = (location: string) => response.writeHead(302, { location }).end();
      if (path === "/cat.png") response.writeHead(200, { "content-type": "image/png" }).end(PNG);
      else if (path === "/to-loopback") redirect(`https://127.0.0.1:${port4}/cat.png`);
      else if (path === "/to-decimal") redirect(`https://2130706433:${port4}/cat.png`);
      else if (path === "/to-evil") redirect(`https://evil.example.test:${port4}/cat.png`);
      else if (path === "/to-metadata") redirect("http://169.254.169.254/latest/meta-data/");
      else if (path === "/to-http") redirect(`http://files.example.test:${hostPort}/cat.png`);
      else if (path.startsWith("/hops/")) {
        const left = Number(path.slice("/hops/".length));
        redirect(left > 0 ? `https://hop.example.test:${hostPort}/hops/${left - 1}` : "/cat.png");
      } else if (path === "/big") response.writeHead(200).end(new Uint8Array(10_000));
      else if (path === "/slow")
        response.writeHead(200); // never ends
      else response.writeHead(404).end();
    },
  );
  hostPort = await listen(host, "127.0.0.1");
});

afterAll(async () => {
  host.closeAllConnections();
  await new Promise((resolve) => host.close(resolve));
  await new Promise((resolve) => trap4.close(resolve));
  if (trap6) await new Promise((resolve) => trap6?.close(resolve));
});

beforeEach(() => {
  connections = 0;
});

const tenantUrl = (url: string) => ({ image: { url, content_type: null, source: "url" as const } });

async function failure(url: string, inputUrls: InputUrlOptions, maxInputBytes = 1 << 20) {
  const error: unknown = await downloadInputs(tenantUrl(url), {
    maxInputBytes,
    inputUrls,
    timeoutMs: 5_000,
  }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error, url).toBeTruthy();
  return (error as JobFailure).error;
}

/** Literal forms: refused by the URL policy at submission and by the agent. */
const literal = () => [
  `https://127.0.0.1:${port4}/cat.png`,
  `https://127.0.0.2:${port4}/cat.png`,
  `https://2130706433:${port4}/cat.png`,
  `https://0x7f000001:${port4}/cat.png`,
  `https://0177.0.0.1:${port4}/cat.png`,
  `https://127.1:${port4}/cat.png`,
  `https://localhost:${port4}/cat.png`,
  `https://LOCALHOST.:${port4}/cat.png`,
  `https://[::ffff:127.0.0.1]:${port4}/cat.png`,
  `https://[::ffff:7f00:1]:${port4}/cat.png`,
  `https://[::1]:${port6 || port4}/cat.png`,
  `https://[0:0:0:0:0:0:0:1]:${port6 || port4}/cat.png`,
  `https://10.0.0.1:${port4}/`,
  `https://192.168.1.1:${port4}/`,
  `https://172.16.0.1:${port4}/`,
  `https://100.64.0.1:${port4}/`,
  `https://169.254.1.1:${port4}/`,
  "https://169.254.169.254/latest/meta-data/",
  "https://[fd00:ec2::254]/latest/meta-data/",
  "https://metadata.google.internal/computeMetadata/v1/",
  `https://[fe80::1]:${port4}/`,
  `https://[fd12:3456::1]:${port4}/`,
  `https://0.0.0.0:${port4}/`,
  `https://intranet:${port4}/`,
  `https://db.internal:${port4}/`,
];

describe("agent: tenants' input URLs", () => {
  it("refuses literal loopback, private, link-local, metadata and IPv6 forms without connecting", async () => {
    for (const url of literal()) {
      const error = await failure(url, strict);
      expect(error, url).toMatchObject({ type: "permanent", code: "input_url_not_allowed" });
    }
    expect(connections).toBe(0);
  });

  it("refuses a name that resolves to loopback (or to metadata, even when listed), at connect time", async () => {
    for (const name of ["evil.example.test", "mixed.example.test"]) {
      expect(checkInputUrl(`https://${name}:${port4}/`, parseAllowList("")).ok).toBe(true);
      const error = await failure(`https://${name}:${port4}/cat.png`, strict);
      expect(error, name).toMatchObject({ type: "permanent", code: "input_url_not_allowed" });
    }
    const meta = await failure("https://meta.example.test/", allowed("meta.example.test"));
    expect(meta.code).toBe("input_url_not_allowed");
    expect(connections).toBe(0);
  });

  it("fetches an allowed URL through the test resolver", async () => {
    const files = await downloadInputs(
      tenantUrl(`https://files.example.test:${hostPort}/cat.png`),
      {
        maxInputBytes: 1 << 20,
        inputUrls: allowed(),
      },
    );
    expect(files.image?.contentType).toBe("image/png");
    expect(files.image?.bytes).toEqual(PNG);
  });

  it("checks every redirect hop: internal targets, http, and too many hops are refused", async () => {
    for (const path of ["/to-loopback", "/to-decimal", "/to-evil", "/to-metadata", "/to-http"]) {
      const error = await failure(`https://files.example.test:${hostPort}${path}`, allowed());
      expect(error, path).toMatchObject({ type: "permanent", code: "input_url_not_allowed" });
    }
    expect(connections).toBe(0);
    const three = await downloadInputs(tenantUrl(`https://files.example.test:${hostPort}/hops/2`), {
      maxInputBytes: 1 << 20,
      inputUrls: allowed(),
    });
    expect(three.image?.bytes.byteLength).toBe(PNG.byteLength);
    const four = await failure(`https://files.example.test:${hostPort}/hops/3`, allowed());
    expect(four.code).toBe("input_url_not_allowed");
  });

  it("says the URL is not allowed or not reachable, with no network detail", async () => {
    const refused = await failure(`https://evil.example.test:${port4}/`, strict);
    const reset = await failure(`https://reset.example.test:${port4}/`, {
      allow: ["reset.example.test"],
      resolve: async () => [LOOPBACK],
    });
    expect(connections).toBe(1); // the listed host was reached, and reset the connection
    expect(reset).toMatchObject({ type: "transient", code: "input_unavailable" });
    const unknown = await failure("https://nowhere.example.test/", strict);
    for (const error of [refused, reset, unknown]) {
      expect(error.message).toMatch(/^input "image"/);
      expect(error.message).not.toMatch(/127\.0\.0\.1|ECONN|resolve|TLS|socket|ENOTFOUND/i);
    }
    expect(refused.message).toMatch(/not allowed/);
    expect(reset.message).toMatch(/not reachable/);
  });

  it("bounds the size and the time of a download", async () => {
    const big = await failure(`https://files.example.test:${hostPort}/big`, allowed(), 1000);
    expect(big).toMatchObject({ type: "permanent", code: "input_too_large" });
    const slow = await downloadInputs(tenantUrl(`https://files.example.test:${hostPort}/slow`), {
      maxInputBytes: 1000,
      inputUrls: allowed(),
      timeoutMs: 100,
    }).catch((e: JobFailure) => e.error);
    expect(slow).toMatchObject({ type: "transient", code: "input_unavailable" });
    expect((slow as { message: string }).message).toMatch(/did not answer in time/);
  });

  it("lets an operator-listed range through (GANTRY_INPUT_URL_ALLOW)", async () => {
    const files = await downloadInputs(tenantUrl(`https://127.0.0.1:${hostPort}/cat.png`), {
      maxInputBytes: 1 << 20,
      inputUrls: { allow: ["127.0.0.0/8"], ca: CA },
    });
    expect(files.image?.bytes.byteLength).toBe(PNG.byteLength);
  });
});

describe("gateway: input URLs at submission", () => {
  let gw: InProcessGateway;
  let key: string;
  let listed: InProcessGateway;
  let listedKey: string;

  beforeAll(async () => {
    gw = await startInProcessGateway({ models: ["noop"] });
    key = await gw.addTenant({ id: "ten_ssrf_in", plan: "pro" });
    listed = await startInProcessGateway({ models: ["noop"], inputUrlAllow: ["10.0.0.0/8"] });
    listedKey = await listed.addTenant({ id: "ten_ssrf_listed", plan: "pro" });
  });
  afterAll(async () => {
    await gw.close();
    await listed.close();
  });

  const submit = (on: InProcessGateway, apiKey: string, image: string) =>
    on.request("/v1/jobs", {
      method: "POST",
      key: apiKey,
      json: { model: "noop", input: { image } },
    });

  it("refuses literal internal forms with 422 input_url_not_allowed", async () => {
    for (const url of literal()) {
      const problem = await problemOf(await submit(gw, key, url));
      expect(problem, url).toMatchObject({ status: 422, code: "input_url_not_allowed" });
      expect(problem.errors).toEqual([{ path: "input.image", message: expect.any(String) }]);
    }
    expect(connections).toBe(0);
  });

  it("accepts public URLs, and listed ranges when the operator says so", async () => {
    expect((await submit(gw, key, "https://images.example.com/cat.png")).status).toBe(202);
    expect((await submit(gw, key, "https://10.1.2.3/cat.png")).status).toBe(422);
    expect((await submit(listed, listedKey, "https://10.1.2.3/cat.png")).status).toBe(202);
    expect((await submit(listed, listedKey, "https://169.254.169.254/")).status).toBe(422);
  });
});
