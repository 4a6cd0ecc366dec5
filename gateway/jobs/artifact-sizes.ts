import type { AgentEvent } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AgentRow } from "../store/agents.ts";
import { artifactBlobKey } from "../store/uploads.ts";
import { storedArtifacts } from "./artifacts.ts";

type Succeeded = Extract<AgentEvent, { type: "succeeded" }>;

/**
 * Checks a success report's artifacts against the objects stored, one `head` each, before
 * the report is recorded. The gateway's own blob routes (disk, R2) refuse a PUT past its
 * `max_bytes`, but an S3 presigned PUT cannot bound a size it does not know
 * (shared/blob/s3.ts), so a faulty agent could store up to 5 GiB per artifact there, and the
 * output's `size_bytes` is only what the agent said. An artifact over its model's
 * `max_bytes` fails the job `output_too_large`, as the agent itself fails one it sees too
 * large (gpu-agent/supervisor/artifacts.ts), and its stored artifacts are deleted (a failed
 * job serves none); otherwise each `size_bytes` becomes the stored object's, and an object
 * stored under an artifact the output does not name (inline, or left out) is deleted.
 *
 * Only the running attempt's own report is checked: any other is refused or answered as a
 * repeat anyway, and must not touch the objects the current attempt wrote under the same keys.
 */
export async function checkReportedArtifacts(
  gateway: Gateway,
  agent: AgentRow,
  jobId: string,
  event: AgentEvent,
): Promise<AgentEvent> {
  if (event.type !== "succeeded") return event;
  // The claim handed out a URL for every artifact the model declares, whatever the report
  // names: so any model that declares one has its job read, not only reports naming one.
  if (![...gateway.models.values()].some((model) => model.artifacts?.length)) return event;
  const row = await gateway.stores.jobs.byId(jobId);
  const current = row?.status === "running" && row.attempt === event.attempt;
  if (!row || !current || row.agent_id !== agent.id) return event;
  const declared = gateway.models.get(row.model)?.artifacts ?? [];
  if (declared.length === 0) return event;
  const named = new Set(storedArtifacts(event.output).map(({ name }) => name));
  const key = (name: string) => artifactBlobKey(jobId, name);
  // Heads only for what the output names: a key never PUT (a mask_only run's `image`) is
  // deleted blindly, which succeeds on every store, where a HEAD of it needs s3:ListBucket.
  const sizes = await Promise.all(
    declared
      .filter((spec) => named.has(spec.name))
      .map(async (spec) => {
        const head = await gateway.blobs.head(key(spec.name));
        return { name: spec.name, size: head?.sizeBytes ?? null, max: spec.max_bytes };
      }),
  );
  const tooLarge = sizes.find(({ size, max }) => size !== null && size > max);
  // An object the output does not name is served by nothing, and retention deletes only
  // what is served: it goes now. A failed job serves none at all.
  const unserved = declared.filter((spec) => tooLarge || !named.has(spec.name));
  await Promise.all(unserved.map((spec) => gateway.blobs.delete(key(spec.name))));
  if (tooLarge) {
    const message = `artifact ${tooLarge.name} is ${tooLarge.size} bytes; the gateway takes ${tooLarge.max}`;
    gateway.log.warn(
      { job_id: jobId, agent_id: agent.id, artifact: tooLarge.name, size_bytes: tooLarge.size },
      "an agent reported an artifact over its max_bytes: the job fails output_too_large",
    );
    return failedTooLarge(event, message);
  }
  const output = { ...(event.output as Record<string, unknown>) };
  for (const { name, size } of sizes) {
    if (size !== null)
      output[name] = { ...(output[name] as Record<string, unknown>), size_bytes: size };
  }
  return { ...event, output };
}

function failedTooLarge(event: Succeeded, message: string): AgentEvent {
  const { output: _output, ack_receipt: _receipt, type: _type, ...usage } = event;
  return {
    ...usage,
    type: "failed",
    error: { type: "permanent", code: "output_too_large", message },
    will_retry: false,
  };
}
