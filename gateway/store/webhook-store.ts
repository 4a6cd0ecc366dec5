import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import {
  type AttemptRecord,
  abandonDelivery,
  claimAttempt,
  claimRedelivery,
  finishAttempt,
  recordAttempt,
} from "./webhook-attempts.ts";
import {
  type DeliveryState,
  type DueDelivery,
  deliveryForTenant,
  dueDeliveries,
  dueDelivery,
  type EnqueueWebhookInput,
  enqueueWebhook,
  enqueueWebhooks,
} from "./webhook-deliveries.ts";
import {
  disabledEndpoint,
  enableEndpoint,
  listEndpoints,
  recordEndpointFailure,
  recordEndpointSuccess,
} from "./webhook-endpoints.ts";
import { deliveryCountsByState, listDeliveries } from "./webhook-history.ts";
import { clearOutbox, outboxDue } from "./webhook-outbox.ts";
import { rotateWebhookSecret, signingSecrets, webhookSecretState } from "./webhook-secrets.ts";

/** The webhook store, as `Stores["webhooks"]`: its type is what this returns. */
export type WebhookStore = ReturnType<typeof webhookStore>;

/**
 * Webhook deliveries, their attempts, endpoint health and the tenants' signing secrets, on
 * one database. It sends nothing: gateway/webhooks/ signs and posts, and records here.
 */
export function webhookStore(db: Kysely<Database>) {
  return {
    /** Records an event to deliver, due at once; returns the delivery id (one per `eventSeq`). */
    enqueue: (input: EnqueueWebhookInput, now: number) => enqueueWebhook(db, input, now),
    /** Many job events' deliveries, pending, in one statement (their first attempt is the dispatcher's). */
    enqueueMany: (inputs: readonly (EnqueueWebhookInput & { eventSeq: number })[], now: number) =>
      enqueueWebhooks(db, inputs, now),
    /** Webhook events recorded before `before` not yet seen by the sweeper (webhook-outbox.ts). */
    outboxDue: (before: number, limit: number) => outboxDue(db, before, limit),
    clearOutbox: (entries: readonly { jobId: string; seq: number }[]) => clearOutbox(db, entries),
    /** Pending deliveries due at `now`, longest due first, of no tenant in `skipTenants`. */
    due: (now: number, limit: number, skipTenants: readonly string[] = []) =>
      dueDeliveries(db, now, limit, skipTenants),
    /** This delivery if it is pending and due at `now`. */
    dueOne: (deliveryId: string, now: number) => dueDelivery(db, deliveryId, now),
    /** A tenant's delivery of one of its jobs, in any state; undefined for another's. */
    deliveryForTenant: (target: { tenantId: string; jobId: string; deliveryId: string }) =>
      deliveryForTenant(db, target),
    /** Claims the next attempt of a due delivery (webhook-attempts.ts); false: another won. */
    claim: (row: DueDelivery, now: number, leaseUntil: number) =>
      claimAttempt(db, row, now, leaseUntil),
    /** Claims the next attempt whatever the delivery's state (a redelivery). */
    claimRedelivery: (row: DueDelivery & { state: string }, now: number, leaseUntil: number) =>
      claimRedelivery(db, row, now, leaseUntil),
    /** Fails a delivery whose schedule is spent, without an attempt; false: another won. */
    abandon: (row: DueDelivery, now: number) => abandonDelivery(db, row, now),
    recordAttempt: (
      deliveryId: string,
      n: number,
      timing: { at: number; durationMs: number },
      result: AttemptRecord,
    ) => recordAttempt(db, deliveryId, n, timing, result),
    /** The state after attempt `n`, if no newer attempt was claimed since. */
    finishAttempt: (
      deliveryId: string,
      n: number,
      state: DeliveryState,
      nextAttemptAt: number | null,
      at: number,
    ) => finishAttempt(db, deliveryId, n, state, nextAttemptAt, at),
    /** Why this tenant's URL is disabled, since when; null when it is not. */
    disabledEndpoint: (tenantId: string, url: string) => disabledEndpoint(db, tenantId, url),
    recordEndpointSuccess: (tenantId: string, url: string, at: number) =>
      recordEndpointSuccess(db, tenantId, url, at),
    /** Disables the endpoint once its failures span `disableAfterMs` (default 5 days). */
    recordEndpointFailure: (
      tenantId: string,
      url: string,
      failure: { at: number; error: string },
      disableAfterMs?: number,
    ) => recordEndpointFailure(db, tenantId, url, failure, disableAfterMs),
    /** One job's deliveries with their attempts, oldest first. */
    deliveries: (tenantId: string, jobId: string) => listDeliveries(db, tenantId, jobId),
    /** Deliveries per state, every tenant together (the metrics). */
    countsByState: () => deliveryCountsByState(db),
    endpoints: (tenantId: string) => listEndpoints(db, tenantId),
    /** Clears a disabled endpoint; null if the URL is unknown. */
    enableEndpoint: (tenantId: string, url: string, now: number) =>
      enableEndpoint(db, tenantId, url, now),
    /** Null for an unknown tenant. */
    secretState: (tenantId: string, now: number) => webhookSecretState(db, tenantId, now),
    rotateSecret: (tenantId: string, options: { now: number; overlapMs?: number }) =>
      rotateWebhookSecret(db, tenantId, options),
    /** The current secret, then the rotated-out one during its overlap. */
    signingSecrets: (tenantId: string, now: number) => signingSecrets(db, tenantId, now),
  };
}
