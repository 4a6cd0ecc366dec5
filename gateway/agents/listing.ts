import type { AgentView } from "../../shared/protocol/index.ts";
import type { AgentRow, KyselyAgentStore } from "../store/agents.ts";
import { toAgentView } from "./view.ts";

/**
 * The operator's views of these agents, with what the job store knows about them (jobs
 * running on each) and how many jobs wait per model: one listing for the admin API and
 * the `gantry agents` command alike.
 */
export async function agentViews(
  agents: Pick<KyselyAgentStore, "runningJobs">,
  rows: AgentRow[],
  waitingByModel: ReadonlyMap<string, number>,
  now: number,
): Promise<AgentView[]> {
  const running = await agents.runningJobs(rows.map((row) => row.id));
  return rows.map((row) =>
    toAgentView(row, { jobsRunning: running.get(row.id) ?? 0, waitingByModel }, now),
  );
}
