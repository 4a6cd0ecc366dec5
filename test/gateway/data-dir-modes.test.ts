import { spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { randomToken } from "../../shared/ids.ts";
import { ensurePrivateDir } from "../../shared/private-files.ts";

/**
 * The data directory holds the SQLite database (agent HMAC secrets, webhook
 * secrets), secrets.json and the blobs. It is made 0700 and every file in it 0600, whatever
 * the umask (the gateway here runs under `umask 000`, which would leave everything open),
 * and one left open by an earlier version is tightened, with a log line naming what was.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const BANNER_END = "Ctrl-C stops everything";

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function tempRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "gantry-modes-"));
  roots.push(root);
  return root;
}

const modeOf = (path: string) => lstatSync(path).mode & 0o777;

/** Every file and folder under `dir` (itself included): "700" for a folder that is 0700. */
function modes(dir: string): Map<string, string> {
  const found = new Map<string, string>([[dir, `${modeOf(dir).toString(8)} dir`]]);
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    found.set(path, `${modeOf(path).toString(8)}${entry.isDirectory() ? " dir" : ""}`);
  }
  return found;
}

/** What each entry must be: folders 0700, files 0600. */
const PRIVATE = (found: Map<string, string>) =>
  new Map([...found].map(([path, mode]) => [path, mode.endsWith("dir") ? "700 dir" : "600"]));

/**
 * `gantry gateway` under `umask 000`, until its banner; uploads a file and submits a job,
 * runs `check` while it is still up (the WAL goes away at a clean stop), then stops it.
 */
async function runGateway(dataDir: string, check: () => void = () => {}): Promise<string> {
  const key = `gk_live_${randomToken(24)}`;
  const child = spawn("sh", ["-c", `umask 000 && exec "${process.execPath}" "${BIN}" gateway`], {
    env: {
      PATH: process.env.PATH ?? "",
      PORT: "0",
      GANTRY_DATA_DIR: dataDir,
      GANTRY_MODELS: "noop",
      GANTRY_API_KEY: key,
      GANTRY_LOG_FORMAT: "json",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const started = new Promise<void>((resolve, reject) => {
    const collect = (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes(BANNER_END)) resolve();
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    void exited.then(() => reject(new Error(`gantry exited before its banner:\n${out}`)));
  });
  try {
    await started;
    const url = /API\s+(http:\/\/\S+)/.exec(out)?.[1] ?? "";
    const bytes = new TextEncoder().encode("private bytes");
    const presigned = await fetch(`${url}/v1/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ content_type: "image/png", size_bytes: bytes.length }),
    });
    expect(presigned.status).toBe(201);
    const upload = (await presigned.json()) as { url: string; headers: Record<string, string> };
    const put = await fetch(upload.url, { method: "PUT", headers: upload.headers, body: bytes });
    expect(put.ok).toBe(true);
    // Something to write into the WAL once more, so -wal and -shm surely exist.
    await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "noop", input: {} }),
    });
    expect(existsSync(join(dataDir, "gantry.db-wal"))).toBe(true);
    check();
    return out;
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

describe("the data directory", () => {
  it("is made 0700, with every file in it 0600, under umask 000", async () => {
    const dataDir = join(tempRoot(), "fresh", ".gantry");
    let found = new Map<string, string>();
    await runGateway(dataDir, () => {
      found = modes(dataDir);
    });
    const names = [...found.keys()].map((path) => path.slice(dataDir.length));
    for (const name of [
      "",
      "/gantry.db",
      "/gantry.db-wal",
      "/gantry.db-shm",
      "/secrets.json",
      "/example.png",
      "/blobs/inputs",
    ]) {
      expect(names, name).toContain(name);
    }
    // The upload's bytes and their sidecar.
    expect(names.filter((name) => name.startsWith("/blobs/inputs/"))).toHaveLength(2);
    expect(found).toEqual(PRIVATE(found));
  }, 60_000);

  it("tightens one an earlier version left open, and says so", async () => {
    const dataDir = join(tempRoot(), ".gantry");
    // What the last release left: the folder 0755, the database and its WAL 0644, blobs too.
    const db = await openSqlite(join(dataDir, "gantry.db"));
    await db.destroy();
    mkdirSync(join(dataDir, "blobs", "uploads"), { recursive: true });
    writeFileSync(join(dataDir, "blobs", "uploads", "upl_old"), "old");
    writeFileSync(join(dataDir, "gantry.db-wal"), "");
    for (const [path, mode] of modes(dataDir))
      chmodSync(path, mode.endsWith("dir") ? 0o755 : 0o644);
    const out = await runGateway(dataDir);
    const found = modes(dataDir);
    expect(found).toEqual(PRIVATE(found));
    const said = out
      .split("\n")
      .filter((line) => line.includes('"msg":"tightened'))
      .map((line) => JSON.parse(line) as { path: string; from: string; to: string });
    expect(said).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: dataDir, from: "0755", to: "0700" }),
        expect.objectContaining({ path: join(dataDir, "gantry.db"), from: "0644", to: "0600" }),
        expect.objectContaining({
          path: join(dataDir, "blobs", "uploads", "upl_old"),
          from: "0644",
          to: "0600",
        }),
      ]),
    );
  }, 60_000);

  it("is left as it is when already private, and a symbolic link in it is not followed", () => {
    const root = tempRoot();
    const outside = join(root, "outside.txt");
    writeFileSync(outside, "not ours");
    chmodSync(outside, 0o644);
    const dataDir = join(root, "data");
    expect(ensurePrivateDir(dataDir)).toEqual({ created: true, tightened: [] });
    expect(modeOf(dataDir)).toBe(0o700);
    chmodSync(dataDir, 0o750);
    writeFileSync(join(dataDir, "gantry.db"), "");
    chmodSync(join(dataDir, "gantry.db"), 0o640);
    const { symlinkSync } = require("node:fs") as typeof import("node:fs");
    symlinkSync(outside, join(dataDir, "link"));
    const { tightened } = ensurePrivateDir(dataDir);
    expect(tightened.map((entry) => entry.path).sort()).toEqual(
      [dataDir, join(dataDir, "gantry.db")].sort(),
    );
    expect(modeOf(outside)).toBe(0o644);
    expect(ensurePrivateDir(dataDir).tightened).toEqual([]);
  });
});
