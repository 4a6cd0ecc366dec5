/**
 * The banner's "Webhooks" line: what this process does with a webhook URL, as the URL
 * policy (gateway/webhooks/url-policy.ts) will apply it, so that the banner never promises
 * what a 422 then refuses.
 */
export function webhookPolicyNote(command: "start" | "gateway", allow: readonly string[]): string {
  if (command === "start") {
    return "http://, loopback and private receivers allowed (embedded mode, for local testing)";
  }
  if (allow.length === 0) {
    return "https to public addresses only; http://, loopback and private receivers are refused (list yours in GANTRY_WEBHOOK_ALLOW)";
  }
  return `https to public addresses, and http(s) to GANTRY_WEBHOOK_ALLOW: ${allow.join(", ")}`;
}
