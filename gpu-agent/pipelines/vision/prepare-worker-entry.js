// A pre-processing thread's entry point, in plain JavaScript: a worker thread does not
// inherit the loader hooks that let this process import TypeScript (see the device
// thread's entry), so it registers tsx itself before loading the TypeScript.
import { register } from "tsx/esm/api";

register();
await import("./prepare-worker.ts");
