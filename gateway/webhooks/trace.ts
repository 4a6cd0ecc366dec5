import type { Tracer, TraceSpan } from "../../shared/tracing/tracer.ts";
import type { Gateway } from "../context.ts";
import type { DueDelivery } from "../store/webhook-deliveries.ts";
import type { PostResult } from "./post.ts";

/** How webhook attempts join their job's trace: the tracer, and where the job's context is. */
export interface WebhookTrace {
  tracer: Tracer;
  /** The job's stored `traceparent` (its submit span's); null when there is no such job. */
  parentOf(row: DueDelivery): Promise<string | null>;
}

/** The webhook deps' `trace` when the gateway traces (OpenTelemetry on); else nothing. */
export function webhookTrace(gateway: Gateway): { trace?: WebhookTrace } {
  const { tracer } = gateway;
  if (!tracer) return {};
  const parentOf = async (row: DueDelivery) =>
    (await gateway.stores.jobs.forTenant(row.tenant_id, row.job_id))?.traceparent ?? null;
  return { trace: { tracer, parentOf } };
}

/** A span for attempt `n`, a child of the job's context (a root for a batch's or usage's). */
export async function attemptSpan(
  row: DueDelivery,
  n: number,
  trace: WebhookTrace | undefined,
): Promise<TraceSpan | null> {
  if (!trace) return null;
  const parent = await trace.parentOf(row).catch(() => null);
  return trace.tracer.startSpan("webhook", {
    parent,
    kind: "client",
    // The host only: the URL's path and query may carry the tenant's tokens.
    attributes: {
      "gantry.delivery_id": row.id,
      "gantry.attempt": n,
      "server.address": hostOf(row.url),
    },
  });
}

export function endAttemptSpan(span: TraceSpan | null, result: PostResult): void {
  if (!span) return;
  if (result.statusCode !== null)
    span.setAttributes({ "http.response.status_code": result.statusCode });
  if (result.error !== null) span.fail(result.reason ?? "failed");
  span.end();
}

/** The receiver's host (its path and query may carry the tenant's tokens: never logged). */
export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "";
  }
}
