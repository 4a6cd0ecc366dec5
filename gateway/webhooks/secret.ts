import { Webhook } from "standardwebhooks";

/**
 * Webhook signing secrets in the Standard Webhooks format: `whsec_` then the base64 of the
 * raw key. 24 bytes (192 bits) is the size the spec's reference libraries generate.
 * Runtime-free: Web Crypto only.
 */
const SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 24;

export function newWebhookSecret(): string {
  const raw = crypto.getRandomValues(new Uint8Array(SECRET_BYTES));
  // Standard (not url-safe) base64: that is what `whsec_` secrets decode with.
  return SECRET_PREFIX + btoa(String.fromCharCode(...raw));
}

/**
 * A secret an operator gives (GANTRY_WEBHOOK_SECRET), checked when it is read: one the
 * signer cannot decode would otherwise be stored and make every attempt fail with
 * `no_signing_secret`. Decoded by `standardwebhooks` itself, the library that signs with it.
 */
export function checkedWebhookSecret(secret: string): string {
  const problem = `must be a Standard Webhooks secret: ${SECRET_PREFIX} then the base64 of at least ${SECRET_BYTES} random bytes`;
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error(problem);
  try {
    // Its constructor decodes the key (strictly: padding too) and throws if it cannot.
    new Webhook(secret);
  } catch {
    throw new Error(problem);
  }
  // The library keeps the decoded key private; atob, which did not throw above, sizes it.
  if (atob(secret.slice(SECRET_PREFIX.length)).length < SECRET_BYTES) throw new Error(problem);
  return secret;
}
