/**
 * A prefetch slot held for one delivery, with the consumer's own copy of its lease. The
 * broker's lease (a pending entry's idle time, an ack_wait) runs out without telling the
 * consumer, and a late settle could act on the *next* delivery of the same message, so the
 * consumer keeps a deadline no later than the broker's: once it passes, the slot is freed
 * and every settle rejects with `LeaseLostError` without asking the broker.
 */
export interface LocalLease {
  readonly held: boolean;
  /** Lets the slot go (settled, or lost); idempotent. */
  free(): void;
  /** Moves the local deadline (earlier or later). */
  holdUntil(deadline: number): void;
}

export function openLocalLease(deadline: number, onFree: () => void): LocalLease {
  let held = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const lease: LocalLease = {
    get held() {
      return held;
    },
    free() {
      if (!held) return;
      held = false;
      clearTimeout(timer);
      onFree();
    },
    holdUntil(next: number) {
      if (!held) return;
      clearTimeout(timer);
      timer = setTimeout(() => lease.free(), Math.max(0, next - Date.now()));
    },
  };
  lease.holdUntil(deadline);
  return lease;
}

/** The error a message nothing can read is dead-lettered with. */
export function unreadableError(body: string) {
  return { type: "permanent" as const, code: "invalid_message", message: body.slice(0, 2000) };
}

/** The error a message whose leases kept running out is dead-lettered with. */
export function exhaustedError(maxAttempts: number) {
  return {
    type: "transient" as const,
    code: "max_attempts_exceeded",
    message: `delivered ${maxAttempts} times without being settled: the consumer died or overran its lease`,
  };
}
