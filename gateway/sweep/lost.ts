import type { Gateway } from "../context.ts";
import { queueMessageOf } from "../jobs/lifecycle.ts";
import { republishOrFail } from "./dead.ts";

/** Where each gateway's pass stopped: a long backlog is checked a batch per sweep, in turn. */
const cursors = new WeakMap<Gateway, string>();

/**
 * The outbox's second half. The first republishes jobs whose publish was never confirmed;
 * this one finds queued jobs whose publish *was* confirmed but whose message the queue no
 * longer holds, and publishes them again. That happens on a broker that acknowledges before
 * its write is on disk (Redis with `appendfsync everysec` loses up to a second on a power
 * cut; JetStream syncs in the background), or when an operator purges a stream. Only queues
 * that can look a job's message up take part (`JobQueue.absent`: redis, nats); the others
 * keep what they confirm. A job checked just as an agent finishes it may be published once
 * more: that copy's claim is refused and it is acked, as for any duplicate.
 */
export async function republishLost(
  gateway: Gateway,
  now: number,
  graceMs: number,
  batch: number,
  /** A gone message's job claimed this many times was dead-lettered: it fails instead. */
  maxAttempts = 5,
): Promise<number> {
  const queue = gateway.queue;
  if (!queue.absent) return 0;
  const after = cursors.get(gateway) ?? null;
  const rows = await gateway.stores.jobs.publishedQueued(now - graceMs, after, batch);
  const last = rows.at(-1);
  if (rows.length < batch || !last) cursors.delete(gateway);
  else cursors.set(gateway, last.id);
  if (rows.length === 0) return 0;
  let gone: Set<string>;
  try {
    gone = new Set(await queue.absent(rows.map(queueMessageOf)));
  } catch (error) {
    gateway.log.warn({ err: String(error) }, "cannot check the queue for lost messages");
    return 0;
  }
  let republished = 0;
  for (const row of rows) {
    if (!gone.has(row.id)) continue;
    const outcome = await republishOrFail(gateway, row, maxAttempts, now, {});
    if (outcome === "republished") republished++;
  }
  return republished;
}
