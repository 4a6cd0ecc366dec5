/**
 * Checks infra/rabbitmq against what the amqp adapter declares: the policies match the
 * adapter's queue names and dead-letter where the adapter expects, the dead-letter queues
 * are left alone, quorum is the default, and the resource and timeout settings agree with
 * the adapter's defaults. Then imports the definitions into a throwaway vhost of the local
 * broker, so RabbitMQ itself says it accepts them.
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { DEFAULT_CONSUMER_TIMEOUT_MS } from "../../shared/queue/amqp/index.ts";
import { TopologyNames } from "../../shared/queue/amqp/names.ts";

const DIR = join(import.meta.dirname, "../../infra/rabbitmq");

/** Runs rabbitmqctl, which may switch to the rabbitmq user. */
function rabbitmqctl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("rabbitmqctl", args, { timeout: 30_000 });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`rabbitmqctl ${args[0]}: ${stderr}`)),
    );
    child.stdin.end();
  });
}

const Policy = z.object({
  vhost: z.string(),
  name: z.string(),
  pattern: z.string(),
  "apply-to": z.enum(["queues", "quorum_queues", "classic_queues", "exchanges", "all"]),
  priority: z.number().int(),
  definition: z.record(z.string(), z.union([z.string(), z.number()])),
});
type Policy = z.infer<typeof Policy>;

const Definitions = z.object({
  vhosts: z.array(
    z.object({
      name: z.string(),
      metadata: z.object({ default_queue_type: z.string() }).partial().optional(),
    }),
  ),
  users: z.array(z.unknown()),
  permissions: z.array(z.unknown()),
  parameters: z.array(
    z.object({ vhost: z.string(), component: z.string(), name: z.string(), value: z.unknown() }),
  ),
  policies: z.array(Policy),
  exchanges: z.array(z.object({ name: z.string(), vhost: z.string(), type: z.string() })),
});

const definitionsText = readFileSync(join(DIR, "definitions.json"), "utf8");
const definitions = Definitions.parse(JSON.parse(definitionsText));
const names = new TopologyNames("gantry");
const VHOST = "gantry";

/** The one policy RabbitMQ applies to a queue: the highest priority among the matches. */
function policyFor(queue: string): Policy | undefined {
  return definitions.policies
    .filter((policy) => policy.vhost === VHOST && policy["apply-to"] !== "exchanges")
    .filter((policy) => new RegExp(policy.pattern).test(queue))
    .sort((a, b) => b.priority - a.priority)[0];
}

/** rabbitmq.conf as key = value pairs (sysctl format: `##` comments, one setting a line). */
function readConf(): Map<string, string> {
  const settings = new Map<string, string>();
  for (const line of readFileSync(join(DIR, "rabbitmq.conf"), "utf8").split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) continue;
    const match = /^([a-z0-9_.]+)\s*=\s*(.+)$/.exec(trimmed);
    expect(match, `a key = value line: ${trimmed}`).not.toBeNull();
    expect(settings.has(match![1]!), `${match![1]} set once`).toBe(false);
    settings.set(match![1]!, match![2]!);
  }
  return settings;
}

/** "4GB", "500MB", "2GiB" in bytes. */
function bytes(size: string): number {
  const match = /^(\d+)(GB|GiB|MB|MiB)$/.exec(size);
  expect(match, size).not.toBeNull();
  const units: Record<string, number> = { GB: 1e9, GiB: 2 ** 30, MB: 1e6, MiB: 2 ** 20 };
  return Number(match![1]) * units[match![2]!]!;
}

describe("infra/rabbitmq/definitions.json", () => {
  it("makes quorum the vhost's default queue type and carries no credentials", () => {
    expect(definitions.vhosts).toContainEqual(
      expect.objectContaining({
        name: VHOST,
        metadata: expect.objectContaining({ default_queue_type: "quorum" }),
      }),
    );
    expect(definitions.users).toEqual([]);
    expect(definitions.permissions).toEqual([]);
    expect(definitionsText).not.toMatch(/password/i);
  });

  it("dead-letters job queues to the dead exchange with a delivery limit, at least once", () => {
    for (const queue of [names.laneQueue("ocr", "normal"), names.laneQueue("ocr.v2", "high")]) {
      const policy = policyFor(queue);
      expect(policy, queue).toBeDefined();
      const definition = policy!.definition;
      expect(definition["dead-letter-exchange"]).toBe(names.deadExchange);
      expect(definition["delivery-limit"]).toBeGreaterThanOrEqual(1);
      expect(definition["dead-letter-strategy"]).toBe("at-least-once");
      // At-least-once dead-lettering only works with reject-publish overflow.
      expect(definition.overflow).toBe("reject-publish");
    }
  });

  it("returns delayed jobs to the jobs exchange, and leaves dead-letter queues alone", () => {
    const delay = policyFor(names.delayQueue("ocr", 5_000));
    expect(delay?.definition["dead-letter-exchange"]).toBe(names.jobsExchange);
    expect(delay?.definition["dead-letter-strategy"]).toBe("at-least-once");
    expect(delay?.definition["delivery-limit"]).toBeUndefined();
    // A limit or a dead-letter target on the dead-letter queue would drop or loop failed jobs.
    expect(policyFor(names.deadQueue("ocr"))).toBeUndefined();
  });

  it("declares the exchanges the adapter uses, as direct exchanges", () => {
    for (const exchange of definitions.exchanges) {
      expect([names.jobsExchange, names.deadExchange]).toContain(exchange.name);
      expect(exchange).toMatchObject({ vhost: VHOST, type: "direct" });
    }
  });

  // scripts/test-prerequisites.sh (the start of `npm test`) makes sure rabbitmqctl reaches
  // the broker, so a failing rabbitmqctl fails this test rather than skipping it.
  it("is accepted by RabbitMQ (imported into a throwaway vhost)", async () => {
    const vhost = `gantry-definitions-${crypto.randomUUID().slice(0, 8)}`;
    // The same definitions under another vhost name, without cluster-wide parameters.
    const local = JSON.parse(definitionsText) as {
      vhosts: Array<{ name: string }>;
      parameters: Array<{ vhost: string }>;
      policies: Array<{ vhost: string }>;
      exchanges: Array<{ vhost: string }>;
      global_parameters?: unknown[];
    };
    for (const entry of local.vhosts) entry.name = vhost;
    for (const entry of [...local.parameters, ...local.policies, ...local.exchanges])
      entry.vhost = vhost;
    local.global_parameters = [];
    // rabbitmqctl reads the file as the rabbitmq user (RabbitMQ 3.10 cannot read stdin).
    const dir = mkdtempSync(join(tmpdir(), "gantry-rabbitmq-"));
    chmodSync(dir, 0o755);
    const file = join(dir, "definitions.json");
    writeFileSync(file, JSON.stringify(local), { mode: 0o644 });
    onTestFinished(async () => {
      rmSync(dir, { recursive: true, force: true });
      await rabbitmqctl(["delete_vhost", vhost]).catch(() => {});
    });
    await rabbitmqctl(["import_definitions", file]);
    const listed = async () => {
      const stdout = await rabbitmqctl(["list_policies", "-p", vhost, "-q", "--formatter", "json"]);
      return (JSON.parse(stdout) as Array<{ name: string }>).map((policy) => policy.name).sort();
    };
    await expect
      .poll(listed, { timeout: 45_000, interval: 0 })
      .toEqual(definitions.policies.map((policy) => policy.name).sort());
  });
});

describe("infra/rabbitmq/rabbitmq.conf", () => {
  const conf = readConf();

  it("forms a three-node cluster that pauses a minority", () => {
    const nodes = [...conf.keys()].filter((key) =>
      key.startsWith("cluster_formation.classic_config.nodes."),
    );
    expect(nodes).toHaveLength(3);
    expect(conf.get("cluster_formation.peer_discovery_backend")).toBe("classic_config");
    expect(conf.get("cluster_partition_handling")).toBe("pause_minority");
  });

  it("defaults to quorum queues and loads the definitions at boot", () => {
    expect(conf.get("default_queue_type")).toBe("quorum");
    expect(conf.get("definitions.import_backend")).toBe("local_filesystem");
    expect(conf.get("definitions.local.path")).toBe("/etc/rabbitmq/definitions.json");
  });

  it("sizes the memory watermark and the disk free limit for a small host", () => {
    const watermark = Number(conf.get("vm_memory_high_watermark.relative"));
    expect(watermark).toBeGreaterThanOrEqual(0.4);
    expect(watermark).toBeLessThanOrEqual(0.7);
    const disk = bytes(conf.get("disk_free_limit.absolute") ?? "");
    expect(disk).toBeGreaterThanOrEqual(2e9);
    expect(disk).toBeLessThanOrEqual(16e9);
  });

  it("keeps consumer_timeout in step with the adapter, and heartbeats on", () => {
    expect(Number(conf.get("consumer_timeout"))).toBe(DEFAULT_CONSUMER_TIMEOUT_MS);
    const heartbeat = Number(conf.get("heartbeat"));
    expect(heartbeat).toBeGreaterThan(0);
    expect(heartbeat).toBeLessThanOrEqual(60);
  });

  it("enables the plugins whose settings it uses", () => {
    const plugins = readFileSync(join(DIR, "enabled_plugins"), "utf8");
    expect(plugins.trim()).toMatch(/^\[[a-z_,\s]*\]\.$/);
    if ([...conf.keys()].some((key) => key.startsWith("management.")))
      expect(plugins).toContain("rabbitmq_management");
    if ([...conf.keys()].some((key) => key.startsWith("prometheus.")))
      expect(plugins).toContain("rabbitmq_prometheus");
  });
});
