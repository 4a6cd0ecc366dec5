import { createClient } from "redis";
import { z } from "zod";
import { randomToken } from "../../shared/ids.ts";
import { JobProgressEvent } from "../../shared/protocol/index.ts";
import type { JobNotifier } from "../notifier.ts";

/** The channel every gateway of one deployment publishes and subscribes to, unless named. */
const DEFAULT_CHANNEL = "gantry:changes";

/** One relayed change; `origin` lets a gateway skip the echo of its own. */
const RelayedChange = z.object({
  origin: z.string(),
  change: z.object({
    tenantId: z.string(),
    jobId: z.string(),
    seq: z.number().int().optional(),
    status: z.string().optional(),
    progress: JobProgressEvent.optional(),
  }),
});
type RelayedChange = z.infer<typeof RelayedChange>;

export interface RedisFeed {
  close(): Promise<void>;
}

export const isRedisFeed = (value: string | undefined): value is string =>
  value !== undefined && /^rediss?:\/\//.test(value);

/** `redis://host:port[/db][?channel=name]`: the server, and the channel (default `gantry:changes`). */
export function parseRedisFeedUrl(value: string): { url: string; channel: string } {
  const url = new URL(value);
  const channel = url.searchParams.get("channel") || DEFAULT_CHANNEL;
  url.searchParams.delete("channel");
  return { url: url.toString(), channel };
}

/**
 * The change feed over Redis pub/sub (`GANTRY_CHANGE_FEED=redis://…`): each gateway
 * publishes the changes it commits and hears every other gateway's on one channel. Pub/sub
 * keeps nothing for a subscriber that was away, so `live` drops while the subscriber is
 * disconnected (streams poll meanwhile) and every waiter re-reads once it is back. A change
 * no gateway announces (none today) still shows at the safety net's next read.
 */
export async function startRedisFeed(
  value: string,
  notifier: JobNotifier,
  log: { warn(fields: object, message: string): void },
): Promise<RedisFeed> {
  const { url, channel } = parseRedisFeedUrl(value);
  const origin = randomToken(12);
  const reconnectStrategy = (retries: number) =>
    Math.round(Math.random() * Math.min(10_000, 100 * 2 ** retries));
  // Fails fast while disconnected instead of queueing every change for later.
  const publisher = createClient({ url, disableOfflineQueue: true, socket: { reconnectStrategy } });
  const subscriber = createClient({
    url,
    name: `gantry-feed-${channel}`,
    socket: { reconnectStrategy },
  });
  let subscribed = false;
  const down = (error: unknown) => {
    if (notifier.live) log.warn({ err: String(error) }, "change feed: Redis down, polling");
    notifier.live = false;
  };
  publisher.on("error", () => {});
  subscriber.on("error", down);
  subscriber.on("end", () => down("connection closed"));
  subscriber.on("reconnecting", () => down("reconnecting"));
  subscriber.on("ready", () => {
    // node-redis subscribes again on its own once reconnected; what was said meanwhile is
    // lost, so every waiter re-reads.
    if (!subscribed) return;
    notifier.live = true;
    notifier.resync();
  });
  await Promise.all([publisher.connect(), subscriber.connect()]);
  await subscriber.subscribe(channel, (message) => {
    let relayed: RelayedChange;
    try {
      relayed = RelayedChange.parse(JSON.parse(message));
    } catch {
      return; // Not ours, or garbled.
    }
    if (relayed.origin === origin) return;
    notifier.announceRemote(stripUndefined(relayed.change));
  });
  subscribed = true;
  notifier.live = true;
  notifier.relay = (change) => {
    const payload: RelayedChange = { origin, change };
    publisher.publish(channel, JSON.stringify(payload)).catch(() => {
      // Redis away: the other gateways poll until it is back, then re-read.
    });
  };
  return {
    async close() {
      notifier.relay = null;
      notifier.live = false;
      await Promise.allSettled([subscriber.quit(), publisher.quit()]);
    },
  };
}

/** zod's optional fields come back as `undefined`; the notifier's JobChange omits them. */
function stripUndefined(change: RelayedChange["change"]) {
  const { seq, status, progress, ...rest } = change;
  return {
    ...rest,
    ...(seq !== undefined ? { seq } : {}),
    ...(status !== undefined ? { status } : {}),
    ...(progress !== undefined ? { progress } : {}),
  };
}
