import type {
  WebhookAttemptReason,
  WebhookDelivery,
  WebhookDeliveryEventType,
  WebhookDeliveryState,
  WebhookEndpoint,
  WebhookSecretDetails,
} from "../../shared/protocol/webhook-api.ts";
import type { EndpointView } from "../store/webhook-endpoints.ts";
import type { WebhookDeliveryView } from "../store/webhook-history.ts";
import type { WebhookSecretState } from "../store/webhook-secrets.ts";

/** Stored rows as the public API shows them: ISO instants, `object` tags. */

const iso = (ms: number) => new Date(ms).toISOString();
const isoOrNull = (ms: number | null) => (ms == null ? null : iso(ms));

export function toWebhookDelivery(view: WebhookDeliveryView): WebhookDelivery {
  return {
    object: "webhook_delivery",
    id: view.id,
    job_id: view.job_id,
    event_type: view.event_type as WebhookDeliveryEventType,
    url: view.url,
    state: view.state as WebhookDeliveryState,
    attempt_count: view.attempts,
    next_attempt_at: isoOrNull(view.next_attempt_at),
    created_at: iso(view.created_at),
    updated_at: iso(view.updated_at),
    attempts: view.attempt_log.map((attempt) => ({
      n: attempt.n,
      at: iso(attempt.at),
      status_code: attempt.status_code,
      reason: attempt.reason as WebhookAttemptReason | null,
      error: attempt.error,
      duration_ms: attempt.duration_ms,
    })),
  };
}

export function toWebhookEndpoint(view: EndpointView): WebhookEndpoint {
  return {
    object: "webhook_endpoint",
    url: view.url,
    status: view.status,
    failing_since: isoOrNull(view.failing_since),
    consecutive_failures: view.consecutive_failures,
    last_failure_at: isoOrNull(view.last_failure_at),
    last_success_at: isoOrNull(view.last_success_at),
    last_error: view.last_error,
    disabled_at: isoOrNull(view.disabled_at),
    disabled_reason: view.disabled_reason,
  };
}

export function toWebhookSecretDetails(state: WebhookSecretState): WebhookSecretDetails {
  return {
    object: "webhook_secret",
    secret: state.secret,
    previous_secret_expires_at: isoOrNull(state.previousExpiresAt),
  };
}
