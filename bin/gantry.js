#!/usr/bin/env node
// Runs the TypeScript sources directly: tsx compiles them on load, so there is no build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../cli/gantry.ts");
await main();
