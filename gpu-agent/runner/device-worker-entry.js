// The device thread's entry point, in plain JavaScript: a worker thread does not inherit the
// loader hooks that let this process import TypeScript (not even through `execArgv`, on Node
// 20), so it registers tsx itself before loading the TypeScript.
import { register } from "tsx/esm/api";

register();
await import("./device-worker.ts");
