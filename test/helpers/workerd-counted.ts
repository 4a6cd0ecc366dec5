import { expect } from "vitest";
import { type NoopWorker, startNoopWorker } from "./workerd-noop.ts";

/**
 * The noop Workers gateway with its D1 statements counted per invocation
 * (d1-counting-entry.ts), for tests of D1's queries-per-invocation limit: 1 000 on the
 * paid plan, 50 on the free one (https://developers.cloudflare.com/d1/platform/limits/).
 */

/** The free plan's 50, less room for the first request's migration check and such. */
export const D1_BOUND = 40;

export interface Invocation {
  path: string;
  statements: number;
  /** Statements by their SQL's first 60 characters: what to print when a bound is passed. */
  texts: Record<string, number>;
}

export interface CountedWorker {
  worker: NoopWorker;
  /** The invocations since the last call, once their background work is done. */
  invocations(): Promise<Invocation[]>;
  /** A request and the one invocation it made: its status, its JSON body and its count. */
  counted(
    ...request: Parameters<NoopWorker["api"]>
  ): Promise<{ status: number; body: unknown; statements: number; texts: string }>;
}

export async function startCountedWorker(bindings: Record<string, string>): Promise<CountedWorker> {
  const worker = await startNoopWorker({ entry: "test/helpers/d1-counting-entry.ts", bindings });
  const invocations = async () =>
    (await (await worker.api("/__d1/invocations")).json()) as Invocation[];
  // The first request migrates the database: not what these tests measure.
  await worker.api("/v1/jobs?limit=1");
  await invocations();
  return {
    worker,
    invocations,
    async counted(...request) {
      const answer = await worker.api(...request);
      const body = (await answer.json()) as unknown;
      const [only, ...more] = await invocations();
      expect(more).toEqual([]);
      const texts = JSON.stringify(only?.texts);
      return { status: answer.status, body, statements: only?.statements ?? 0, texts };
    },
  };
}

/** `n` batch items, each input carrying its index. */
export const numberedItems = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ input: { n: i } }));
