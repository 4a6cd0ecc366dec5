import { AGENT_LOST_CODE, retryCeilingMs } from "../../shared/job-retry.ts";
import type { WaitingReason } from "../../shared/protocol/index.ts";
import { registeredModels } from "../agents/reports.ts";
import { agentState } from "../agents/view.ts";
import type { Gateway } from "../context.ts";
import type { ActiveOnModel } from "../store/job-release.ts";
import type { JobRow } from "../store/job-rows.ts";
import { storedLimits } from "../store/tenants.ts";
import { AGENTS_READ, modelJobCounts } from "./model-state.ts";
import { pausedModels } from "./model-switches.ts";
import { sharedReadings } from "./shared-readings.ts";

/** Who serves a model: registered agents that are live, and those that are not. */
interface Fleet {
  live: number;
  /** The live agents' slots, and how many their last heartbeats said were busy. */
  slots: number;
  busy: number;
  down: number;
  /** Why the first agent that is not live is not (gone, draining, revoked…). */
  downReason: string | null;
}

/** The fleet per model, read once per period for every reader (shared-readings.ts). */
const fleets = sharedReadings<Fleet>({ periodMs: (gateway) => gateway.config.queueDepthCacheMs });

async function readFleet(gateway: Gateway, model: string): Promise<Fleet> {
  const now = gateway.now();
  const rows = await gateway.stores.agents.heardFrom(AGENTS_READ);
  const fleet: Fleet = { live: 0, slots: 0, busy: 0, down: 0, downReason: null };
  for (const row of rows) {
    if (row.registered_at === null || !registeredModels(row).includes(model)) continue;
    const { state, reason } = agentState(row, { jobsRunning: 0, waitingByModel: new Map() }, now);
    if (state === "gone" || state === "revoked" || state === "draining") {
      fleet.down++;
      fleet.downReason ??= `${row.name}: ${reason}`;
    } else {
      fleet.live++;
      fleet.slots += row.slots ?? 0;
      fleet.busy += row.slots_busy ?? 0;
    }
  }
  return fleet;
}

/** What of a queued job its reason depends on. */
export type WaitingSubject = Pick<
  JobRow,
  "model" | "tenant_id" | "attempt" | "error" | "released_at" | "updated_at"
>;

export interface Waiting {
  waiting_reason: WaitingReason;
  waiting_detail: string;
}

/** A tenant's `max_running_jobs` and its jobs holding those places now, per model. */
type TenantLoad = { max: number | null; active: ActiveOnModel[] };

/**
 * Per tenant, read once for a whole listing page (one tenant's jobs): `waitingOf` of each
 * held row would otherwise read the tenant and count its active jobs again.
 */
export type TenantLoads = Map<string, Promise<TenantLoad>>;

async function readTenantLoad(gateway: Gateway, tenantId: string): Promise<TenantLoad> {
  const [tenant, active] = await Promise.all([
    gateway.stores.tenants.byId(tenantId),
    gateway.stores.jobs.activeByModel(tenantId),
  ]);
  return { max: tenant ? storedLimits(tenant).max_running_jobs : null, active };
}

/**
 * Why a queued job has not started, from the store alone, first cause first: the model
 * paused; a retry's backoff; the tenant at `max_running_jobs`; no live agent for the model
 * (none registered it, or those that did are gone or draining); jobs ahead of it
 * (`ahead`, the jobs an agent takes before it, as `queue_position` counts them); else a
 * free slot about to take it, or every slot busy.
 */
export async function waitingOf(
  gateway: Gateway,
  row: WaitingSubject,
  ahead: number,
  loads: TenantLoads = new Map(),
): Promise<Waiting> {
  const paused = (await pausedModels(gateway)).get(row.model);
  if (paused) {
    const why = paused.reason ? `: ${paused.reason}` : "";
    return reason("model_paused", `The operator paused model ${row.model}${why}.`);
  }
  const code = backingOff(row, gateway.now());
  if (code !== null) {
    return reason(
      "delayed",
      `Attempt ${row.attempt} failed${code ? ` (${code})` : ""}; the queue retries it after its backoff.`,
    );
  }
  if (row.released_at === null) {
    let load = loads.get(row.tenant_id);
    if (!load) {
      load = readTenantLoad(gateway, row.tenant_id);
      loads.set(row.tenant_id, load);
    }
    const { max, active } = await load;
    const holding = sum(active, "running") + sum(active, "released");
    if (max !== null && holding >= max) {
      return reason(
        "tenant_concurrency_limit",
        `Your max_running_jobs is ${max}, and ${holding} of your jobs ${holding === 1 ? "holds" : "hold"} those places (${placesHeld(active)}); this one starts when one of them ends.`,
      );
    }
  }
  const fleet = await fleets.get(gateway, row.model, () => readFleet(gateway, row.model));
  if (fleet.live === 0 && fleet.down === 0) {
    return reason("no_agent_for_model", `No live agent serves model ${row.model}.`);
  }
  if (fleet.live === 0) {
    return reason(
      "agents_unhealthy",
      `The ${fleet.down} agent${fleet.down === 1 ? "" : "s"} serving ${row.model} ${fleet.down === 1 ? "is" : "are"} not taking jobs (${fleet.downReason}).`,
    );
  }
  if (ahead > 0) {
    return reason(
      "behind_jobs",
      `${ahead} job${ahead === 1 ? "" : "s"} of model ${row.model} ${ahead === 1 ? "is" : "are"} ahead of it (higher priority first, then in fair turn by tenant).`,
    );
  }
  const agents = `${fleet.live} agent${fleet.live === 1 ? "" : "s"} serving ${row.model}`;
  // Busy by the store's count of the model's running jobs or by the heartbeats (a beat
  // late, but they see an agent's other models), whichever says more.
  const { running } = await modelJobCounts(gateway, row.model);
  if (Math.max(running, fleet.busy) < fleet.slots) {
    return reason(
      "starting",
      `It is next; the ${agents} ${fleet.live === 1 ? "has" : "have"} a free slot and take${fleet.live === 1 ? "s" : ""} it in a moment.`,
    );
  }
  return reason("agents_busy", `It is next; every slot of the ${agents} is busy.`);
}

/**
 * The failed attempt's error code while its retry may still be waiting out its backoff in the
 * queue (it stays released, JobStore.fail), else null. Once the backoff's ceiling has passed,
 * or after a lost agent (the sweeper publishes that job again at once), whatever holds the job
 * now is the reason: "delayed" would otherwise stay for good on a job no live agent will take.
 */
function backingOff(row: WaitingSubject, now: number): string | null {
  if (row.attempt === 0 || row.error === null || row.released_at === null) return null;
  const code = errorCode(row.error);
  if (code === AGENT_LOST_CODE) return null;
  if (now >= row.updated_at + retryCeilingMs(row.attempt)) return null;
  return code ?? "";
}

const reason = (waiting_reason: WaitingReason, waiting_detail: string): Waiting => ({
  waiting_reason,
  waiting_detail,
});

function errorCode(stored: string): string | null {
  try {
    const parsed = JSON.parse(stored) as { code?: unknown };
    return typeof parsed.code === "string" ? parsed.code : null;
  } catch {
    return null;
  }
}

const sum = (active: ActiveOnModel[], kind: "running" | "released") =>
  active.reduce((total, model) => total + model[kind], 0);

/**
 * What holds the tenant's places, by what they are: jobs running, and jobs handed to the
 * agents of a model and not yet taken, named by model. Those may wait for an agent that is
 * gone or was never started; "about to start" said nothing of which.
 */
function placesHeld(active: ActiveOnModel[]): string {
  const running = sum(active, "running");
  const parts = running ? [`${running} running`] : [];
  const released = active.filter((model) => model.released > 0);
  if (released.length) {
    const models = released.map((model) => `${model.released} of ${model.model}`).join(", ");
    parts.push(`handed to agents and not yet taken: ${models}`);
  }
  return parts.join("; ");
}
