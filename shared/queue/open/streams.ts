import { UserError } from "../../errors.ts";
import {
  logQueueError,
  type OpenedQueue,
  type OpenQueueOptions,
  parseQueueUrl,
  readyOrClose,
  refuseUnknownParams,
  unreachable,
} from "./types.ts";

/** Query parameters Gantry reads from a redis URL; node-redis never sees them. */
const REDIS_PARAMS = ["prefix", "group"] as const;

/**
 * `redis://[user:pass@]host:port[/db][?prefix=gantry&group=agents]` or `rediss://…` (TLS):
 * the `redis` queue on Redis Streams (see `redis/index.ts`).
 */
export async function openRedisUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  const parsed = parseQueueUrl(url, "redis://");
  // node-redis reads no query parameter: only these two are anyone's.
  refuseUnknownParams(parsed, "redis://", REDIS_PARAMS);
  const prefix = parsed.searchParams.get("prefix") ?? undefined;
  const group = parsed.searchParams.get("group") ?? undefined;
  for (const name of REDIS_PARAMS) parsed.searchParams.delete(name);
  const { createRedisQueue } = await import("../redis/index.ts");
  const queue = createRedisQueue({
    url: parsed.toString(),
    ...(prefix ? { prefix } : {}),
    ...(group ? { group } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    onError: logQueueError(options),
  });
  return readyOrClose(queue, "Redis", options);
}

/**
 * `nats://[user:pass@ | token@]host:port[,host:port…][?prefix=gantry&max_ack_pending=10000]`:
 * the `nats` queue on JetStream (see `nats/index.ts`). More servers of a cluster are listed
 * comma-separated in the host part.
 */
export async function openNatsUrl(url: string, options: OpenQueueOptions): Promise<OpenedQueue> {
  const match = /^nats:\/\/(?:([^@/]*)@)?([^/?#]+)\/?(?:\?(.*))?$/i.exec(url);
  if (!match) throw new UserError("queue URL is not a valid nats:// URL");
  const [, auth, hosts, query] = match;
  const params = new URLSearchParams(query ?? "");
  for (const name of params.keys()) {
    if (name !== "prefix" && name !== "max_ack_pending") {
      throw new UserError(`queue URL: nats:// takes prefix and max_ack_pending, not "${name}"`);
    }
  }
  const maxAckPending = params.get("max_ack_pending");
  if (maxAckPending !== null && !/^[1-9]\d*$/.test(maxAckPending)) {
    throw new UserError("queue URL: max_ack_pending must be a whole number above 0");
  }
  const [user, pass] = (auth ?? "").split(":").map((part) => decodeURIComponent(part));
  const credentials =
    pass !== undefined ? { user, pass } : user ? { token: user } : ({} as Record<string, never>);
  const servers = hosts!.split(",");
  const timeoutMs = options.connectTimeoutMs ?? 15_000;
  const where = `nats://${servers.join(",")}`;
  const { createNatsQueue } = await import("../nats/index.ts");
  try {
    const queue = await createNatsQueue({
      connection: { servers, timeout: timeoutMs, ...credentials },
      ...(params.get("prefix") ? { prefix: params.get("prefix")! } : {}),
      ...(maxAckPending ? { maxAckPending: Number(maxAckPending) } : {}),
      ...(options.limits ? { limits: options.limits } : {}),
      onError: logQueueError(options),
    });
    return { queue, description: queue.description, close: () => queue.close() };
  } catch (error) {
    if (error instanceof UserError) throw error;
    throw unreachable("NATS", where, timeoutMs, error);
  }
}
