import pg from "pg";
import { parsePostgresUrl } from "./postgres.ts";

/**
 * One change as the jobs triggers announce it: a state change (migration 0008,
 * `tenant job seq status`), or a running job's new progress (migration 0015,
 * `tenant job progress model <json>`, the JSON as the `progress` column holds it).
 */
export type AnnouncedChange =
  | { tenantId: string; jobId: string; seq: number; status: string; progress?: undefined }
  | { tenantId: string; jobId: string; progress: { model: string; stored: string } };

export interface ChangeListenerOptions {
  onChange(change: AnnouncedChange): void;
  /**
   * Called each time the listening connection is up (the first time and after every
   * reconnect: announcements made while it was down are lost, so readers must re-read),
   * and with `false` when it drops.
   */
  onLive(live: boolean): void;
  /**
   * Another gateway started listening (it says `HELLO` on the channel first): it counts on
   * this one's announcements from now on (gateway/feed/announce-peers.ts).
   */
  onHello?(): void;
  log?: { warn(fields: object, message: string): void };
  /** Reconnect backoff bounds. Defaults 100 ms and 10 s. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface ChangeListener {
  /** Its connection while it listens: the server's process id. */
  listening(): { pid: number } | null;
  close(): Promise<void>;
}

/** The channel the jobs triggers announce on: named after the jobs table's schema (0008). */
export const CHANNEL_QUERY = "SELECT 'gantry_' || left(md5(current_schema()), 16) AS channel";

/** What a listener says on its channel just before it listens (`onHello`). */
export const HELLO = "hello";

/** The statement a listener sends: what `pg_stat_activity` shows of its connection after. */
export const listenStatement = (channel: string) => `LISTEN ${pg.escapeIdentifier(channel)}`;

/**
 * Listens to the jobs trigger's announcements on one dedicated connection (a pooled one
 * cannot LISTEN: the pool hands it to queries in between), reconnecting with capped
 * exponential backoff and full jitter while Postgres is away.
 */
export function listenForChanges(url: string, options: ChangeListenerOptions): ChangeListener {
  const target = parsePostgresUrl(url);
  const minMs = options.minBackoffMs ?? 100;
  const maxMs = options.maxBackoffMs ?? 10_000;
  let client: pg.Client | null = null;
  let listening: { pid: number } | null = null;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const reconnect = (reason: unknown) => {
    if (closed) return;
    options.onLive(false);
    listening = null;
    client?.removeAllListeners();
    void client?.end().catch(() => {});
    client = null;
    const ceiling = Math.min(maxMs, minMs * 2 ** failures++);
    const delay = Math.round(Math.random() * ceiling);
    options.log?.warn(
      { err: String(reason), retry_in_ms: delay },
      "change feed: Postgres listener down, reconnecting",
    );
    timer = setTimeout(connect, delay);
    timer.unref();
  };

  const connect = async () => {
    timer = null;
    const next = new pg.Client({
      connectionString: target.connectionString,
      ...(target.schema ? { options: `-c search_path=${target.schema}` } : {}),
    });
    client = next;
    next.on("error", reconnect);
    next.on("end", () => reconnect("connection ended"));
    next.on("notification", (message) => {
      if (message.payload === HELLO) return options.onHello?.();
      const change = parseAnnouncement(message.payload);
      if (change) options.onChange(change);
    });
    try {
      await next.connect();
      // The trigger names the channel after the jobs table's schema: ask for ours.
      const { rows } = await next.query<{ channel: string }>(CHANNEL_QUERY);
      const channel = rows[0]?.channel ?? "gantry";
      // Before listening, so that it does not come back: the gateways announcing nothing
      // while nobody else listened announce again at once.
      await next.query("SELECT pg_notify($1, $2)", [channel, HELLO]);
      await next.query(listenStatement(channel));
      if (closed || client !== next) return;
      // pg's typings leave out the server's process id, which it keeps from the handshake.
      const pid = (next as unknown as { processID?: number | null }).processID;
      listening = typeof pid === "number" ? { pid } : null;
      failures = 0;
      options.onLive(true);
    } catch (error) {
      if (client === next) reconnect(error);
    }
  };

  void connect();
  return {
    listening: () => listening,
    async close() {
      closed = true;
      listening = null;
      if (timer) clearTimeout(timer);
      const last = client;
      client = null;
      last?.removeAllListeners();
      last?.on("error", () => {});
      await last?.end().catch(() => {});
    },
  };
}

export function parseAnnouncement(payload: string | undefined): AnnouncedChange | null {
  const [tenantId, jobId, seq, status] = (payload ?? "").split(" ");
  if (!tenantId || !jobId || !seq || !status) return null;
  if (seq === "progress") {
    // The JSON may hold spaces: it is everything after the model.
    const stored = (payload ?? "").split(" ").slice(4).join(" ");
    return stored ? { tenantId, jobId, progress: { model: status, stored } } : null;
  }
  return { tenantId, jobId, seq: Number(seq), status };
}
