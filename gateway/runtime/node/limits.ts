import type { OpenedDatabase } from "../../../shared/db/open.ts";
import { UserError } from "../../../shared/errors.ts";
import { randomToken } from "../../../shared/ids.ts";
import type { Gateway } from "../../context.ts";
import { shareRateLimits } from "../../limits/rate-limit.ts";
import type { SharedBucketStore } from "../../limits/shared-bucket.ts";
import { redisBuckets } from "../../limits/shared-counters.ts";
import { SharedRateLimiter } from "../../limits/shared-rate.ts";
import { postgresBuckets } from "../../store/rate-counters.ts";

export interface SharedLimitsOptions {
  /**
   * GANTRY_RATE_LIMIT_STORE: `database` (the default: the gateway's Postgres; nothing on
   * SQLite, whose one gateway process sees all its requests), `redis://…`, or `off`.
   */
  store?: string | undefined;
  /** How often shares are given back and taken. Default 200 ms. */
  intervalMs?: number;
  /** After each round: how many gateways share the store, this one included. */
  onGateways?: (count: number) => void;
}

/**
 * Starts answering this gateway's tenant limits from shares of buckets kept with the other
 * gateways (limits/shared-rate.ts); null when off. One round runs before it answers, so the
 * gateway knows how many gateways share the buckets and what they hold.
 */
export async function startSharedLimits(
  gateway: Gateway,
  database: Pick<OpenedDatabase, "db" | "dialect">,
  options: SharedLimitsOptions,
): Promise<SharedRateLimiter | null> {
  const store = options.store ?? "database";
  if (store === "off" || (store === "database" && database.dialect !== "postgres")) return null;
  let buckets: SharedBucketStore;
  if (store === "database") buckets = await postgresBuckets(database.db);
  else if (/^rediss?:\/\//.test(store)) buckets = await redisBuckets(store);
  else {
    throw new UserError(
      `GANTRY_RATE_LIMIT_STORE is "${store}": use database, redis://host:port, or off.`,
    );
  }
  const onError = (error: unknown) =>
    gateway.log.warn({ err: String(error) }, "rate limits: could not reach the shared store");
  const limiter = new SharedRateLimiter(buckets, {
    gatewayId: `gw_${randomToken(12).replace(/[^A-Za-z0-9]/g, "x")}`,
    intervalMs: options.intervalMs ?? 200,
    now: () => gateway.now(),
    onError,
    ...(options.onGateways ? { onGateways: options.onGateways } : {}),
  });
  // Without it the gateway limits alone until a round succeeds (and says so).
  await limiter.sync().catch(onError);
  shareRateLimits(gateway, limiter);
  limiter.start();
  return limiter;
}
