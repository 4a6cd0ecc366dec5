import type { Lane } from "../amqp/names.ts";

/** The consumers each model has: one per priority lane, and the mover of delayed messages. */
export type NatsConsumerKind = Lane | "delay";

/**
 * Every stream, subject and consumer name under one prefix (letters, digits, '_', '-').
 *
 * - Stream `<p>-jobs` (work-queue retention, file storage) holds the live messages on
 *   `<p>.jobs.<model>.<lane>.<job id>` and the delayed ones on `<p>.delay.<model>.<job id>`.
 *   One subject per job lets `absent` look a job's message up (last_by_subj).
 * - Stream `<p>-dead` (limits retention, file storage): dead letters on `<p>.dead.<model>`.
 * - Durable pull consumers `<model>-high`, `<model>-normal` and `<model>-delay` on
 *   `<p>-jobs`, one filter each (a work-queue stream needs them disjoint).
 *
 * Model ids are `[a-z0-9._-]`; a subject token and a consumer name may not hold '.', so
 * '_' is written `__` and '.' `_d` (one-to-one: every '_' in a token starts a pair).
 */
export class NatsNames {
  constructor(readonly prefix: string) {}

  get stream(): string {
    return `${this.prefix}-jobs`;
  }

  get deadStream(): string {
    return `${this.prefix}-dead`;
  }

  get subjects(): string[] {
    return [`${this.prefix}.jobs.>`, `${this.prefix}.delay.>`];
  }

  get deadSubjects(): string[] {
    return [`${this.prefix}.dead.>`];
  }

  token(model: string): string {
    return model.replaceAll("_", "__").replaceAll(".", "_d");
  }

  subject(model: string, lane: Lane, jobId: string): string {
    return `${this.prefix}.jobs.${this.token(model)}.${lane}.${jobId}`;
  }

  delaySubject(model: string, jobId: string): string {
    return `${this.prefix}.delay.${this.token(model)}.${jobId}`;
  }

  deadSubject(model: string): string {
    return `${this.prefix}.dead.${this.token(model)}`;
  }

  /** What a consumer delivers; `jobsOf` is what a wake-up subscription listens on. */
  filter(model: string, kind: NatsConsumerKind): string {
    const token = this.token(model);
    return kind === "delay"
      ? `${this.prefix}.delay.${token}.*`
      : `${this.prefix}.jobs.${token}.${kind}.*`;
  }

  jobsOf(model: string): string {
    return `${this.prefix}.jobs.${this.token(model)}.>`;
  }

  consumer(model: string, kind: NatsConsumerKind): string {
    return `${this.token(model)}-${kind}`;
  }
}

/** Headers Gantry sets. */
export const HEADER = {
  /** On a delayed message: the lane it goes to when due, and when (ms after its stream time). */
  lane: "Gantry-Lane",
  delayMs: "Gantry-Delay-Ms",
  /** On a dead letter: the error JSON and the attempts made. */
  error: "Gantry-Error",
  attempts: "Gantry-Attempts",
} as const;

/** What the ack subject of a JetStream delivery says about it. */
export interface DeliveryInfo {
  /** How many times this consumer delivered the message, this time included. */
  delivered: number;
  streamSeq: number;
  /** When the message was stored, in ms (server clock). */
  storedAt: number;
}

/**
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<nanos>.<pending>` (9 tokens, the
 * 2.9 form) or with `<domain>.<account hash>` after `ACK` and a random token at the end
 * (12 tokens, newer servers).
 */
export function parseAckSubject(reply: string): DeliveryInfo | undefined {
  const t = reply.split(".");
  const at = t.length === 9 ? 4 : t.length >= 11 ? 6 : -1;
  if (t[0] !== "$JS" || t[1] !== "ACK" || at < 0) return undefined;
  const delivered = Number(t[at]);
  const streamSeq = Number(t[at + 1]);
  const storedAt = Number(BigInt(t[at + 3] ?? "0") / 1_000_000n);
  if (!Number.isFinite(delivered) || !Number.isFinite(streamSeq)) return undefined;
  return { delivered, streamSeq, storedAt };
}
