/**
 * Whose code a CPU profile's time went to, for a process that hosts several parts (the
 * fast-model bench's own process: the agent's supervisor, the SQLite queue, the stub
 * gateway). Each sample goes to the nearest frame on its stack outside Node's internals
 * (a socket write is owned by whoever wrote), grouped by file pattern.
 *
 *   npx tsx bench/cpu-profile-owners.ts DIR/supervisor-batch8.cpuprofile
 *
 * V8 samples on a wall-clock timer, so on a loaded machine a thread that waits for a core
 * is still counted: read shares, not milliseconds.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const OWNERS: [string, RegExp][] = [
  ["profiler (this script's own inspector calls)", /^node:inspector/],
  [
    "stub gateway (server side)",
    /stub-gateway|\/hono\/|@hono|node:_http_(server|incoming|outgoing)/,
  ],
  ["queue (kysely, SQLite, shared/queue)", /kysely|better-sqlite3|shared\/queue\/|shared\/db\//],
  ["agent: http client (undici)", /undici/],
  ["agent: signing", /shared\/agent-signing/],
  ["agent: supervisor, gateway client, runner pool", /gpu-agent\//],
  ["zod (either side)", /\/zod\//],
  ["bench rig", /\/bench\//],
];
const SKIP = new Set(["(idle)", "(program)", "(garbage collector)", "(root)"]);

const file = process.argv[2];
if (!file) throw new Error("usage: cpu-profile-owners.ts FILE.cpuprofile");
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes)
  for (const child of node.children ?? []) parent.set(child, node.id);

const owned = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const leaf = byId.get(id)!;
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  if (SKIP.has(leaf.callFrame.functionName)) {
    owned.set(leaf.callFrame.functionName, (owned.get(leaf.callFrame.functionName) ?? 0) + ms);
    return;
  }
  let owner = "other (node internals)";
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const url = byId.get(at)!.callFrame.url;
    const named = OWNERS.find(([, pattern]) => pattern.test(url));
    if (named) {
      owner = named[0];
      break;
    }
    if (url && !url.startsWith("node:")) {
      owner = url.includes("node_modules/")
        ? `other: ${url.replace(/^.*node_modules\//, "").split("/")[0]}`
        : `other: ${url.replace(/^.*\/work\/main\/|^file:\/\//, "")}`;
      break;
    }
  }
  if (!owner.startsWith("profiler")) total += ms;
  owned.set(owner, (owned.get(owner) ?? 0) + ms);
});

console.log(`${file}: ${total.toFixed(0)} ms busy (profiler, idle and GC apart)`);
for (const [owner, ms] of [...owned].sort((a, b) => b[1] - a[1])) {
  const share =
    SKIP.has(owner) || owner.startsWith("profiler") ? "" : ` ${((100 * ms) / total).toFixed(0)}%`;
  console.log(`  ${ms.toFixed(0).padStart(6)} ms${share.padStart(5)}  ${owner}`);
}
