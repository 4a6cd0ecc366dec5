import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `gantry jobs watch ID` is for a person (`--json` is for scripts): a progress report reads
 * as `gantry run` shows it (`sleeping 50% (1500 of 3000 ms)`), not as the event's raw JSON
 * (`progress {"job_id":…,"fraction":0.5009500300000073,…}`), which it printed between the
 * status lines.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let agent: AgentHandle;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

it("shows progress as a readable line, and keeps the raw event for --json", {
  timeout: 60_000,
}, async () => {
  const made = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: { delay_ms: 1500, progress_every_ms: 300 } },
  });
  const { id } = (await made.json()) as { id: string };
  const env = { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey };
  const watched = await exec(process.execPath, [BIN, "jobs", "watch", id], { env });
  const lines = watched.stdout.trim().split("\n");
  expect(lines.at(-1)).toMatch(/ {2}succeeded$/);
  const progress = lines.filter((line) => line.includes("sleeping"));
  expect(progress.length, watched.stdout).toBeGreaterThan(0);
  for (const line of progress)
    expect(line).toMatch(/^\S+Z {2}running, sleeping \d{1,3}% \(\d+ of 1500 ms\)$/);
  expect(watched.stdout).not.toContain("{");

  // A resumed stream of the ended job: the status lines only, and --json as it was.
  const json = await exec(process.execPath, [BIN, "jobs", "watch", id, "--json"], { env });
  const events = json.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { event: string; status?: string });
  expect(events.at(-1)).toMatchObject({ event: "status", status: "succeeded" });
});
