import { GetQueueUrlCommand, QueueDoesNotExist, SQSClient } from "@aws-sdk/client-sqs";
import { QueueRefusedError } from "../refused.ts";

/** What AWS answers credentials it does not take (a wrong key, a bad signature, no right). */
const REFUSED = new Set([
  "InvalidClientTokenId",
  "UnrecognizedClientException",
  "SignatureDoesNotMatch",
  "InvalidAccessKeyId",
  "AccessDenied",
  "AccessDeniedException",
  "MissingAuthenticationToken",
  "ExpiredToken",
]);

/** A name under the prefix that no queue has: asking for its URL proves the rest. */
const CHECK_NAME = "gantry-open-check";

/**
 * Checks an SQS URL at open, as the other brokers are checked by connecting: the SDK's
 * credential chain finds credentials, and the endpoint answers a signed GetQueueUrl (the
 * least-privilege IAM of infra/terraform grants it on the prefix) for a queue that need not
 * exist, so nothing is made. Missing or refused credentials are a QueueRefusedError; an
 * endpoint that does not answer throws its network error, which the caller waits out.
 */
export async function checkSqs(
  connection: { region: string; endpoint?: string },
  prefix: string,
  where: string,
): Promise<void> {
  const client = new SQSClient({
    region: connection.region,
    ...(connection.endpoint !== undefined && { endpoint: connection.endpoint }),
  });
  try {
    await client.config.credentials().catch((error: unknown) => {
      const why = error instanceof Error ? error.message : String(error);
      throw new QueueRefusedError(
        `no AWS credentials for SQS at ${where} (${why}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or give the host a role`,
      );
    });
    await client.send(new GetQueueUrlCommand({ QueueName: `${prefix}${CHECK_NAME}` }));
  } catch (error) {
    if (error instanceof QueueDoesNotExist) return;
    if (error instanceof Error && REFUSED.has(error.name)) {
      throw new QueueRefusedError(
        `SQS at ${where} refused the credentials: ${error.name}: ${error.message} (check the AWS credentials and the IAM policy on the queues)`,
      );
    }
    throw error;
  } finally {
    client.destroy();
  }
}
