import { readFileSync } from "node:fs";
import { OcrEngine } from "./gpu-agent/pipelines/ocr/index.ts";
import { sessionFactory } from "./gpu-agent/runner/providers.ts";
import { defaultBenchImage } from "./bench/ocr-bare.ts";
import { startBenchAgent } from "./bench/ocr-agent-rig.ts";
const cpuOf = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" "); return (Number(f[11]) + Number(f[12])) * 10; };
const image = new Uint8Array(await defaultBenchImage());
const engine = await OcrEngine.load(sessionFactory("cpu", 1));
await engine.detect(image);
const agent = await startBenchAgent({ models: ["ocr-det"], threads: 1, modelConfigs: { "ocr-det": { pipeline: "ocr", detection_only: true } } });
const job = () => ({ model: "ocr-det", input: {}, files: { image: { bytes: image, contentType: "image/png" } } });
await agent.run([job()]);
const N = 30;
for (let r = 0; r < 3; r++) {
  let c0 = process.cpuUsage(); let t0 = performance.now();
  for (let i = 0; i < N; i++) await engine.detect(image);
  let c = process.cpuUsage(c0);
  console.log("bare: wall/run", ((performance.now()-t0)/N).toFixed(1), "cpu/run", ((c.user+c.system)/1000/N).toFixed(1));
  const pid = agent.runners[0]!.pid!;
  const k0 = cpuOf(pid); c0 = process.cpuUsage(); t0 = performance.now();
  const res = await agent.run(Array.from({length: N}, job));
  c = process.cpuUsage(c0);
  console.log("agent: wall/job", ((performance.now()-t0)/N).toFixed(1), "child cpu/job", ((cpuOf(pid)-k0)/N).toFixed(1), "supervisor+stub cpu/job", ((c.user+c.system)/1000/N).toFixed(1), "busy", res.runnerBusy.toFixed(3));
}
await agent.close(); await engine.release();
