import { listenForChanges } from "../../shared/db/pg-listen.ts";
import type { JobNotifier } from "../notifier.ts";
import { isRedisFeed, startRedisFeed } from "./redis-feed.ts";

/**
 * `auto` (the default): on Postgres, wake streams and waiters from the database's
 * LISTEN/NOTIFY, so a change made through any gateway reaches them within milliseconds;
 * `poll`: re-read the store every `feedPollMs` instead (for comparison);
 * `redis://…[?channel=]`: Redis pub/sub between the gateways instead (redis-feed.ts).
 */
export type ChangeFeedMode = "auto" | "poll" | `redis://${string}` | `rediss://${string}`;

/** The Node gateway's change feed, as `mode` says; `close` stops it. */
export async function startChangeFeed(
  notifier: JobNotifier,
  database: { dialect: string; url: string },
  mode: ChangeFeedMode | undefined,
  log: { warn(fields: object, message: string): void },
): Promise<{ close(): Promise<void> }> {
  // SQLite has one gateway process, which sees every change itself.
  notifier.live = database.dialect === "sqlite";
  if (isRedisFeed(mode)) return startRedisFeed(mode, notifier, log);
  if (database.dialect !== "postgres" || (mode ?? "auto") !== "auto")
    return { close: async () => {} };
  return listenForChanges(database.url, {
    onChange: (change) => notifier.announceFeed(change),
    onLive: (live) => {
      notifier.live = live;
      if (live) notifier.resync();
    },
    log,
  });
}
