/**
 * infra/systemd: runs install.sh's argument checks, a dry run, and real installs into a
 * temporary root (--prefix, --no-systemctl, --skip-npm) twice to prove it idempotent; then
 * parses the unit file and checks the settings that shutdown and hardening depend on.
 */
import { spawnSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { isWithin, modelCacheDirOf } from "../helpers/model-cache-dir.ts";

const ROOT = join(import.meta.dirname, "../..");
const INSTALL = join(ROOT, "infra/systemd/install.sh");
const UNIT = join(ROOT, "infra/systemd/gantry-agent.service");
const TOKEN = "tok_test_0123456789abcdef";
const SETTINGS = ["--gateway", "https://gantry.example.com", "--queue", "amqp://u:p@rabbit:5672/v"];

const scratch = mkdtempSync(join(tmpdir(), "gantry-systemd-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let rootCount = 0;
const newRoot = () => {
  const dir = join(scratch, `root-${++rootCount}`);
  mkdirSync(dir);
  return dir;
};

/** install.sh with only the GANTRY_* variables given: the caller's environment never leaks in. */
function install(args: string[], env: Record<string, string> = {}) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("GANTRY_")),
  );
  const result = spawnSync("bash", [INSTALL, ...args], {
    env: { ...base, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A checkout with just what the installer copies, so no npm step is needed. */
function fakeSource(): string {
  const dir = join(scratch, `source-${++rootCount}`);
  for (const sub of ["bin", "gpu-agent", "shared/queue"])
    mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, "package.json"), '{"name":"gantry","type":"module"}\n');
  writeFileSync(join(dir, "package-lock.json"), '{"lockfileVersion":3}\n');
  writeFileSync(join(dir, "bin/gantry-agent.js"), "#!/usr/bin/env node\n", { mode: 0o755 });
  writeFileSync(join(dir, "gpu-agent/cli.ts"), "export {};\n");
  writeFileSync(join(dir, "shared/queue/port.ts"), "export {};\n");
  mkdirSync(join(dir, "test"));
  writeFileSync(join(dir, "test/ignored.test.ts"), "export {};\n");
  return dir;
}

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
const listTree = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();

/** The unit's settings: key → every value it is given (EnvironmentFile= may repeat). */
function parseUnit(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      continue;
    }
    const eq = line.indexOf("=");
    expect(eq, `"${line}" is key=value`).toBeGreaterThan(0);
    const key = `${section}.${line.slice(0, eq)}`;
    settings.set(key, [...(settings.get(key) ?? []), line.slice(eq + 1)]);
  }
  return settings;
}

/** systemd time spans as TimeoutStopSec takes them: "90", "90s", "1min 30s". */
function seconds(span: string): number {
  const units: Record<string, number> = { "": 1, s: 1, sec: 1, m: 60, min: 60, h: 3600 };
  let total = 0;
  for (const [, n, unit] of span.matchAll(/(\d+)\s*([a-z]*)/g)) {
    expect(units[unit!], `unit "${unit}"`).toBeDefined();
    total += Number(n) * units[unit!]!;
  }
  return total;
}

describe("install.sh arguments", () => {
  it("refuses to run without the required settings, naming them, and touches nothing", () => {
    const root = newRoot();
    const result = install(["--prefix", root, "--no-systemctl"]);
    expect(result.status).toBe(2);
    for (const name of ["GANTRY_GATEWAY_URL", "GANTRY_AGENT_TOKEN"]) {
      expect(result.stderr).toContain(name);
    }
    // Optional: with the sql queue the agent takes its jobs from the gateway.
    expect(result.stderr).not.toContain("GANTRY_QUEUE_URL");
    expect(result.stderr).toContain("Nothing was changed");
    expect(listTree(root)).toEqual([]);
  });

  it("names only what is missing, whether given as flags or environment", () => {
    const root = newRoot();
    const result = install(["--prefix", root, ...SETTINGS]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("GANTRY_AGENT_TOKEN");
    expect(result.stderr).not.toContain("GANTRY_GATEWAY_URL");
    const fromEnv = install(["--prefix", root], {
      GANTRY_AGENT_TOKEN: TOKEN,
    });
    expect(fromEnv.status).toBe(2);
    expect(fromEnv.stderr).toContain("GANTRY_GATEWAY_URL");
    expect(fromEnv.stderr).not.toContain("GANTRY_AGENT_TOKEN");
    expect(listTree(root)).toEqual([]);
  });

  it("refuses bad values and unknown options before touching anything", () => {
    const root = newRoot();
    const bad = install(["--prefix", root, ...SETTINGS, "--slots", "lots"], {
      GANTRY_AGENT_TOKEN: TOKEN,
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/GANTRY_SLOTS must be a whole number/);
    const spaced = install(["--prefix", root, ...SETTINGS], { GANTRY_AGENT_TOKEN: "has space" });
    expect(spaced.status).toBe(2);
    expect(spaced.stderr).toMatch(/GANTRY_AGENT_TOKEN must not contain whitespace/);
    const unknown = install(["--frobnicate"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option: --frobnicate/);
    expect(listTree(root)).toEqual([]);
  });

  it("explains itself with --help", () => {
    const result = install(["--help"]);
    expect(result.status).toBe(0);
    for (const option of [
      "--gateway",
      "--queue",
      "--token",
      "--prefix",
      "--dry-run",
      "--cpu-only",
      "--skip-npm",
      "--no-systemctl",
    ]) {
      expect(result.stdout).toContain(option);
    }
  });

  it("prints every step on --dry-run and changes nothing", () => {
    const root = newRoot();
    const result = install(["--prefix", root, "--no-systemctl", "--dry-run", ...SETTINGS], {
      GANTRY_AGENT_TOKEN: TOKEN,
    });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    for (const step of [
      "[1/8] Service user",
      "[2/8] Agent files",
      "[3/8] Node dependencies (npm ci --omit=dev)",
      "would run npm ci --omit=dev",
      "[4/8] CUDA 12 provider",
      "would run ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install",
      "[5/8] Cache directory",
      "[6/8] Settings",
      "would write",
      "[7/8] systemd unit",
      "[8/8] Enable and start",
      "nothing was changed",
    ]) {
      expect(result.stdout).toContain(step);
    }
    expect(result.stdout).not.toContain(TOKEN);
    expect(listTree(root)).toEqual([]);
  });
});

describe("install.sh into a temporary root", () => {
  const root = newRoot();
  const source = fakeSource();
  const args = ["--prefix", root, "--source", source, "--no-systemctl", "--skip-npm", ...SETTINGS];
  const at = (path: string) => join(root, path);

  it("installs the agent, its settings and the unit with the right modes", () => {
    const result = install(args, { GANTRY_AGENT_TOKEN: TOKEN });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/Done: \d+ change\(s\)/);

    expect(mode(at("opt/gantry/bin/gantry-agent.js"))).toBe("755");
    expect(mode(at("opt/gantry/package.json"))).toBe("644");
    expect(mode(at("opt/gantry/shared/queue/port.ts"))).toBe("644");
    expect(() => statSync(at("opt/gantry/test"))).toThrow(); // tests stay behind
    expect(mode(at("var/cache/gantry"))).toBe("750");
    expect(mode(at("etc/gantry/agent.env"))).toBe("600");
    expect(mode(at("etc/systemd/system/gantry-agent.service"))).toBe("644");

    const env = readFileSync(at("etc/gantry/agent.env"), "utf8");
    const settings = Object.fromEntries(
      env
        .split("\n")
        .filter((line) => /^GANTRY_\w+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
    );
    expect(settings).toMatchObject({
      GANTRY_GATEWAY_URL: "https://gantry.example.com",
      GANTRY_QUEUE_URL: "amqp://u:p@rabbit:5672/v",
      GANTRY_AGENT_TOKEN: TOKEN,
      GANTRY_MODELS: "ocr",
      GANTRY_SLOTS: "1",
    });
    // What the installer writes, the agent accepts.
    expect(parseAgentConfig(settings).gatewayUrl).toBe("https://gantry.example.com");

    const unit = parseUnit(readFileSync(at("etc/systemd/system/gantry-agent.service"), "utf8"));
    const exec = unit.get("Service.ExecStart")?.[0] ?? "";
    expect(exec).toMatch(/^\/\S*node \/opt\/gantry\/bin\/gantry-agent\.js run$/);
  });

  it("changes nothing on a second run", () => {
    const before = new Map(
      listTree(root).map((path) => [path, statSync(at(path)).mtimeMs] as const),
    );
    const result = install(args, { GANTRY_AGENT_TOKEN: TOKEN });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("Nothing changed");
    expect(result.stdout).not.toMatch(/^ +(copied|wrote|installed|created|enabled|started)/m);
    const after = new Map(
      listTree(root).map((path) => [path, statSync(at(path)).mtimeMs] as const),
    );
    expect(after).toEqual(before);
  });

  it("reads settings back from agent.env, so an upgrade needs none", () => {
    const result = install(["--prefix", root, "--source", source, "--no-systemctl", "--skip-npm"]);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain("Nothing changed");
  });

  it("rewrites only what a changed setting or file touches", () => {
    writeFileSync(join(source, "gpu-agent/cli.ts"), "export const changed = true;\n");
    const result = install([...args, "--slots", "2"], { GANTRY_AGENT_TOKEN: TOKEN });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("copied 0 new and 1 changed file(s)");
    expect(result.stdout).toContain("wrote");
    expect(result.stdout).toContain("unchanged: the unit is up to date");
    expect(result.stdout).toContain("Done: 2 change(s).");
    expect(readFileSync(at("etc/gantry/agent.env"), "utf8")).toContain("GANTRY_SLOTS=2\n");
    expect(mode(at("etc/gantry/agent.env"))).toBe("600");
  });
});

describe("install.sh moving to the gateway's sql queue", () => {
  it("removes the queue URL an earlier run wrote when given --queue ''", () => {
    // The agent stops at start when it holds a broker's URL for a gateway on the sql queue,
    // saying to unset it; the installer read the old URL back and said "Nothing changed".
    const root = newRoot();
    const args = ["--prefix", root, "--source", fakeSource(), "--no-systemctl", "--skip-npm"];
    expect(install([...args, ...SETTINGS], { GANTRY_AGENT_TOKEN: TOKEN }).status).toBe(0);
    const result = install([...args, "--queue", ""]);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain("wrote");
    const env = readFileSync(join(root, "etc/gantry/agent.env"), "utf8");
    expect(env).toMatch(/^GANTRY_QUEUE_URL=$/m);
    expect(env).toContain("GANTRY_GATEWAY_URL=https://gantry.example.com\n");
  });
});

describe("install.sh's npm step", () => {
  it("installs production dependencies without the checkout's prepare script", () => {
    // The real prepare builds the SDK and console from scripts/, client/ and console/ with
    // devDependencies, none of which the agent's copy has: npm ci ran it and failed.
    const source = fakeSource();
    writeFileSync(
      join(source, "package.json"),
      '{"name":"gantry","type":"module","scripts":{"prepare":"tsx scripts/build-client.ts"}}\n',
    );
    writeFileSync(
      join(source, "package-lock.json"),
      '{"name":"gantry","lockfileVersion":3,"requires":true,"packages":{"":{"name":"gantry"}}}\n',
    );
    const root = newRoot();
    const args = ["--prefix", root, "--source", source, "--no-systemctl", "--cpu-only"];
    const result = install([...args, ...SETTINGS], { GANTRY_AGENT_TOKEN: TOKEN });
    expect(result.stderr).not.toMatch(/prepare|npm error/);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("installed node_modules (npm ci --omit=dev)");
    expect(readdirSync(join(root, "opt/gantry/node_modules"))).toContain(".gantry-npm-ci");
  });
});

describe("gantry-agent.service", () => {
  const unit = parseUnit(readFileSync(UNIT, "utf8"));
  const get = (key: string) => unit.get(key) ?? [];

  it("runs the agent as gantry with its settings file", () => {
    expect(get("Service.User")).toEqual(["gantry"]);
    expect(get("Service.EnvironmentFile")).toContain("/etc/gantry/agent.env");
    expect(get("Service.ExecStart")).toEqual(["/usr/bin/node /opt/gantry/bin/gantry-agent.js run"]);
    expect(get("Service.Restart")).toEqual(["on-failure"]);
    expect(get("Install.WantedBy")).toEqual(["multi-user.target"]);
  });

  it("stops with SIGTERM and waits longer than the agent drains", () => {
    expect(get("Service.KillSignal")).toEqual(["SIGTERM"]);
    // Only the supervisor gets SIGTERM; its runners keep running the jobs it drains.
    expect(get("Service.KillMode")).toEqual(["mixed"]);
    const stopSeconds = seconds(get("Service.TimeoutStopSec")[0] ?? "0");
    const defaultDrain =
      parseAgentConfig({
        GANTRY_GATEWAY_URL: "https://gantry.example.com",
        GANTRY_AGENT_TOKEN: TOKEN,
        GANTRY_QUEUE_URL: "amqp://rabbit",
      }).drainTimeoutMs / 1000;
    const installed = Number(
      /^readonly DRAIN_TIMEOUT_SECONDS=(\d+)$/m.exec(readFileSync(INSTALL, "utf8"))?.[1],
    );
    expect(installed).toBe(defaultDrain);
    expect(stopSeconds).toBeGreaterThanOrEqual(Math.max(defaultDrain, installed) + 10);
  });

  it("is hardened without hiding the GPU", () => {
    expect(get("Service.NoNewPrivileges")).toEqual(["yes"]);
    expect(get("Service.ProtectSystem")).toEqual(["strict"]);
    expect(get("Service.PrivateTmp")).toEqual(["yes"]);
    expect(get("Service.ReadWritePaths")).toContain("/var/cache/gantry");
    // /dev/nvidia* must stay reachable: no private /dev, and no closed device policy
    // unless the NVIDIA devices are allowed explicitly.
    expect(get("Service.PrivateDevices")).not.toContain("yes");
    if (get("Service.DevicePolicy").includes("closed")) {
      expect(get("Service.DeviceAllow").join(" ")).toMatch(/nvidia/);
    }
    // V8's JIT needs writable, executable memory.
    expect(get("Service.MemoryDenyWriteExecute")).not.toContain("yes");
  });

  it("keeps the model cache where the hardened service may write", () => {
    // ProtectSystem=strict leaves the working directory (/opt/gantry) read-only: a cache at
    // the default ./model-cache would stop an agent serving rmbg or a models.yaml model.
    const env = Object.fromEntries(
      get("Service.Environment").map((pair) => [pair.split("=")[0]!, pair.split("=")[1]]),
    );
    const cache = modelCacheDirOf(env, get("Service.WorkingDirectory")[0] ?? "/");
    expect(
      get("Service.ReadWritePaths").some((dir) => isWithin(cache, dir)),
      cache,
    ).toBe(true);
  });

  it("is a bash script that stops at the first error", () => {
    const script = readFileSync(INSTALL, "utf8");
    expect(script.startsWith("#!/usr/bin/env bash\n")).toBe(true);
    expect(script).toMatch(/^set -euo pipefail$/m);
    expect(mode(INSTALL)).toBe("755");
    expect(spawnSync("bash", ["-n", INSTALL]).status).toBe(0);
  });
});
