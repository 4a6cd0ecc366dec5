/**
 * What a process wake-up costs on this machine: a bare Node HTTP server and an undici client
 * in one process, CPU per request back to back and paced (one request every few ms, as at
 * 200 jobs/s). On a VM the paced figure can be many times the back-to-back one; that is the
 * floor under every hop of a job at low load, whatever the code does. Not Gantry code: a
 * yardstick for reading bench/queue-e2e.ts.
 *
 *   npx tsx bench/wakeup-cost.ts [--seconds 3] [--gap-ms 4]
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { Pool } from "undici";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    "gap-ms": { type: "string", default: "4" },
  },
});
const seconds = Number(values.seconds);
const gapMs = Number(values["gap-ms"]);

const server = createServer((request, response) => {
  request.resume();
  request.on("end", () => {
    response.writeHead(202, { "content-type": "application/json" });
    response.end('{"id":"job_x","status":"queued"}');
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address() as AddressInfo;
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });

async function measure(gap: number): Promise<{ requests: number; cpuMs: number }> {
  const before = process.cpuUsage();
  const end = Date.now() + seconds * 1000;
  let requests = 0;
  while (Date.now() < end) {
    const response = await pool.request({ method: "POST", path: "/v1/jobs", body: "{}" });
    await response.body.text();
    requests++;
    if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap));
  }
  const used = process.cpuUsage(before);
  return { requests, cpuMs: (used.user + used.system) / 1000 / requests };
}

const say = (line: string) => console.log(`[wakeup-cost] ${line}`);
const busy = await measure(0);
say(
  `back to back: ${busy.requests} requests, ${busy.cpuMs.toFixed(3)} ms CPU each (client + server)`,
);
const paced = await measure(gapMs);
say(
  `one every ${gapMs} ms: ${paced.requests} requests, ${paced.cpuMs.toFixed(3)} ms CPU each ` +
    `(×${(paced.cpuMs / busy.cpuMs).toFixed(1)})`,
);
await pool.close();
server.close();
