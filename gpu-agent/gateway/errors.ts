/**
 * A gateway call that failed after its retries, or got an answer the agent cannot act on.
 * The supervisor leaves the job to another delivery: it never acks on one of these.
 */
export class GatewayError extends Error {
  override name = "GatewayError";
  constructor(
    message: string,
    readonly code: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

/**
 * What the operator should do about each refusal of a signed request, in words for the
 * log. None of these carries a secret: the gateway's details never do, and neither do ours.
 */
const ADVICE: Record<string, (agentId: string) => string> = {
  agent_revoked: (id) =>
    `the gateway revoked agent ${id}: it takes no more jobs. Issue new credentials (gantry agents create) or enroll again to bring this host back`,
  stale_request: () =>
    "the gateway refused a request as stale: this host's clock is more than 5 minutes off the gateway's; sync it (NTP)",
  bad_signature: (id) =>
    `the gateway refused agent ${id}'s signature; check GANTRY_AGENT_SECRET belongs to GANTRY_AGENT_ID`,
  unknown_agent: (id) =>
    `the gateway does not know agent ${id}; check GANTRY_AGENT_ID, or unset it and GANTRY_AGENT_SECRET to enroll with GANTRY_AGENT_TOKEN`,
};

/** The GatewayError for a 401 on a signed request, by the problem's `code`. */
export function signedRequestRefused(
  code: string | null,
  agentId: string,
  detail: string | null,
): GatewayError {
  const advice = code ? ADVICE[code] : undefined;
  if (advice) return new GatewayError(advice(agentId), code ?? "", 401);
  const why = detail ? `: ${detail}` : "";
  return new GatewayError(
    `the gateway refused agent ${agentId} (HTTP 401${code ? ` ${code}` : ""})${why}`,
    "gateway_unauthorized",
    401,
  );
}

/** The GatewayError for a refused enrollment. */
export function enrollmentRefused(status: number): GatewayError {
  return new GatewayError(
    `the gateway refused the enrollment token (HTTP ${status}); check GANTRY_AGENT_TOKEN`,
    "gateway_unauthorized",
    status,
  );
}
