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
