import type { AgentEvent } from "../../shared/protocol/index.ts";
import type { RunUsage } from "../store/usage.ts";

/**
 * What a report says its run used, and who pays for it. The tenant pays for the runs that
 * ended its job: a success, or a failure of its own making (a permanent error: bad input,
 * an output too large, its own timeout). A transient failure, retried or not, and a release
 * (a drain, an eviction) are the fleet's: counted apart as wasted.
 *
 * A billed report without a measured time still counts its job (at 0 ms); a wasted one
 * without a time records nothing.
 */
export function runUsageOf(event: AgentEvent): RunUsage | undefined {
  const billable =
    event.type === "succeeded" ||
    (event.type === "failed" && !event.will_retry && event.error.type === "permanent");
  if (!billable && event.gpu_ms === undefined) return undefined;
  return {
    gpuMs: event.gpu_ms ?? 0,
    billable,
    provider: event.provider,
    device: event.device,
    loadMs: event.load_ms,
  };
}
