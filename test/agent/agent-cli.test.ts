import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { type StubGateway, startStubGateway } from "../helpers/stub-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");

interface Run {
  child: ChildProcess;
  stderr: () => string;
  /** Resolves when stderr has shown a line containing `text`. */
  line(text: string): Promise<void>;
  exited: Promise<number | null>;
}

function runAgent(args: string[], env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? "", GANTRY_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  let out = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout?.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    err += chunk;
    for (const waiter of [...waiters]) {
      if (!err.includes(waiter.text)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  return {
    child,
    stderr: () => `${err}${out}`,
    line: (text) =>
      err.includes(text)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiters.push({ text, resolve });
            exited.then(() => reject(new Error(`exited before "${text}":\n${err}${out}`)));
          }),
    exited,
  };
}

describe("gantry-agent CLI", () => {
  it("prints help", async () => {
    const run = runAgent(["--help"]);
    expect(await run.exited).toBe(0);
    expect(run.stderr()).toContain("gantry-agent run [options]");
  });

  it("shows bad settings plainly and exits 2", async () => {
    const run = runAgent(["run", "--slots", "many"], { GANTRY_GATEWAY_URL: "nope" });
    expect(await run.exited).toBe(2);
    const output = run.stderr();
    expect(output).toContain("Invalid agent settings");
    expect(output).toContain('--slots: must be a whole number (got "many")');
    expect(output).toContain("GANTRY_AGENT_TOKEN is required");
    expect(output).not.toMatch(/\n\s+at /); // no stack trace
  });

  it("refuses an unknown flag with exit 2", async () => {
    const run = runAgent(["run", "--gpu", "0"]);
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toContain("--help");
  });
});

describe("gantry-agent run", () => {
  let gateway: StubGateway | undefined;
  let dir: string | undefined;
  let agent: Run | undefined;
  afterEach(async () => {
    if (agent && agent.child.exitCode === null) agent.child.kill("SIGKILL");
    await gateway?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs jobs, and on SIGTERM finishes the one in flight and exits 0", async () => {
    gateway = await startStubGateway();
    dir = mkdtempSync(join(tmpdir(), "gantry-agent-cli-"));
    const queuePath = join(dir, "queue.db");
    const db = await openSqlite(queuePath);
    const queue = createSqlQueue(db, { dialect: "sqlite" });
    try {
      agent = runAgent(["run", "--models", "noop", "--queue", `sqlite:${queuePath}`], {
        GANTRY_GATEWAY_URL: gateway.url,
        GANTRY_AGENT_TOKEN: gateway.token,
        GANTRY_AGENT_ID: "cli-agent",
        GANTRY_EXECUTION_PROVIDERS: "cpu",
      });
      await agent.line("waiting for jobs");
      expect(agent.stderr()).toMatch(/connected to queue sqlite:/);
      expect(agent.stderr()).toMatch(/runner 1\/1 started on cpu \(pid \d+\)/);

      const quick = gateway.addJob({ input: { n: 1 } }).job.id;
      await queue.publish(gateway.message(quick));
      await gateway.waitFor((c) => c.kind === "event" && c.jobId === quick);

      const slow = gateway.addJob({ input: { delay_ms: 1_000 } }).job.id;
      await queue.publish(gateway.message(slow));
      await gateway.waitFor((c) => c.kind === "claim" && c.jobId === slow);
      agent.child.kill("SIGTERM");

      expect(await agent.exited).toBe(0);
      expect(agent.stderr()).toContain("SIGTERM: draining 1 in-flight job(s)");
      expect(gateway.events(quick)).toEqual([
        expect.objectContaining({ type: "succeeded", agent_id: "cli-agent", output: { n: 1 } }),
      ]);
      expect(gateway.events(slow)).toEqual([expect.objectContaining({ type: "succeeded" })]);
      expect(await queue.depth()).toEqual({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
    } finally {
      await queue.close();
      await db.destroy();
    }
  });
});
