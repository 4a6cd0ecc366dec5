import type { UsageReport } from "../shared/protocol/index.ts";
import type { Transport } from "./http.ts";

export type { UsageReport, UsageRow } from "../shared/protocol/index.ts";

export interface UsageOptions {
  /** A day (`2026-12-01`) or an instant; default the start of this month (UTC). */
  from?: string;
  /** Hours starting before this; default now. */
  to?: string;
  /** Any of `model`, `key`, `day`; none: one row, the period's total. */
  groupBy?: readonly ("model" | "key" | "day")[];
  signal?: AbortSignal;
}

/** `usage.get`: the caller's device time (`GET /v1/usage`), and what its budget has left. */
export class Usage {
  constructor(private readonly transport: Transport) {}

  get(options: UsageOptions = {}): Promise<UsageReport> {
    const query = new URLSearchParams();
    if (options.from) query.set("from", options.from);
    if (options.to) query.set("to", options.to);
    if (options.groupBy?.length) query.set("group_by", options.groupBy.join(","));
    const search = query.size > 0 ? `?${query}` : "";
    return this.transport.json<UsageReport>({ path: `/v1/usage${search}`, signal: options.signal });
  }
}
