import type { OpenedDatabase } from "../../shared/db/open.ts";
import { listenForChanges } from "../../shared/db/pg-listen.ts";
import { isPostgresUrl, parsePostgresUrl } from "../../shared/db/postgres.ts";
import { SessionSettings } from "../../shared/db/session-settings.ts";
import type { JobNotifier } from "../notifier.ts";
import { JOIN_GRACE_MS, keepPeersAnnounced } from "./announce-peers.ts";
import { isRedisFeed, startRedisFeed } from "./redis-feed.ts";

/**
 * `auto` (the default): on Postgres, wake streams and waiters from the database's
 * LISTEN/NOTIFY, so a change made through any gateway reaches them within milliseconds;
 * `poll`: re-read the store every `feedPollMs` instead (for comparison);
 * `redis://…[?channel=]`: Redis pub/sub between the gateways instead (redis-feed.ts).
 */
export type ChangeFeedMode = "auto" | "poll" | `redis://${string}` | `rediss://${string}`;

export interface FeedDatabase {
  dialect: string;
  url: string;
  db: OpenedDatabase["db"];
  /**
   * The pool's session settings, where the gateway may turn its announcements off while no
   * other gateway listens (announce-peers.ts); absent: it always announces.
   */
  settings?: SessionSettings;
}

/**
 * The session settings for a gateway's pool on `url`, where it may turn its announcements
 * off: on Postgres, unless behind a pooler that shares server sessions between clients
 * (`?prepare=false`), where a session's setting would reach other clients' statements.
 */
export function feedSettings(url: string): SessionSettings | undefined {
  return isPostgresUrl(url) && parsePostgresUrl(url).prepare ? new SessionSettings() : undefined;
}

/** The Node gateway's change feed, as `mode` says; `close` stops it. */
export async function startChangeFeed(
  notifier: JobNotifier,
  database: FeedDatabase,
  mode: ChangeFeedMode | undefined,
  log: { warn(fields: object, message: string): void },
): Promise<{ close(): Promise<void> }> {
  // SQLite has one gateway process, which sees every change itself.
  notifier.live = database.dialect === "sqlite";
  const redis = isRedisFeed(mode) ? await startRedisFeed(mode, notifier, log) : null;
  if (database.dialect !== "postgres") return { close: async () => await redis?.close() };
  let grace: ReturnType<typeof setTimeout> | null = null;
  let peers: ReturnType<typeof keepPeersAnnounced> | null = null;
  const listener =
    (mode ?? "auto") === "auto"
      ? listenForChanges(database.url, {
          onChange: (change) => notifier.announceFeed(change),
          onHello: () => peers?.hello(),
          onLive: (live) => {
            if (grace) clearTimeout(grace);
            grace = null;
            if (!live) {
              notifier.live = false;
              return;
            }
            // Announcements made while it was down are lost: everyone reads again now.
            notifier.resync();
            // A gateway that missed its hello (its own listener down) sees this one within
            // a check, and may not announce until then: the streams poll a little longer.
            grace = setTimeout(() => {
              grace = null;
              notifier.live = true;
            }, JOIN_GRACE_MS);
            grace.unref();
          },
          log,
        })
      : null;
  peers = database.settings
    ? keepPeersAnnounced({
        db: database.db,
        settings: database.settings,
        listening: () => listener?.listening() ?? null,
        log,
      })
    : null;
  return {
    async close() {
      if (grace) clearTimeout(grace);
      peers?.close();
      await listener?.close();
      await redis?.close();
    },
  };
}
