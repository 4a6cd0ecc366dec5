import { type ChildProcess, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  watch,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startDropProxy } from "../helpers/drop-proxy.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const FILES = 300;

let gw: TestGateway;
let agent: AgentHandle;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-submit-"));
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
  // 300 different images (one colour each) in two folders, plus a file that is no image.
  for (let i = 0; i < FILES; i++) {
    const sub = join(dir, "images", i % 2 ? "odd" : "even");
    mkdirSync(sub, { recursive: true });
    const png = await sharp({
      create: { width: 4, height: 4, channels: 3, background: { r: i % 256, g: i >> 8, b: 7 } },
    })
      .png()
      .toBuffer();
    writeFileSync(join(sub, `img-${i}.png`), png);
  }
  writeFileSync(join(dir, "images", "notes.txt"), "not an image");
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

const jobCount = async () =>
  Number(
    (
      await gw.db
        .selectFrom("jobs")
        .select((eb) => eb.fn.countAll<string | number>().as("n"))
        .executeTakeFirstOrThrow()
    ).n,
  );

function submit(
  out: string,
  folder = join(dir, "images"),
  url = gw.url,
): {
  child: ChildProcess;
  stderr: () => string;
  exit: Promise<number | null>;
} {
  const child = spawn(
    process.execPath,
    [BIN, "submit", "noop", folder, "--out", out, "--concurrency", "8", "--param", "delay_ms=15"],
    {
      env: { ...process.env, GANTRY_URL: url, GANTRY_KEY: gw.apiKey },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, stderr: () => stderr, exit };
}

const results = (out: string, folder: string) =>
  existsSync(join(out, folder))
    ? readdirSync(join(out, folder)).filter((f) => f.endsWith(".png.json"))
    : [];

it("submits 300 images, survives a kill half-way and submits no job twice", {
  timeout: 180_000,
}, async () => {
  const out = join(dir, "out");
  const first = submit(out);
  // Kill it once a third of the results are written, while jobs are in flight.
  await new Promise<void>((resolve) => {
    mkdirSync(join(out, "even"), { recursive: true });
    const watcher = watch(join(out, "even"), () => {
      if (results(out, "even").length >= FILES / 6) {
        watcher.close();
        resolve();
      }
    });
  });
  first.child.kill("SIGKILL");
  await first.exit;
  const afterKill = await jobCount();
  const written = results(out, "even").length + results(out, "odd").length;
  expect(written).toBeLessThan(FILES);
  expect(afterKill).toBeLessThan(FILES);

  const second = submit(out);
  expect(await second.exit).toBe(0);
  expect(await jobCount()).toBe(FILES);
  expect(results(out, "even").length + results(out, "odd").length).toBe(FILES);
  const one = JSON.parse(readFileSync(join(out, "odd", "img-7.png.json"), "utf8")) as Record<
    string,
    unknown
  >;
  expect(one).toMatchObject({ delay_ms: 15 });
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as Record<
    string,
    number
  >;
  expect(summary).toMatchObject({ total: FILES, succeeded: FILES, failed: 0 });
  expect(summary.resumed).toBeGreaterThanOrEqual(written);
  expect(summary.submitted).toBeLessThanOrEqual(FILES - afterKill);

  // stderr is not a terminal here: whole lines, no carriage returns or escape codes.
  const log = second.stderr();
  expect(log.includes("\r")).toBe(false);
  expect(log.includes("\u001b[")).toBe(false);
  const lines = log.trim().split("\n");
  expect(
    lines.some((line) => /^gantry submit: 300\/300 done \(succeeded 300, failed 0/.test(line)),
  ).toBe(true);

  // A third run finds everything done and submits nothing.
  const third = submit(out);
  expect(await third.exit).toBe(0);
  expect(await jobCount()).toBe(FILES);
  const again = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as Record<
    string,
    number
  >;
  expect(again).toMatchObject({ total: FILES, resumed: FILES, submitted: 0 });
});

it("adopts the jobs of a run whose manifest was lost instead of submitting again", {
  timeout: 120_000,
}, async () => {
  const folder = join(dir, "images", "odd");
  const out = join(dir, "out-lost");
  expect(await submit(out, folder).exit).toBe(0);
  const before = await jobCount();
  // Results and manifest gone: every file is uploaded again under the same key.
  rmSync(out, { recursive: true, force: true });
  expect(await submit(out, folder).exit).toBe(0);
  expect(await jobCount()).toBe(before);
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as Record<
    string,
    number
  >;
  expect(summary).toMatchObject({
    total: FILES / 2,
    succeeded: FILES / 2,
    submitted: 0,
    resumed: 0,
  });
});

it("makes its own jobs for a run into another --out, not the other folder's", {
  timeout: 60_000,
}, async () => {
  const folder = join(dir, "twice");
  mkdirSync(folder, { recursive: true });
  for (const b of [11, 12, 13]) {
    const png = await sharp({
      create: { width: 4, height: 4, channels: 3, background: { r: 9, g: 9, b } },
    })
      .png()
      .toBuffer();
    writeFileSync(join(folder, `${b}.png`), png);
  }
  const before = await jobCount();
  const manifest = (out: string) =>
    readFileSync(join(out, ".gantry-submit.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { job_id: string }).job_id)
      .sort();
  const first = join(dir, "out-first");
  const second = join(dir, "out-second");
  expect(await submit(first, folder).exit).toBe(0);
  const again = submit(second, folder);
  expect(await again.exit, again.stderr()).toBe(0);
  expect(await jobCount()).toBe(before + 6);
  const summary = JSON.parse(readFileSync(join(second, "summary.json"), "utf8")) as Record<
    string,
    number
  >;
  expect(summary).toMatchObject({ total: 3, submitted: 3, succeeded: 3, resumed: 0 });
  const theirs = new Set(manifest(first));
  expect(manifest(second).filter((id) => theirs.has(id))).toEqual([]);
});

it("follows all its jobs through one GET /v1/events stream, not a stream or poll per job", {
  timeout: 120_000,
}, async () => {
  // Images no other run submitted, so every job is this run's own.
  const folder = join(dir, "fresh");
  mkdirSync(folder, { recursive: true });
  for (let i = 0; i < 40; i++) {
    const png = await sharp({
      create: { width: 4, height: 4, channels: 3, background: { r: i, g: 200, b: 99 } },
    })
      .png()
      .toBuffer();
    writeFileSync(join(folder, `fresh-${i}.png`), png);
  }
  const proxy = await startDropProxy(gw.url, () => "pass");
  try {
    const out = join(dir, "out-one-stream");
    const run = submit(out, folder, proxy.url);
    expect(await run.exit, run.stderr()).toBe(0);
    const gets = proxy.seen.filter((r) => r.method === "GET").map((r) => r.path);
    expect(gets.filter((path) => path.startsWith("/v1/events"))).toHaveLength(1);
    expect(gets.filter((path) => /^\/v1\/jobs\/[^/]+\/events/.test(path))).toEqual([]);
    // One read per job, of its result once the stream said it ended.
    expect(gets.filter((path) => /^\/v1\/jobs\/[^/?]+$/.test(path)).length).toBe(40);
    expect(results(out, ".").length).toBe(40);
  } finally {
    await proxy.close();
  }
});

it("stops before any upload when the model, a parameter or the folder is wrong", {
  timeout: 60_000,
}, async () => {
  const run = async (args: string[], out: string) => {
    const child = spawn(process.execPath, [BIN, "submit", ...args, "--out", out], {
      env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    return { code, stderr: stderr.trim() };
  };
  const refused = async (name: string, args: string[]) => {
    const out = join(dir, name);
    const answer = await run(args, out);
    // Nothing written: no error file per image, no summary, no manifest.
    expect(existsSync(out) ? readdirSync(out, { recursive: true }) : []).toEqual([]);
    return answer;
  };
  const images = join(dir, "images");
  const model = await refused("out-unknown-model", ["nope", images]);
  expect(model.code, model.stderr).toBe(1);
  expect(model.stderr).toContain("No model nope");

  const before = await jobCount();
  const param = await refused("out-bad-param", ["noop", images, "--param", "delay_ms=fast"]);
  expect(param).toEqual({ code: 2, stderr: "gantry: --param delay_ms: must be integer" });
  expect(await jobCount()).toBe(before);

  // An --out that cannot be a folder: one line, no stack, and no hang (Node's recursive
  // mkdir never returns under /proc).
  const blocker = join(dir, "a-file");
  writeFileSync(blocker, "");
  const outs = {
    [blocker]: "a file is where a folder must be",
    [join(blocker, "out")]: "a part of the path is a file, not a folder",
    "/proc/gantry-out": "the file system refuses to make it there",
  };
  for (const [out, why] of Object.entries(outs)) {
    expect(await run(["noop", images], out)).toEqual({
      code: 2,
      stderr: `gantry: cannot write the --out folder ${out}: ${why}`,
    });
  }
  expect(await jobCount()).toBe(before);

  const empty = join(dir, "no-images");
  mkdirSync(empty);
  writeFileSync(join(empty, "notes.txt"), "not an image");
  const none = await refused("out-empty", ["noop", empty]);
  expect(none).toEqual({
    code: 2,
    stderr: `gantry: no image or JSON files in ${empty} (hidden files are passed over)`,
  });
});

it("writes a result for every copy of a file, the copies sharing one job", {
  timeout: 60_000,
}, async () => {
  // Same bytes, same key: one job, which every copy's file waits for at once.
  const folder = join(dir, "copies");
  mkdirSync(folder, { recursive: true });
  const png = await sharp({
    create: { width: 4, height: 4, channels: 3, background: { r: 1, g: 2, b: 3 } },
  })
    .png()
    .toBuffer();
  for (const name of ["a", "b", "c"]) writeFileSync(join(folder, `${name}.png`), png);
  const before = await jobCount();
  const out = join(dir, "out-copies");
  const run = submit(out, folder);
  const hung = setTimeout(() => run.child.kill("SIGKILL"), 40_000);
  const code = await run.exit;
  clearTimeout(hung);
  expect(code, run.stderr()).toBe(0);
  expect(results(out, ".").sort()).toEqual(["a.png.json", "b.png.json", "c.png.json"]);
  expect(await jobCount()).toBe(before + 1);
});

it("--retry-failed retries the jobs an earlier run wrote as failed, under the same ids", {
  timeout: 90_000,
}, async () => {
  const folder = join(dir, "to-retry");
  mkdirSync(folder, { recursive: true });
  for (const i of [1, 2]) {
    const png = await sharp({
      create: { width: 4, height: 4, channels: 3, background: { r: i, g: 9, b: 250 } },
    })
      .png()
      .toBuffer();
    writeFileSync(join(folder, `r${i}.png`), png);
  }
  const out = join(dir, "out-retry");
  const run = (...extra: string[]) => {
    const child = spawn(
      process.execPath,
      [BIN, "submit", "noop", folder, "--out", out, "--param", "delay_ms=5000", ...extra],
      {
        env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    return {
      stderr: () => stderr,
      exit: new Promise<number | null>((resolve) => child.on("exit", resolve)),
    };
  };
  const before = await jobCount();
  // The first run's jobs are canceled under it: it writes both files as failed.
  const first = run();
  await expect.poll(jobCount, { timeout: 20_000 }).toBe(before + 2);
  const made = await gw.db
    .selectFrom("jobs")
    .select("id")
    .orderBy("created_at", "desc")
    .limit(2)
    .execute();
  for (const { id } of made) await gw.api(`/v1/jobs/${id}/cancel`, { method: "POST" });
  expect(await first.exit, first.stderr()).toBe(1);
  expect(
    readdirSync(out)
      .filter((f) => f.endsWith(".error.json"))
      .sort(),
  ).toEqual(["r1.png.error.json", "r2.png.error.json"]);

  // Without the flag a run skips them; with it, the same jobs run again.
  const skipped = run();
  expect(await skipped.exit).toBe(1);
  const second = run("--retry-failed");
  expect(await second.exit, second.stderr()).toBe(0);
  expect(await jobCount()).toBe(before + 2);
  expect(
    readdirSync(out)
      .filter((f) => f.endsWith(".json"))
      .sort(),
  ).toEqual(["r1.png.json", "r2.png.json", "summary.json"]);
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as Record<
    string,
    number
  >;
  expect(summary).toMatchObject({ total: 2, succeeded: 2, failed: 0, retried: 2, submitted: 0 });
});
