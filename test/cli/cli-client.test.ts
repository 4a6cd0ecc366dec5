import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBanner } from "../../cli/banner.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { bundleClient } from "../../scripts/build-client.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

const ROOT = join(import.meta.dirname, "../..");
const BIN = join(ROOT, "bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let agent: AgentHandle;
let dir: string;
let image: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gantry-cli-"));
  gw = await startTestGateway();
  agent = await startTestAgent(gw);
  image = join(dir, "example.png");
  writeFileSync(image, await renderTextPng(["Hello from Gantry", "OCR 2026 works"]));
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `gantry …` with the banner's environment; never rejects, so failures can be read. */
async function gantry(...args: string[]) {
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("gantry run", () => {
  it("prints the OCR text of the example image", async () => {
    const { code, stdout, stderr } = await gantry("run", "ocr", image);
    expect(code, stderr).toBe(0);
    expect(stdout.toLowerCase()).toContain("hello from gantry");
    expect(stderr).toContain("succeeded");
  });

  it("--max-wait gives up waiting, names the job that goes on, and exits 124", async () => {
    const bad = await gantry("run", "noop", "--max-wait", "soon");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      'gantry: --max-wait must be a number of seconds above 0 (got "soon")\n',
    );
    const { code, stderr } = await gantry(
      "run",
      "noop",
      "--param",
      "delay_ms=1500",
      "--max-wait",
      "0.3",
    );
    expect(code, stderr).toBe(124);
    const id =
      /gave up waiting after 0\.3 s \(--max-wait\)(, the job still queued)?; job (job_\w+) goes on: `gantry jobs watch \2`/.exec(
        stderr,
      )?.[2];
    expect(id, stderr).toBeDefined();
    expect(stderr).not.toContain("    at ");
    // It went on at the gateway: its run ends on its own.
    const job = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string };
    expect(["queued", "running", "succeeded"]).toContain(job.status);
  });

  it("--json prints the job alone", async () => {
    const { code, stdout, stderr } = await gantry("run", "ocr", image, "--json");
    expect(code).toBe(0);
    expect(stderr).toBe("");
    const job = JSON.parse(stdout) as { status: string; output: { text: string } };
    expect(job.status).toBe("succeeded");
    expect(job.output.text).toContain("2026");
  });

  it("exits non-zero with the job's error code", async () => {
    const { code, stderr } = await gantry("run", "noop", "--param", "fail=permanent");
    expect(code).toBe(1);
    const lastLine = stderr.trim().split("\n").at(-1);
    expect(lastLine).toMatch(/^[a-z_]+$/);
    expect(stderr).toContain(`: ${lastLine}:`);
  });

  it("refuses bad parameters by the model's schema before uploading anything", async () => {
    const { code, stderr } = await gantry("run", "noop", "--param", "delay_ms=-1");
    expect(code).toBe(2);
    expect(stderr.trim()).toBe("gantry: --param delay_ms: must be >= 0");
    const typo = await gantry("run", "ocr", image, "--param", "langauge=en");
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/^gantry: --param langauge: model ocr has no such parameter \(/);
    expect(typo.stderr).not.toContain("uploading");
    // A model that takes a file, run without one: said before anything is sent.
    const noFile = await gantry("run", "ocr");
    expect(noFile).toMatchObject({
      code: 2,
      stderr: "gantry: model ocr takes a file: gantry run ocr FILE\n",
    });
    // The SDK's refusal of a path it cannot read: one line, no stack.
    const unread = await gantry("run", "ocr", "--param", "image=upl_x");
    expect(unread.code).toBe(2);
    expect(unread.stderr).toContain('gantry: cannot read "upl_x": no such file\n');
    expect(unread.stderr).not.toMatch(/\n\s+at /);
    const model = await gantry("run", "nope", image);
    expect(model.code).toBe(1);
    expect(model.stderr).toContain("404 not_found");
    expect(model.stderr).not.toContain("uploading");
  });

  it("says a missing file or a folder in one line, with no stack, and submits nothing", async () => {
    const missing = await gantry("run", "ocr", join(dir, "nope.png"));
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim()).toBe(
      `gantry: cannot read ${join(dir, "nope.png")}: no such file`,
    );
    const folder = await gantry("run", "ocr", dir);
    expect(folder.code).toBe(2);
    expect(folder.stderr).toContain("gantry submit");
    expect(folder.stderr).not.toContain("    at ");
    const http = await gantry("run", "ocr", "http://example.com/x.png");
    expect(http.code).toBe(2);
    expect(http.stderr).toContain("input URLs must be https");
    const upload = await gantry("run", "ocr", "upl_01m8sxsdejr1ahdk2md71x7d7a");
    expect(upload.stderr).not.toContain("uploading");
    expect(upload.stderr).toContain("unknown_upload");
  });

  it("answers a usage mistake (a missing argument or option) in its own voice, exit 2", async () => {
    const noOut = await gantry("submit", "ocr", dir);
    expect(noOut.code).toBe(2);
    expect(noOut.stderr).toBe(
      "gantry: required option '--out <dir>' not specified\n(add --help for usage)\n",
    );
    const noModel = await gantry("run");
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toMatch(/^gantry: missing required argument 'model'\n/);
    expect((await gantry("jobs", "list", "--help")).code).toBe(0);
    const badLimit = await gantry("jobs", "list", "--limit", "abc");
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toBe(
      "gantry: --limit must be a whole number of jobs, 1 or more (got abc)\n",
    );
    // A period the gateway would refuse is the user's to fix, before anything is sent.
    const badDay = await gantry("usage", "--from", "2026-13-01");
    expect(badDay.code).toBe(2);
    expect(badDay.stderr).toBe(
      "gantry: --from 2026-13-01: must be a day (2026-12-01) or an ISO 8601 instant (2026-12-01T08:00:00Z)\n",
    );
    const backwards = await gantry("usage", "--from", "2026-12-10", "--to", "2026-12-01");
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toBe("gantry: --to (2026-12-01) must be after --from (2026-12-10)\n");
    // The gateway's refusal, once: its detail says the field's error, no list repeats it.
    const refused = await gantry("run", "ocr", "https://10.0.0.1/scan.png");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^(submitting ocr\n)?gantry: 422 input_url_not_allowed: input\.image points to a forbidden address 10\.0\.0\.1: [^\n]*\n$/,
    );
    const badStatus = await gantry("jobs", "list", "--status", "done");
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toMatch(/^gantry: .*'done' is invalid\. Allowed choices are queued, /);
    const badUrl = await exec(process.execPath, [BIN, "jobs", "list"], {
      env: { ...process.env, GANTRY_URL: "gateway.example", GANTRY_KEY: gw.apiKey },
    }).catch((error: { code: number; stderr: string }) => error);
    expect("code" in badUrl ? badUrl.code : 0).toBe(2);
    expect(badUrl.stderr).toBe(
      'gantry: GANTRY_URL must be the gateway\'s http(s) URL, such as http://127.0.0.1:8787 (got "gateway.example")\n',
    );
  });
});

describe("gantry jobs and models", () => {
  // A short run: a canceled attempt still holds the agent's one slot until its run ends,
  // and the tests after this one need that slot.
  it("on Ctrl-C, says which job goes on and how to follow or stop it, with no stack", async () => {
    const child = spawn(process.execPath, [BIN, "run", "noop", "--param", "delay_ms=4000"], {
      cwd: dir,
      env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    const running = new Promise<void>((resolve) => {
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        if (/: running/.test(stderr)) resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    await running;
    child.kill("SIGINT");
    expect(await exited, stderr).toBe(130);
    const id = /interrupted; job (job_\w+) goes on: `gantry jobs watch \1` follows it/.exec(
      stderr,
    )?.[1];
    expect(id, stderr).toBeDefined();
    expect(stderr).not.toContain("    at ");
    const job = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string };
    expect(job.status).toBe("running");
    expect((await gantry("jobs", "cancel", id ?? "")).code).toBe(0);
    // Canceled, it can be put back in the queue under the same id.
    const retried = await gantry("jobs", "retry", id ?? "");
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toBe(`${id} queued\n`);
    expect((await gantry("jobs", "retry", id ?? "")).stderr).toContain("409 job_not_retryable");
    // Frees the slot for the tests after this one. On a loaded machine the four commands
    // above can outlast the canceled run and the retried one: it may have ended already.
    const last = await gantry("jobs", "cancel", id ?? "");
    if (last.code !== 0) expect(last.stderr).toContain("409 job_not_cancelable");
  });

  it("lists, gets and watches jobs; lists models with their parameters", async () => {
    const made = await gantry("run", "noop", "--param", "marker=watched", "--json");
    const id = (JSON.parse(made.stdout) as { id: string }).id;
    const list = await gantry("jobs", "list", "--limit", "3", "--json");
    const lines = list.stdout.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect((JSON.parse(lines[0] ?? "{}") as { id: string }).id).toBe(id);
    // --model: only that model's jobs, though the ocr runs above are newer than most.
    const modelsListed = async (model: string) =>
      (await gantry("jobs", "list", "--model", model, "--limit", "100", "--json")).stdout
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as { model: string }).model);
    expect(new Set(await modelsListed("noop"))).toEqual(new Set(["noop"]));
    expect(new Set(await modelsListed("rmbg"))).toEqual(new Set());
    const got = await gantry("jobs", "get", id, "--json");
    expect(JSON.parse(got.stdout)).toMatchObject({ id, output: { marker: "watched" } });
    const watched = await gantry("jobs", "watch", id);
    expect(watched.code).toBe(0);
    expect(watched.stdout.trim().split("\n").at(-1)).toMatch(/succeeded$/);
    const models = await gantry("models");
    expect(models.stdout).toMatch(/^ocr /m);
    expect(models.stdout).toMatch(/^\s+delay_ms\?/m);
    expect(models.stdout).not.toContain("state:");
    // One model: its live state too, which a listing does not read.
    const one = await gantry("models", "noop");
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(
      /^noop .*\n {4}state: serving · \d+ queued, \d+ running · 1 live agent · [\d.–]+ starts\/min · wait p50 \S+( s)?, p95 \S+( s)?\n/,
    );
    const json = JSON.parse((await gantry("models", "noop", "--json")).stdout);
    expect(json).toMatchObject({ id: "noop", state: { paused: false, agents: 1 } });
    const unknown = await gantry("models", "nope");
    expect([unknown.code, unknown.stderr]).toEqual([1, "gantry: 404 not_found: No model nope.\n"]);
  });
});

describe("the npm start banner", () => {
  it("shows the CLI first, then SDK TypeScript that runs as printed, then curl", async () => {
    const banner = startBanner({
      url: gw.url,
      apiKey: gw.apiKey,
      apiKeyFrom: "kept",
      dataDir: ".gantry",
      examplePath: image,
      models: ["ocr", "noop"],
      stack: "test",
      webhooks: "test",
    });
    const cli = banner.indexOf(`npx gantry run ocr ${image}`);
    const sdk = banner.indexOf('import { Gantry } from "gantry/client"');
    const curl = banner.indexOf("curl ");
    expect(banner).toContain(`export GANTRY_URL=${gw.url} GANTRY_KEY=${gw.apiKey}`);
    expect(cli).toBeGreaterThan(0);
    expect(sdk).toBeGreaterThan(cli);
    expect(curl).toBeGreaterThan(sdk);
    const snippet = banner.slice(sdk).split("\n\n")[0] ?? "";
    expect(snippet.trim().split("\n")).toHaveLength(5);
    // As a user of the package would: `gantry` resolves to this package, built as packed.
    await bundleClient({ outfile: join(ROOT, "dist/client.js") });
    const app = join(dir, "app");
    mkdirSync(join(app, "node_modules"), { recursive: true });
    symlinkSync(ROOT, join(app, "node_modules", "gantry"));
    writeFileSync(join(app, "snippet.mjs"), snippet);
    const { stdout } = await exec(process.execPath, ["snippet.mjs"], {
      cwd: app,
      env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
    });
    expect(stdout.toLowerCase()).toContain("hello from gantry");
  });
});
