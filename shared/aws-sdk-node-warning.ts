/**
 * On Node below 22 the AWS SDK for JavaScript (v3) warns, at its first client, that its
 * releases after the first week of January 2027 need Node 22: a `process.emitWarning` of ten
 * lines on stderr, which a log shipper reading lines takes for ten entries (the gateway image
 * is node:20-slim). The SDK's documented switch, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED,
 * silences it; the same news goes to our logger as one line, once. Node-only.
 */
const SWITCH = "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED";
/** The Node major the SDK's next releases need: below it, it warns. */
const SDK_NODE_MAJOR = 22;

let handled = false;

export function routeAwsSdkNodeWarning(log: {
  warn(fields: Record<string, unknown>, message: string): void;
}): void {
  if (handled) return;
  handled = true;
  // The operator silenced it already: nothing to say either.
  if (process.env[SWITCH] === "true") return;
  if (Number(process.versions.node.split(".")[0]) >= SDK_NODE_MAJOR) return;
  // Read by the SDK when it makes a client, so set before any is made.
  process.env[SWITCH] = "true";
  log.warn(
    { node: process.version, aws_sdk_needs_node: SDK_NODE_MAJOR },
    `the AWS SDK releases published after the first week of January 2027 need Node ${SDK_NODE_MAJOR} or later, and this is Node ${process.version}: upgrade Node before taking them (the SDK's own multi-line warning is silenced)`,
  );
}
