import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { AuthorizationError, UserAuthenticationExpiredError } from "@nats-io/transport-node";
import { QueueRefusedError } from "../refused.ts";

/**
 * What a failed open says about the URL or the server, when nats-server answered and
 * refused rather than could not be reached: the URL's user and password (or token), or a
 * server started without JetStream, which no wait fixes. Undefined for anything else.
 */
export function natsRefusal(error: unknown, where: string): QueueRefusedError | undefined {
  if (error instanceof AuthorizationError || error instanceof UserAuthenticationExpiredError) {
    return new QueueRefusedError(
      `NATS at ${where} refused the connection: ${error.message} (check the user and password, or token, in the queue URL)`,
    );
  }
  // nats.js does not export JetStreamNotEnabled (what a server without -js gives): by name.
  const noJetStream =
    (error instanceof Error && error.name === "JetStreamNotEnabled") ||
    (error instanceof JetStreamApiError &&
      error.code === JetStreamApiCodes.JetStreamNotEnabledForAccount);
  if (noJetStream) {
    return new QueueRefusedError(
      `NATS at ${where} has no JetStream: start nats-server with -js and a store directory (-sd), or give the account JetStream`,
    );
  }
  return undefined;
}
