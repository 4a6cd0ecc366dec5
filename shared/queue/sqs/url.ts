/**
 * `GANTRY_QUEUE_URL=sqs://<region>[/<prefix>][?endpoint=<url>&create=false]` on Workers:
 *
 * - `<region>`: the queues' AWS region, such as `eu-west-1`.
 * - `<prefix>`: what queue names start with (`<prefix><model>`, `-high`, `-dlq`); the
 *   adapter's default (`gantry-`) when omitted. Terraform's `queue_name_prefix` goes here.
 * - `endpoint`: another SQS-compatible server (an emulator, a VPC endpoint).
 * - `create=false`: use queues made ahead of time (Terraform) and never create any, for an
 *   IAM identity that may only send messages and read queue attributes.
 *
 * Credentials never go in the URL: it is a plain `[vars]` entry, visible to anyone who can
 * read the Worker's settings. They come from the `AWS_ACCESS_KEY_ID` and
 * `AWS_SECRET_ACCESS_KEY` secrets. Runtime-free (the URL standard only).
 */
export interface SqsQueueUrlParts {
  region: string;
  queuePrefix?: string;
  endpoint?: string;
  createQueues?: boolean;
}

const REGION = /^[a-z0-9][a-z0-9-]{0,62}$/;
const KNOWN_PARAMETERS = new Set(["endpoint", "create"]);

/** Throws an Error whose message says what is wrong, for the operator to fix. */
export function parseSqsQueueUrl(raw: string): SqsQueueUrlParts {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error("is not a URL; expected sqs://<region>[/<prefix>][?endpoint=<url>]");
  }
  if (url.protocol !== "sqs:") throw new Error(`must start with sqs://, not ${url.protocol}//`);
  if (url.username || url.password) {
    throw new Error(
      "must not carry credentials: set the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY secrets",
    );
  }
  const region = url.hostname.toLowerCase();
  if (!REGION.test(region) || url.port) {
    throw new Error(`names no valid region ("${url.host}"); expected sqs://us-east-1/…`);
  }
  const prefix = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (prefix.includes("/")) {
    throw new Error(`has a prefix with '/' ("${prefix}"); SQS queue names cannot contain it`);
  }
  for (const name of url.searchParams.keys()) {
    if (!KNOWN_PARAMETERS.has(name)) {
      throw new Error(`has an unknown parameter "${name}"; known: endpoint, create`);
    }
  }
  const parts: SqsQueueUrlParts = { region };
  if (prefix) parts.queuePrefix = prefix;
  const endpoint = url.searchParams.get("endpoint");
  if (endpoint !== null) parts.endpoint = httpUrl(endpoint);
  const create = url.searchParams.get("create");
  if (create !== null) {
    if (create !== "true" && create !== "false") {
      throw new Error(`has create=${create}; it must be true or false`);
    }
    parts.createQueues = create === "true";
  }
  return parts;
}

function httpUrl(value: string): string {
  let endpoint: URL;
  try {
    endpoint = new URL(value);
  } catch {
    throw new Error(`has an endpoint that is not a URL ("${value}")`);
  }
  if (endpoint.protocol !== "http:" && endpoint.protocol !== "https:") {
    throw new Error(`has an endpoint that is not http(s) ("${value}")`);
  }
  // The SDK appends its own paths; a trailing slash would double them.
  return endpoint.href.replace(/\/$/, "");
}
