import { afterAll, beforeAll, expect, it } from "vitest";
import { runAgentsCommand } from "../../cli/agents.ts";
import type { AgentView } from "../../shared/protocol/index.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * `gantry agents list` read the 1 000 newest agents and said nothing of the rest. Every start
 * of an enrolled agent makes a row (pods, restarts), so after 1 000 of them an operator's
 * long-lived box, made once with `gantry agents create`, was missing from the listing while
 * it ran jobs. The listing now pages through every agent.
 */
let gw: InProcessGateway;
beforeAll(async () => {
  gw = await startInProcessGateway();
});
afterAll(() => gw?.close());

it("lists every agent, however many enrolled after the oldest", async () => {
  const env = { GANTRY_DATABASE_URL: gw.databasePath };
  const out: string[] = [];
  const output = { stdout: (text: string) => out.push(text), stderr: () => {} };
  await runAgentsCommand(["create", "--name", "box-1"], env, output);
  const later = Date.now() + 1;
  for (let n = 0; n < 1_005; n++) {
    await gw.gateway.stores.agents.create({ source: "enrollment", now: later + n });
  }
  out.length = 0;
  await runAgentsCommand(["list", "--json"], env, output);
  const views = JSON.parse(out.join("")) as AgentView[];
  expect(views).toHaveLength(1_006);
  expect(views.filter((view) => view.name === "box-1")).toHaveLength(1);
});
