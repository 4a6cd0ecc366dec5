import type { ModelState } from "../../shared/protocol/index.ts";
import { clientFromEnv } from "./common.ts";

/** `gantry models [MODEL]`: every model served, or one with its live state. */
export async function modelsCommand(
  id: string | undefined,
  flags: { json?: boolean },
  env: NodeJS.ProcessEnv,
) {
  const gantry = clientFromEnv(env);
  const models = id ? [await gantry.models.get(id)] : await gantry.models.list();
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(id ? models[0] : models)}\n`);
    return;
  }
  for (const model of models) {
    process.stdout.write(
      `${model.id}  (${model.content_types.join(", ")})${model.description ? `  ${model.description}` : ""}\n`,
    );
    if (model.state) process.stdout.write(`    state: ${stateLine(model.state)}\n`);
    const required = new Set(model.input_schema.required ?? []);
    for (const [name, schema] of Object.entries(model.input_schema.properties ?? {})) {
      const kind = schema.enum ? schema.enum.map(String).join(" | ") : (schema.type ?? "any");
      process.stdout.write(
        `    ${name}${required.has(name) ? "" : "?"}: ${kind}${schema.description ? `  ${schema.description}` : ""}\n`,
      );
    }
  }
}

/** A model's live state in one line: what an operator asks first when jobs wait. */
function stateLine(state: ModelState): string {
  const seconds = (ms: number | null) => (ms === null ? "–" : `${(ms / 1000).toFixed(1)} s`);
  const switched = state.paused
    ? `paused${state.reject_new ? ", new jobs refused" : ""}${state.reason ? ` (${state.reason})` : ""}`
    : "serving";
  return [
    switched,
    `${state.queued} queued, ${state.running} running`,
    `${state.agents} live agent${state.agents === 1 ? "" : "s"}`,
    `${state.starts_per_minute ?? "–"} starts/min`,
    `wait p50 ${seconds(state.wait_p50_ms)}, p95 ${seconds(state.wait_p95_ms)}`,
  ].join(" · ");
}
