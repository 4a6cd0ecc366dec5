import type { Selectable } from "kysely";
import type { QueueMessageTable } from "../../db/schema.ts";

type Row = Selectable<QueueMessageTable>;

/**
 * A consumer in this process that waits for messages with room for some: a take waiting at
 * the gateway for an agent's session (leases.ts), a consumer loop between rounds
 * (consumer.ts). A publish made while one waits inserts the messages it has room for already
 * leased to it and hands it the rows, instead of inserting them ready, waking it, and having
 * it lease them back with a statement of its own (issue 29: a statement and a row write a job
 * fewer, and no round trip between the publish and the take).
 *
 * The row is the one a claim would have leased (a lease token, its expiry, one attempt), so
 * everything after is as for any delivery: settles guarded by the token, redelivery when the
 * lease runs out. A waiter waits only because its last look found nothing due, so what it is
 * handed is what it would have leased next; a message that became due meanwhile without a
 * publish in this process (a retry's delay ending, another process's publish) waits for the
 * waiter's next look, at most one idle poll later.
 */
export class Waiter {
  #promised = 0;
  #idle: (() => void)[] = [];

  /**
   * `leaseMs`: its queue's lease (queues on one database may differ); `free`: how many it
   * would take now; `deliver`: the rows leased to it, in queue order, called once per publish
   * that promised it some (with none when that publish failed).
   */
  constructor(
    readonly leaseMs: number,
    readonly models: readonly string[] | undefined,
    private readonly free: () => number,
    private readonly deliver: (rows: Row[]) => void,
  ) {}

  /** What a publish may still promise it. */
  room(): number {
    return this.free() - this.#promised;
  }

  serves(model: string): boolean {
    return this.models === undefined || this.models.includes(model);
  }

  promise(count: number): void {
    this.#promised += count;
  }

  /** A publish's rows for it (fewer than promised, none, if the insert failed). */
  settle(promised: number, rows: Row[]): void {
    // Delivered first: the rows hold their slots before the promise stops counting.
    if (rows.length > 0) this.deliver(rows);
    this.#promised -= promised;
    if (this.#promised === 0) for (const wake of this.#idle.splice(0)) wake();
  }

  /**
   * Resolves once no publish under way has rows for it: a waiter that stops waiting (its
   * take answered, its loop's pause over) waits for those first, or their leases would be
   * held by no one until they ran out.
   */
  settled(): Promise<void> {
    if (this.#promised === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}

/** The waiters of every queue on one database (as its wakers: index.ts). */
export type Waiters = Set<Waiter>;
