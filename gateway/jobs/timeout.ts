import { HttpProblem } from "../../shared/errors.ts";
import type { ModelSpec } from "../models.ts";
import type { Tenant } from "../store/tenants.ts";

/** A job's execution limit as stored, and whether it is its model's default. */
export interface JobTimeout {
  seconds: number;
  /** The job named none: an agent's own config for the model may say otherwise. */
  fromDefault: boolean;
}

/**
 * The job's `timeout_seconds`, else its model's default. Over the plan's maximum is a 422
 * (a run the plan does not pay for); a default over it is cut to it, and then no agent
 * config may raise it again, so it no longer counts as the default.
 */
export function jobTimeout(
  spec: ModelSpec,
  tenant: Pick<Tenant, "plan" | "limits">,
  requested: number | undefined,
): JobTimeout {
  const max = tenant.limits.max_timeout_seconds;
  if (requested === undefined) {
    const seconds = Math.min(spec.defaultTimeoutSeconds, max);
    return { seconds, fromDefault: seconds === spec.defaultTimeoutSeconds };
  }
  if (requested <= max) return { seconds: requested, fromDefault: false };
  const message = `at most ${max} on your plan (${tenant.plan})`;
  throw new HttpProblem(
    422,
    "timeout_too_long",
    "Timeout over the plan's maximum",
    `timeout_seconds is ${requested}: ${message}.`,
    { errors: [{ path: "timeout_seconds", message }], max_timeout_seconds: max },
  );
}
