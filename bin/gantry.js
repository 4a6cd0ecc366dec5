#!/usr/bin/env node
// Runs the TypeScript sources directly: tsx compiles them on load, so there is no build step.
import { register } from "tsx/esm/api";

register();
const CLIENT_COMMANDS = new Set(["run", "submit", "jobs", "models"]);
if (CLIENT_COMMANDS.has(process.argv[2] ?? "")) {
  // The API client's commands load the SDK alone, not the gateway and agent: a quarter of
  // the start-up time, which a script calling `gantry run` in a loop pays every time.
  const { runClientCommand } = await import("../cli/client/program.ts");
  await runClientCommand(process.argv.slice(2), process.env);
} else {
  const { main } = await import("../cli/gantry.ts");
  await main();
}
