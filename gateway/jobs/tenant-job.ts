import { notFound } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";

/**
 * The tenant's job `id`, or a 404. Another tenant's job answers like a missing one: ids are
 * not secrets, jobs are.
 */
export async function tenantJob(gateway: Gateway, tenantId: string, id: string): Promise<JobRow> {
  const row = await gateway.stores.jobs.forTenant(tenantId, id);
  if (!row) throw notFound("Job", id);
  return row;
}
