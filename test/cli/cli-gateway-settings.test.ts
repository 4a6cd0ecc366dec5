import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import { startReceiver } from "../helpers/webhook-receiver.ts";

/**
 * `gantry gateway` as an operator runs it: a process with settings in its environment.
 * Its banner says what it does with webhooks, GANTRY_WEBHOOK_ALLOW lets an internal
 * receiver on 127.0.0.1 through (and nothing else), GANTRY_MAX_QUEUE_DEPTH_BY_MODEL bounds a
 * model's queue, and the logs are JSON lines through a pipe and readable lines in a terminal
 * (a pseudo-terminal made by util-linux `script`).
 */

const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const BANNER_END = "Ctrl-C stops everything";

interface Gateway {
  child: ChildProcess;
  output: () => string;
  url: string;
  key: string;
  /** Resolves once the output holds `text`. */
  waitFor(text: string | RegExp): Promise<void>;
  stop(): Promise<void>;
}

async function startGateway(
  env: Record<string, string>,
  tty = false,
  subcommand: "gateway" | "start" = "gateway",
): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-cli-"));
  const key = `gk_live_${randomToken(24)}`;
  const command = [process.execPath, BIN, subcommand];
  const child = spawn(
    tty ? "script" : (command[0] ?? "node"),
    tty ? ["-qfec", command.join(" "), "/dev/null"] : command.slice(1),
    {
      env: {
        PATH: process.env.PATH ?? "",
        PORT: "0",
        GANTRY_DATA_DIR: dir,
        GANTRY_MODELS: "noop",
        GANTRY_API_KEY: key,
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    },
  );
  let out = "";
  const waiters = new Set<() => void>();
  const collect = (chunk: Buffer) => {
    out += chunk.toString("utf8").replaceAll("\r\n", "\n");
    for (const wake of [...waiters]) wake();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const waitFor = (text: string | RegExp) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        const found = typeof text === "string" ? out.includes(text) : text.test(out);
        if (!found) return;
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
      void exited.then(() => reject(new Error(`exited before ${String(text)}:\n${out}`)));
    });
  await waitFor(BANNER_END);
  const url = /API\s+(http:\/\/\S+)/.exec(out)?.[1] ?? "";
  return {
    child,
    output: () => out,
    url,
    key,
    waitFor,
    async stop() {
      if (child.pid) process.kill(-child.pid, "SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function api(gw: Gateway, path: string, body?: unknown) {
  return fetch(`${gw.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${gw.key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** The banner, exactly as printed: one block between its first and last lines. */
function bannerOf(output: string): string {
  const start = output.indexOf("Gantry is running");
  const end = output.indexOf(BANNER_END);
  return output.slice(start, end);
}

describe("gantry gateway with an allow-list, a queue bound and JSON logs", () => {
  const receiver = startReceiver();
  let hook: string;
  let gw: Gateway;

  beforeAll(async () => {
    hook = await receiver.listen();
    gw = await startGateway({
      GANTRY_WEBHOOK_ALLOW: "127.0.0.1",
      GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: "noop=1",
      GANTRY_LOG_FORMAT: "json",
      // Workers' name for GANTRY_API_KEY: ignored here, and said so.
      GANTRY_BOOTSTRAP_API_KEY: `gk_live_${randomToken(24)}`,
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await receiver.close();
  });

  it("says in its banner that no agent runs here, and how to start one", () => {
    const banner = bannerOf(gw.output());
    expect(banner).toContain(`GANTRY_AGENT_TOKEN=… npx gantry-agent run --gateway ${gw.url}\n`);
    expect(banner).toMatch(/"agentToken" in \S+secrets\.json/);
    expect(banner).toMatch(/take their jobs from this gateway and need no queue URL/);
    // Named, never printed: the token lets any host join the fleet.
    expect(banner).not.toMatch(/gat_[A-Za-z0-9_-]{20}/);
  });

  it("says that a Workers-only setting is ignored, and what it takes instead", () => {
    expect(gw.output()).toContain(
      "gantry: GANTRY_BOOTSTRAP_API_KEY is read by the Workers gateway only, and ignored here: the default tenant's key comes from GANTRY_API_KEY\n",
    );
  });

  it("says in its banner which receivers it allows", () => {
    expect(bannerOf(gw.output())).toMatch(
      /Webhooks\s+https to public addresses, and http\(s\) to GANTRY_WEBHOOK_ALLOW: 127\.0\.0\.1\n/,
    );
  });

  it("delivers to the listed receiver on 127.0.0.1, over http; other local URLs stay refused", async () => {
    for (const url of [hook.replace("127.0.0.1", "localhost"), "http://127.0.0.2:9/hook"]) {
      const refused = await api(gw, "/v1/jobs", { model: "noop", input: {}, webhook: { url } });
      expect(refused.status, url).toBe(422);
      expect(await refused.json()).toMatchObject({ code: "webhook_url_not_allowed" });
    }
    const created = await api(gw, "/v1/jobs", {
      model: "noop",
      input: {},
      webhook: { url: hook, events: ["job.canceled"] },
    });
    expect(created.status).toBe(202);
    const job = (await created.json()) as { id: string };
    // The queue bound of noop is 1: the next job is refused until this one leaves the queue.
    const full = await api(gw, "/v1/jobs", { model: "noop", input: {} });
    expect(full.status).toBe(503);
    expect(await full.json()).toMatchObject({ code: "queue_full" });
    expect((await api(gw, `/v1/jobs/${job.id}/cancel`, {})).status).toBe(200);
    const delivery = await receiver.next();
    expect(JSON.parse(delivery.body)).toMatchObject({ type: "job.canceled", data: { id: job.id } });
  });

  it("logs JSON lines when its output is not a terminal", async () => {
    await gw.waitFor(/"msg":"job changed"/);
    const logLines = gw
      .output()
      .split("\n")
      .filter((line) => line.includes("job changed"));
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(() => JSON.parse(line)).not.toThrow();
  });

  // onnxruntime is tens of MiB resident in every process that loads it, and a gateway never
  // runs a model. (sharp does load here: a fresh data directory gets its example image.)
  // Read from the libraries the process has mapped (Linux).
  it.runIf(process.platform === "linux")("does not load onnxruntime, the agent's", () => {
    const maps = readFileSync(`/proc/${gw.child.pid}/maps`, "utf8");
    expect(maps).toContain("libc.so");
    expect(maps).not.toMatch(/onnxruntime/);
  });
});

describe("gantry gateway in a terminal, without an allow-list", () => {
  let gw: Gateway;

  beforeAll(async () => {
    gw = await startGateway({}, true);
  }, 60_000);
  afterAll(() => gw?.stop());

  it("says http and loopback receivers are refused, and refuses them", async () => {
    const banner = bannerOf(gw.output());
    expect(banner).not.toContain("embedded mode");
    expect(banner).toMatch(/Webhooks\s+https to public addresses only; http:\/\/, loopback/);
    const refused = await api(gw, "/v1/jobs", {
      model: "noop",
      input: {},
      webhook: { url: "http://127.0.0.1:8080/hook" },
    });
    expect(await refused.json()).toMatchObject({ status: 422, code: "webhook_url_not_allowed" });
  });

  it("prints readable log lines, not JSON, around a banner printed whole", async () => {
    expect((await api(gw, "/v1/jobs", { model: "noop", input: {} })).status).toBe(202);
    await gw.waitFor("job changed");
    const lines = gw.output().split("\n");
    const logged = lines.filter((line) => line.includes("job changed"));
    expect(logged.length).toBeGreaterThan(0);
    for (const line of logged) {
      expect(line).toMatch(/INFO/);
      expect(line.trim().startsWith("{")).toBe(false);
    }
    expect(lines.some((line) => line.trim().startsWith('{"level"'))).toBe(false);
    const banner = bannerOf(gw.output());
    for (const line of banner.split("\n")) expect(line).not.toMatch(/INFO|"level"/);
  });
});

/** A port that was free a moment ago. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return typeof address === "object" && address ? address.port : 0;
}

/** The sample lines of a Prometheus text, by series name. */
const seriesOf = (text: string) =>
  new Set(text.split("\n").flatMap((line) => /^(gantry_[a-z_]+)/.exec(line)?.[1] ?? []));

describe.each(["gateway", "start"] as const)("gantry %s with GANTRY_METRICS_PORT", (command) => {
  let gw: Gateway;
  let metricsPort: number;

  beforeAll(async () => {
    metricsPort = await freePort();
    gw = await startGateway({ GANTRY_METRICS_PORT: String(metricsPort) }, false, command);
  }, 60_000);
  afterAll(() => gw?.stop());

  it("serves /metrics on that port, on loopback, and answers /metrics 404 on the public port", async () => {
    expect(gw.output()).toContain(`Prometheus metrics on http://127.0.0.1:${metricsPort}/metrics`);
    const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(scrape.status).toBe(200);
    const text = await scrape.text();
    expect(seriesOf(text)).toContain("gantry_gateway_jobs");
    expect(text).toContain("# TYPE gantry_gateway_submit_phase_seconds histogram");
    // `gantry start`'s agent shares the listener (one GANTRY_METRICS_PORT per process).
    if (command === "start")
      await expect
        .poll(async () =>
          seriesOf(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()),
        )
        .toContain("gantry_agent_slots");
    expect((await fetch(`http://127.0.0.1:${metricsPort}/v1/jobs`)).status).toBe(404);

    // The public port: no metrics, with or without a key, and nothing of them in the answer.
    const keyed: Record<string, string>[] = [{}, { authorization: `Bearer ${gw.key}` }];
    for (const headers of keyed) {
      const open = await fetch(`${gw.url}/metrics`, { headers });
      expect(open.status).toBe(404);
      expect(await open.text()).not.toContain("gantry_gateway");
    }
  });
});

describe("gantry gateway on a port already taken", () => {
  it("says which address it cannot listen on, in one line with no stack, and exits 2", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const address = taken.address();
    const port = typeof address === "object" && address ? address.port : 0;
    const dir = mkdtempSync(join(tmpdir(), "gantry-cli-"));
    try {
      const child = spawn(process.execPath, [BIN, "gateway"], {
        env: { PATH: process.env.PATH ?? "", PORT: String(port), GANTRY_DATA_DIR: dir },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8");
      });
      child.stderr.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8");
      });
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      expect(code, out).toBe(2);
      expect(out).toContain(`cannot listen on 127.0.0.1:${port} (EADDRINUSE): set PORT`);
      expect(out).not.toContain("    at ");
    } finally {
      await new Promise((resolve) => taken.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
