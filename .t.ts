import { startBenchAgent } from "./bench/ocr-agent-rig.ts";
const la = Number(process.env.LA ?? 1);
const agent = await startBenchAgent({ models: ["noop"], threads: 1, lookahead: la });
const jobs = (n: number) => Array.from({ length: n }, () => ({ model: "noop", input: {}, files: { image: { bytes: new Uint8Array(20000), contentType: "image/png" } } }));
await agent.run(jobs(5));
const r = await agent.run(jobs(100));
console.log("lookahead", la, "noop jobs/s", (100 / r.seconds).toFixed(1));
await agent.close();
