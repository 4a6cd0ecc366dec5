import { ANNOUNCE_SETTING } from "../../shared/db/migrations/0029-quiet-announcements.ts";
import type { OpenedDatabase } from "../../shared/db/open.ts";
import type { SessionSettings } from "../../shared/db/session-settings.ts";
import { type ListenersSeen, listenersSeen, listenStatementOf } from "../store/feed-listeners.ts";

/** How often a gateway looks for other listeners on its channel. */
export const PEER_CHECK_MS = 2_000;
/**
 * How long a listener that has just (re)started reads on the poll's period before it trusts
 * the announcements: long enough for every other gateway to have seen it and announced
 * again (a check, and a statement that was running then).
 */
export const JOIN_GRACE_MS = 2 * PEER_CHECK_MS + 1_000;
/**
 * After a hello, announce for this long whatever the checks see: the newcomer's LISTEN may
 * not show yet in the check that follows.
 */
const HELLO_HOLD_MS = 2 * PEER_CHECK_MS;

/** Announce unless it is plain that nobody else listens. */
export const mustAnnounce = (seen: ListenersSeen) =>
  seen.others > 0 || seen.hidden > 0 || !seen.visible;

/**
 * Keeps this gateway's announcements (the jobs triggers' `pg_notify`, migration 0029) on
 * while any other session listens to its channel, and off while none does: with one
 * gateway, every announcement only came back to the gateway that made the change, which
 * had told its own streams in process already (issue 29: 0.2–0.4 ms of Postgres's CPU a
 * job). A gateway that starts listening says hello on the channel first, and the others
 * announce again at once (`hello`); one that could not hear it (a listener reconnecting)
 * sees the newcomer within a check, and until then the newcomer's feed does not count on
 * announcements alone (`JOIN_GRACE_MS`, start-feed.ts). Anything unsure announces: a
 * failed check, statements hidden from this role, an older gateway (its LISTEN shows like
 * ours).
 */
export function keepPeersAnnounced(options: {
  db: OpenedDatabase["db"];
  settings: SessionSettings;
  /** This gateway's own listener, when it has one up. */
  listening: () => { pid: number } | null;
  log: { warn(fields: object, message: string): void };
}): { hello(): void; close(): void } {
  const { db, settings, listening, log } = options;
  let statement: string | null = null;
  let checking = false;
  let helloAt = Number.NEGATIVE_INFINITY;
  const check = async () => {
    if (checking) return;
    checking = true;
    try {
      statement ??= await listenStatementOf(db);
      const seen = await listenersSeen(db, statement, listening()?.pid ?? null);
      const held = performance.now() - helloAt < HELLO_HOLD_MS;
      settings.set(ANNOUNCE_SETTING, held || mustAnnounce(seen) ? "on" : "off");
    } catch (error) {
      settings.set(ANNOUNCE_SETTING, "on");
      log.warn(
        { err: String(error) },
        "change feed: could not look for other gateways; announcing",
      );
    } finally {
      checking = false;
    }
  };
  void check();
  const timer = setInterval(check, PEER_CHECK_MS);
  timer.unref();
  return {
    hello() {
      helloAt = performance.now();
      settings.set(ANNOUNCE_SETTING, "on");
    },
    close() {
      clearInterval(timer);
    },
  };
}
