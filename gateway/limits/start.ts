import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { UserError } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import { bucketsOf, shareRateLimits } from "../rate-limit.ts";
import { postgresCounters, redisCounters } from "./shared-counters.ts";
import { SharedRateSync } from "./shared-rate.ts";

export interface SharedLimitsOptions {
  /**
   * GANTRY_RATE_LIMIT_STORE: `database` (the default: the gateway's Postgres; nothing on
   * SQLite, whose one gateway process sees all its requests), `redis://…`, or `off`.
   */
  store?: string | undefined;
  /** How often spending is exchanged. Default 200 ms. */
  intervalMs?: number;
}

/** Starts keeping this gateway's rate limits in step with the others'; null when off. */
export async function startSharedLimits(
  gateway: Gateway,
  db: Kysely<Database>,
  dialect: "sqlite" | "postgres",
  options: SharedLimitsOptions,
): Promise<SharedRateSync | null> {
  const store = options.store ?? "database";
  if (store === "off" || (store === "database" && dialect !== "postgres")) return null;
  let counters: Awaited<ReturnType<typeof postgresCounters>>;
  if (store === "database") counters = await postgresCounters(db);
  else if (/^rediss?:\/\//.test(store)) counters = await redisCounters(store);
  else {
    throw new UserError(
      `GANTRY_RATE_LIMIT_STORE is "${store}": use database, redis://host:port, or off.`,
    );
  }
  const sync = new SharedRateSync(bucketsOf(gateway), counters, {
    intervalMs: options.intervalMs ?? 200,
    now: () => gateway.now(),
    onError: (error) =>
      gateway.log.warn({ err: String(error) }, "rate limits: could not reach the shared store"),
  });
  shareRateLimits(gateway, sync);
  sync.start();
  return sync;
}
