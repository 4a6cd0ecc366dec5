import { useCallback, useEffect, useState } from "preact/hooks";
import type { AgentList, AgentView } from "../../../shared/protocol/agent-admin.ts";
import { ModelSwitches } from "../components/model-switches.tsx";
import { ago, errorText } from "../format.ts";
import type { Session } from "../session.ts";

interface TenantView {
  id: string;
  name: string;
  plan: string;
  created_at: string;
}
interface KeyView {
  id: string;
  name: string | null;
  prefix: string;
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
}
const SCOPES = ["jobs:read", "jobs:write", "admin"];

function Keys(props: { session: Session; tenant: TenantView; act: Act }) {
  const { api } = props.session;
  const [keys, setKeys] = useState<KeyView[]>([]);
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<string[]>(["jobs:read", "jobs:write"]);
  const [shown, setShown] = useState<string | null>(null);
  const path = `/v1/admin/tenants/${encodeURIComponent(props.tenant.id)}/keys`;
  const load = useCallback(
    () => api.get<{ data: KeyView[] }>(path).then((list) => setKeys(list.data)),
    [api, path],
  );
  useEffect(() => void load(), [load]);
  return (
    <div class="keys">
      <table aria-label={`Keys of ${props.tenant.id}`}>
        <tbody>
          {keys.map((key) => (
            <tr key={key.id}>
              <td>
                <code>{key.prefix}…</code> {key.name}
              </td>
              <td>{key.scopes.join(", ")}</td>
              <td>{key.revoked_at ? `revoked ${ago(key.revoked_at)}` : "active"}</td>
              <td>
                {!key.revoked_at && (
                  <button
                    type="button"
                    onClick={() =>
                      props.act(() => api.post(`/v1/admin/keys/${key.id}/revoke`), load)
                    }
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          props.act(async () => {
            const made = await api.post<{ key: string }>(path, {
              ...(name ? { name } : {}),
              scopes,
            });
            setShown(made.key);
          }, load);
        }}
      >
        <label>
          Key name
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        {SCOPES.map((scope) => (
          <label key={scope}>
            <input
              type="checkbox"
              checked={scopes.includes(scope)}
              onChange={(e) =>
                setScopes((s) =>
                  e.currentTarget.checked ? [...s, scope] : s.filter((x) => x !== scope),
                )
              }
            />
            {scope}
          </label>
        ))}
        <button type="submit">Create key</button>
      </form>
      {shown && (
        <p role="status" class="new-key">
          New key (shown once, copy it now): <code>{shown}</code>{" "}
          <button type="button" onClick={() => setShown(null)}>
            Done
          </button>
        </p>
      )}
    </div>
  );
}

type Act = (what: () => Promise<unknown>, then?: () => Promise<unknown>) => void;

export function AdminView(props: { session: Session }) {
  const { api } = props.session;
  const [tenants, setTenants] = useState<TenantView[]>([]);
  const [agents, setAgents] = useState<AgentView[]>([]);
  const [open, setOpen] = useState<string | null>(null);
  const [tenantName, setTenantName] = useState("");
  const [plan, setPlan] = useState("free");
  const [message, setMessage] = useState<string | null>(null);

  const load = useCallback(async () => {
    const [t, a] = await Promise.all([
      api.get<{ data: TenantView[] }>("/v1/admin/tenants?limit=100"),
      api.get<AgentList>("/v1/admin/agents"),
    ]);
    setTenants(t.data);
    setAgents(a.data);
  }, [api]);
  useEffect(() => void load().catch((e) => setMessage(errorText(e))), [load]);

  const act: Act = (what, then = load) => {
    void what()
      .then((result) => {
        if (result && typeof result === "object" && "object" in result)
          setMessage(`Done: ${JSON.stringify(result).slice(0, 200)}`);
        return then();
      })
      .catch((e) => setMessage(errorText(e)));
  };

  return (
    <section class="admin">
      <h1>Admin</h1>
      {message && <p role="status">{message}</p>}
      <h2>Tenants</h2>
      <ul class="tenants">
        {tenants.map((tenant) => (
          <li key={tenant.id}>
            <button
              type="button"
              class="link"
              onClick={() => setOpen(open === tenant.id ? null : tenant.id)}
            >
              {tenant.name} <code>{tenant.id}</code>
            </button>{" "}
            · {tenant.plan}
            {open === tenant.id && <Keys session={props.session} tenant={tenant} act={act} />}
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          act(() => api.post("/v1/admin/tenants", { name: tenantName, plan }));
        }}
      >
        <label>
          Tenant name
          <input
            required
            value={tenantName}
            onInput={(e) => setTenantName(e.currentTarget.value)}
          />
        </label>
        <label>
          Plan
          <select value={plan} onChange={(e) => setPlan(e.currentTarget.value)}>
            <option>free</option>
            <option>pro</option>
            <option>enterprise</option>
          </select>
        </label>
        <button type="submit">Create tenant</button>
      </form>
      <h2>Agents</h2>
      <table aria-label="Agents">
        <thead>
          <tr>
            <th>Agent</th>
            <th>State</th>
            <th>Models</th>
            <th>Last heartbeat</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {agents.map((agent) => (
            <tr key={agent.id}>
              <td>
                {/* An agent made without a name is named by its id: say it once. */}
                {agent.name === agent.id ? "" : `${agent.name} `}
                <code>{agent.id}</code>
              </td>
              <td title={agent.state_reason}>{agent.revoked_at ? "revoked" : agent.state}</td>
              <td>{agent.models.join(", ")}</td>
              <td>{ago(agent.last_heartbeat_at)}</td>
              <td>
                {!agent.revoked_at && (
                  <button
                    type="button"
                    onClick={() => act(() => api.post(`/v1/admin/agents/${agent.id}/revoke`))}
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Models</h2>
      <ModelSwitches api={api} say={setMessage} />
    </section>
  );
}
