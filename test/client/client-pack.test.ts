import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");

let gw: TestGateway;
let agent: AgentHandle;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-pack-"));
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a packed install imports gantry/client and runs a job", { timeout: 240_000 }, async () => {
  // `npm pack` runs `prepack`, which bundles the SDK into dist/client.js.
  await run("npm", ["pack", "--pack-destination", dir, "--silent"], { cwd: ROOT });
  const tarball = readdirSync(dir).find((name) => name.endsWith(".tgz"));
  expect(tarball).toBeDefined();
  const app = join(dir, "app");
  await run("mkdir", [app]);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: "app", private: true, type: "module" }),
  );
  // From the npm cache where it can; optional (model weights) and install scripts (native
  // builds) are left out: an SDK user needs neither, and they would make this take minutes.
  await run(
    "npm",
    [
      "install",
      "--prefer-offline",
      "--ignore-scripts",
      "--omit=optional",
      "--no-audit",
      "--no-fund",
      join(dir, tarball ?? ""),
    ],
    { cwd: app, env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" } },
  );
  writeFileSync(
    join(app, "main.js"),
    `import { Gantry } from "gantry/client";
const gantry = new Gantry();
const output = await gantry.run("noop", { marker: "packed" });
console.log(JSON.stringify(output));
`,
  );
  const { stdout } = await run("node", ["main.js"], {
    cwd: app,
    env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
  });
  expect(JSON.parse(stdout)).toMatchObject({ marker: "packed" });
});
