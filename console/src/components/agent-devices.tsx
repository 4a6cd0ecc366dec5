import type { AgentView } from "../../../shared/protocol/agent-admin.ts";

/**
 * An agent's GPUs, one line each: index and name, memory used of total, utilisation, and
 * the models loaded there; a GPU taken out says so. A CPU agent shows its loaded models.
 */
export function AgentDevices(props: { agent: AgentView }) {
  const { devices, loaded_models: loaded } = props.agent;
  if (devices.length === 0) {
    return <span>{loaded.length > 0 ? `CPU: ${loaded.join(", ")}` : "–"}</span>;
  }
  return (
    <ul class="devices">
      {devices.map((device) => (
        <li key={device.index} class={device.failed ? "failed" : undefined}>
          <b>GPU {device.index}</b> {device.name} · {device.vram_used_mb} / {device.vram_total_mb}{" "}
          MB
          {device.utilization === null ? "" : ` · ${device.utilization}%`}
          {device.failed ? " · taken out" : ""}
          {device.models.length > 0 ? ` · ${device.models.join(", ")}` : ""}
        </li>
      ))}
    </ul>
  );
}
