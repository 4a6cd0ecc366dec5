/**
 * What both retention suites stand on: a backend and a blob store (on disk unless
 * `options.blobs` names another: S3, R2) opened before a suite's tests and closed after, a
 * blob store in front of it that records deletes and fails the keys a test names, and a
 * sweep at a chosen instant. The state a suite's tests set (`backend`, `deletes`,
 * `failing`) stays in the suite, which hears of it or answers for it through `hooks`.
 */
import { afterAll, beforeAll } from "vitest";
import {
  type RetentionOptions,
  sweepRetention,
} from "../../../gateway/sweep/retention/sweep-retention.ts";
import type { BlobStore } from "../../../shared/blob/port.ts";
import {
  diskBlobs,
  type RetentionBackend,
  type RetentionBlobs,
  retentionFixtures,
} from "./fixtures.ts";

export interface RetentionSuiteOptions {
  blobs?: () => Promise<RetentionBlobs>;
}

export interface RetentionHooks {
  /** The backend, once open: the suite's tests read it. */
  opened(backend: RetentionBackend): void;
  /** Keys whose delete fails as the store does when unreachable; read at each delete. */
  failing?: () => ReadonlySet<string>;
  /** Every key a delete was asked for, whether or not it succeeded. */
  asked?: (key: string) => void;
  /** Each key deleted, in order. */
  deleted?: (key: string) => void;
}

/** Registers the suite's open and close hooks; returns its sweep and fixtures. */
export function retentionHarness(
  open: () => Promise<RetentionBackend>,
  options: RetentionSuiteOptions,
  hooks: RetentionHooks,
) {
  let backend: RetentionBackend;
  let store: RetentionBlobs;
  const blobs: Pick<BlobStore, "delete"> = {
    async delete(key) {
      hooks.asked?.(key);
      if (hooks.failing?.().has(key)) {
        await store.unreachable?.(key);
        throw new Error("blob store unreachable");
      }
      await store.store.delete(key);
      hooks.deleted?.(key);
    },
  };
  const gateway = () => ({ stores: backend.stores, blobs });
  const sweepAt = (now: number, options?: RetentionOptions, gw: object = gateway()) =>
    sweepRetention(gw as ReturnType<typeof gateway>, now, options);

  beforeAll(async () => {
    backend = await open();
    hooks.opened(backend);
    store = await (options.blobs ?? diskBlobs)();
  }, 60_000);
  afterAll(async () => {
    await backend?.cleanup();
    await store?.cleanup();
  });

  return { gateway, sweepAt, ...retentionFixtures(() => ({ backend, blobs: store })) };
}
