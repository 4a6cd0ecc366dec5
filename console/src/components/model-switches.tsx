import { useCallback, useEffect, useState } from "preact/hooks";
import type {
  Model,
  ModelPurged,
  ModelState,
  ModelSwitched,
} from "../../../shared/protocol/model.ts";
import type { ConsoleApi } from "../api.ts";
import { errorText } from "../format.ts";

/** What a model is doing, in the words of the table's State column. */
function stateText(state: ModelState): string {
  const queued = `${state.queued} queued, ${state.running} running`;
  if (!state.paused) return `serving · ${queued}`;
  const how = state.reject_new ? "paused, new jobs refused" : "paused";
  return `${how}${state.reason ? ` (${state.reason})` : ""} · ${queued}`;
}

/**
 * The operator's switches per model (`/v1/admin/models/{id}/…`), each row with the model's
 * live state: Pause only while it serves, Resume only while paused, and Purge (which cancels
 * every queued job of the model) only after the operator confirms the count it names.
 */
export function ModelSwitches(props: { api: ConsoleApi; say: (message: string) => void }) {
  const { api, say } = props;
  const [models, setModels] = useState<Model[]>([]);
  const load = useCallback(async () => {
    const list = await api.sdk.models.list();
    setModels(
      await Promise.all(list.map((m) => api.get<Model>(`/v1/models/${encodeURIComponent(m.id)}`))),
    );
  }, [api]);
  useEffect(() => void load().catch((e) => say(errorText(e))), [load, say]);

  const path = (id: string, action: string) =>
    `/v1/admin/models/${encodeURIComponent(id)}/${action}`;
  const run = (what: () => Promise<string>) =>
    void what()
      .then(say)
      .then(load)
      .catch((e) => say(errorText(e)));
  const pause = (id: string) =>
    run(async () => {
      await api.post<ModelSwitched>(path(id, "pause"));
      return `Paused ${id}: agents take none of its jobs until it is resumed.`;
    });
  const resume = (id: string) =>
    run(async () => {
      const state = await api.post<ModelSwitched>(path(id, "resume"));
      return `Resumed ${id}: ${state.republished ?? 0} waiting jobs released again (the rest follow as agents take them).`;
    });
  const purge = (id: string, queued: number) => {
    if (!window.confirm(`Cancel all ${queued} queued jobs of ${id}? This cannot be undone.`))
      return;
    run(async () => {
      let canceled = 0;
      let cursor: string | null = null;
      // One bounded pass per call: follow the cursor until nothing queued is left.
      do {
        const pass: ModelPurged = await api.post<ModelPurged>(
          path(id, "purge"),
          cursor ? { cursor } : {},
        );
        canceled += pass.canceled;
        cursor = pass.next_cursor;
      } while (cursor);
      return `Purged ${id}: ${canceled} queued jobs canceled.`;
    });
  };

  return (
    <table aria-label="Model switches">
      <thead>
        <tr>
          <th>Model</th>
          <th>State</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {models.map((m) => (
          <tr key={m.id}>
            <td>{m.id}</td>
            <td>{m.state ? stateText(m.state) : "–"}</td>
            <td>
              {m.state?.paused ? (
                <button type="button" onClick={() => resume(m.id)}>
                  Resume
                </button>
              ) : (
                <button type="button" onClick={() => pause(m.id)}>
                  Pause
                </button>
              )}{" "}
              <button
                type="button"
                disabled={!m.state?.queued}
                title={m.state?.queued ? undefined : "Nothing queued to cancel"}
                onClick={() => purge(m.id, m.state?.queued ?? 0)}
              >
                Purge
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
