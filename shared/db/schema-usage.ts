import type { Generated } from "kysely";

/** Usage (migration 0022): its columns of `jobs` and the hourly rollup, apart from schema.ts. */

/** What a job's runs used, and who submitted it; a trigger rolls changes up (0022). */
export interface JobUsageColumns {
  /** The API key that submitted it; null on older jobs. */
  key_id: Generated<string | null>;
  /** Device time (ms) of the runs that ended it (billed), and how many those were. */
  gpu_ms: Generated<number>;
  billed_runs: Generated<number>;
  /** Device time (ms) of the runs the fleet lost (a crash, an eviction); never billed. */
  wasted_gpu_ms: Generated<number>;
  /** Where its latest run ran: execution provider and device name. */
  provider: Generated<string | null>;
  device: Generated<string | null>;
  /** How long its latest run waited for its model to load (ms; migration 0023); null: warm. */
  load_ms: Generated<number | null>;
}

/**
 * Device time per tenant, API key ('' for none), model and hour (ms, start of the hour),
 * written by a trigger on `jobs` (migration 0022) and kept after the jobs are purged.
 */
export interface UsageHourlyTable {
  tenant_id: string;
  hour: number;
  model: string;
  key_id: string;
  /** Runs that ended a job (billed). */
  jobs: number;
  gpu_ms: number;
  wasted_gpu_ms: number;
}
