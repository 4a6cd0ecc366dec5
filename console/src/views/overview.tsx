import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { AgentList, AgentView } from "../../../shared/protocol/agent-admin.ts";
import type { ModelState } from "../../../shared/protocol/model.ts";
import type { FeedEvent, Job, JobStatus } from "../api.ts";
import { AgentDevices } from "../components/agent-devices.tsx";
import { Chart } from "../components/chart.tsx";
import { UsageTable } from "../components/usage-table.tsx";
import { ago, errorText, ms, quantile } from "../format.ts";
import { useFeed, useTick } from "../live.ts";
import type { Session } from "../session.ts";

const HOUR = 3_600_000;
/** The jobs of the last hour read at start, newest first; the feed keeps them current. */
const MAX_LOADED = 2000;
const SAMPLE_MS = 1000;
const SAMPLES = 300;

interface Tracked {
  model: string;
  status: JobStatus;
  created: number;
  started: number | null;
  finished: number | null;
}

const track = (job: Job): Tracked => ({
  model: job.model,
  status: job.status,
  created: Date.parse(job.created_at),
  started: job.started_at ? Date.parse(job.started_at) : null,
  finished: job.finished_at ? Date.parse(job.finished_at) : null,
});

function AgentsTable(props: { agents: AgentView[] }) {
  return (
    <table aria-label="Agents">
      <thead>
        <tr>
          <th>Agent</th>
          <th>State</th>
          <th>Provider</th>
          <th>Slots busy</th>
          <th>VRAM</th>
          <th>GPUs and models</th>
          <th>Last heartbeat</th>
        </tr>
      </thead>
      <tbody>
        {props.agents.map((agent) => (
          <tr key={agent.id}>
            <td>
              {agent.name} <code>{agent.id}</code>
            </td>
            <td title={agent.state_reason}>{agent.state}</td>
            <td>{agent.provider ?? "–"}</td>
            <td>
              {agent.slots_busy ?? "–"} / {agent.slots ?? "–"}
            </td>
            <td>
              {agent.vram_total_mb ? `${agent.vram_used_mb ?? 0} / ${agent.vram_total_mb} MB` : "–"}
            </td>
            <td>
              <AgentDevices agent={agent} />
            </td>
            <td>{ago(agent.last_heartbeat_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function OverviewView(props: { session: Session }) {
  const { api, feed, admin } = props.session;
  const jobs = useRef(new Map<string, Tracked>());
  const finishes = useRef<number[]>([]);
  const [series, setSeries] = useState<number[][]>([[], [], []]);
  const [agents, setAgents] = useState<AgentView[] | null>(null);
  const [states, setStates] = useState(new Map<string, ModelState>());
  const [error, setError] = useState<string | null>(null);
  const tick = useTick(SAMPLE_MS);

  useEffect(() => {
    const controller = new AbortController();
    void (async () => {
      const since = Date.now() - HOUR;
      let cursor: string | undefined;
      try {
        do {
          const page = await api.listJobs({ cursor, limit: 100 }, controller.signal);
          for (const job of page.data)
            if (!jobs.current.has(job.id)) jobs.current.set(job.id, track(job));
          const oldest = page.data.at(-1);
          cursor =
            page.next_cursor &&
            oldest &&
            Date.parse(oldest.created_at) > since &&
            jobs.current.size < MAX_LOADED
              ? page.next_cursor
              : undefined;
        } while (cursor);
      } catch (failure) {
        if (!controller.signal.aborted) setError(errorText(failure));
      }
    })();
    return () => controller.abort();
  }, [api]);

  useFeed(
    feed,
    useCallback((event: FeedEvent) => {
      const at = Date.parse(event.at);
      const known = jobs.current.get(event.job_id);
      const tracked: Tracked = known ?? {
        model: event.model,
        status: event.status,
        created: at,
        started: null,
        finished: null,
      };
      tracked.status = event.status;
      if (event.status === "running") tracked.started = at;
      if (["succeeded", "failed", "canceled", "expired"].includes(event.status)) {
        tracked.finished = at;
        finishes.current.push(Date.now());
      }
      jobs.current.set(event.job_id, tracked);
    }, []),
  );

  // The model's own state (every tenant's queue, agents serving it, pace, pause), on
  // gateways whose GET /v1/models/{id} carries it.
  useEffect(() => {
    void api.sdk.models
      .list()
      .then((list) =>
        Promise.all(
          list.map((m) =>
            api.get<{ id: string; state?: ModelState }>(`/v1/models/${encodeURIComponent(m.id)}`),
          ),
        ),
      )
      .then((views) => setStates(new Map(views.flatMap((v) => (v.state ? [[v.id, v.state]] : [])))))
      .catch(() => {});
  }, [api, Math.floor(tick / 5)]);

  useEffect(() => {
    if (!admin) return;
    api
      .get<AgentList>("/v1/admin/agents")
      .then((list) => setAgents(list.data.filter((a) => !a.revoked_at)))
      .catch((failure) => setError(errorText(failure)));
  }, [api, admin, Math.floor(tick / 5)]);

  // One sample a second: jobs finished per second (over the last 10 s) and jobs queued.
  useEffect(() => {
    const now = Date.now();
    finishes.current = finishes.current.filter((t) => now - t < 10_000);
    // The queue as the gateway counts it where it says, else this tenant's jobs seen queued.
    const queued = states.size
      ? [...states.values()].reduce((sum, state) => sum + state.queued, 0)
      : [...jobs.current.values()].filter((j) => j.status === "queued").length;
    setSeries(([xs = [], rate = [], depth = []]) => [
      [...xs, now / 1000].slice(-SAMPLES),
      [...rate, finishes.current.length / 10].slice(-SAMPLES),
      [...depth, queued].slice(-SAMPLES),
    ]);
  }, [tick]);

  const since = Date.now() - HOUR;
  const recent = [...jobs.current.values()].filter(
    (j) => j.created >= since || (j.finished ?? 0) >= since,
  );
  const models = [...new Set([...recent.map((j) => j.model), ...states.keys()])].sort();
  return (
    <section>
      <h1>Overview</h1>
      {error && <p role="alert">{error}</p>}
      <table aria-label="Models">
        <thead>
          <tr>
            <th>Model</th>
            <th>Queued</th>
            <th>Running</th>
            <th>Succeeded (1 h)</th>
            <th>Failed (1 h)</th>
            <th>p50 wait</th>
            <th>p95 wait</th>
            <th>Model state</th>
          </tr>
        </thead>
        <tbody>
          {models.map((model) => {
            const mine = recent.filter((j) => j.model === model);
            const count = (status: JobStatus) => mine.filter((j) => j.status === status).length;
            const waits = mine.flatMap((j) => (j.started ? [j.started - j.created] : []));
            const state = states.get(model);
            return (
              <tr key={model}>
                <td>{model}</td>
                <td>{count("queued")}</td>
                <td>{count("running")}</td>
                <td>{count("succeeded")}</td>
                <td>{count("failed")}</td>
                <td>{ms(state?.wait_p50_ms ?? quantile(waits, 0.5))}</td>
                <td>{ms(state?.wait_p95_ms ?? quantile(waits, 0.95))}</td>
                <td>
                  {state
                    ? `${state.paused ? "paused" : "serving"} · ${state.queued} queued · ${state.agents} agent${state.agents === 1 ? "" : "s"} · ${state.starts_per_minute ?? "–"} starts/min`
                    : "–"}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {recent.length === 0 && <p>No jobs in the last hour.</p>}
      <Chart
        label="Throughput (jobs/s) and queue depth"
        series={["finished/s", "queued"]}
        data={series}
      />
      <h2>Usage this month</h2>
      <UsageTable api={api} refresh={Math.floor(tick / 30)} />
      <h2>Agents</h2>
      {admin ? (
        agents && <AgentsTable agents={agents} />
      ) : (
        <p class="hint">Agents are listed for keys with the admin scope.</p>
      )}
    </section>
  );
}
