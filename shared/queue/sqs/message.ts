import type { Message, MessageAttributeValue } from "@aws-sdk/client-sqs";
import { JobError, QueueMessage } from "../../protocol/index.ts";

/**
 * What the `sqs` adapter puts on the wire besides the message body: the body stays the
 * plain QueueMessage JSON (a consumer in any language reads it), and bookkeeping travels
 * as SQS message attributes.
 */

/** SQS refuses messages (body plus attributes) above 256 KiB. */
export const SQS_MAX_MESSAGE_BYTES = 256 * 1024;

/**
 * Deliveries made before this copy of the message was sent. A retry sends a fresh copy
 * (so the delay shows as `delayed`, not `inFlight`), and the copy's ApproximateReceiveCount
 * starts again at 1; attempt = this + ApproximateReceiveCount.
 */
export const ATTEMPTS_ATTRIBUTE = "gantry-attempts";
/** Why a message was dead-lettered by the adapter, on the copy kept in the DLQ. */
export const ERROR_TYPE_ATTRIBUTE = "gantry-error-type";
export const ERROR_CODE_ATTRIBUTE = "gantry-error-code";
export const ERROR_MESSAGE_ATTRIBUTE = "gantry-error-message";

export type MessageAttributes = Record<string, MessageAttributeValue>;

const encoder = new TextEncoder();

/** The message as sent: its JSON body and attributes, refused when SQS would refuse it. */
export function encodeMessage(
  message: QueueMessage,
  attributes: MessageAttributes = {},
): { body: string; attributes: MessageAttributes } {
  const body = JSON.stringify(QueueMessage.parse(message));
  assertWithinSqsLimit(body, attributes);
  return { body, attributes };
}

/** Throws when the body and attributes together pass SQS's message size limit. */
export function assertWithinSqsLimit(body: string, attributes: MessageAttributes): void {
  let size = encoder.encode(body).byteLength;
  for (const [name, value] of Object.entries(attributes)) {
    size += encoder.encode(name).byteLength + encoder.encode(value.DataType ?? "").byteLength;
    size += encoder.encode(value.StringValue ?? "").byteLength;
    size += value.BinaryValue?.byteLength ?? 0;
  }
  if (size > SQS_MAX_MESSAGE_BYTES) {
    throw new RangeError(
      `queue message is ${size} bytes; SQS accepts at most ${SQS_MAX_MESSAGE_BYTES} (body plus attributes)`,
    );
  }
}

export function attemptsAttribute(attempts: number): MessageAttributes {
  return { [ATTEMPTS_ATTRIBUTE]: { DataType: "Number", StringValue: String(attempts) } };
}

/** The error as attributes of the dead-lettered copy, clipped to the JobError schema's limits. */
export function errorAttributes(error: JobError, attempts: number): MessageAttributes {
  const text = (value: string, max: number) => ({
    DataType: "String",
    // An empty string attribute is refused by SQS, and so are characters XML cannot carry.
    StringValue: xmlSafe(String(value).slice(0, max)) || "-",
  });
  return {
    ...attemptsAttribute(attempts),
    [ERROR_TYPE_ATTRIBUTE]: text(error.type === "permanent" ? "permanent" : "transient", 16),
    [ERROR_CODE_ATTRIBUTE]: text(error.code, 64),
    [ERROR_MESSAGE_ATTRIBUTE]: text(error.message, 2000),
  };
}

/** Reads the error back from a dead-lettered message's attributes (null for a broker redrive). */
export function errorOf(message: Message): JobError | null {
  const attributes = message.MessageAttributes ?? {};
  const parsed = JobError.safeParse({
    type: attributes[ERROR_TYPE_ATTRIBUTE]?.StringValue,
    code: attributes[ERROR_CODE_ATTRIBUTE]?.StringValue,
    message: attributes[ERROR_MESSAGE_ATTRIBUTE]?.StringValue,
  });
  return parsed.success ? parsed.data : null;
}

export interface DecodedMessage {
  /** Null when the body is not a valid QueueMessage (it is dead-lettered, never handled). */
  message: QueueMessage | null;
  attempt: number;
}

export function decodeMessage(received: Message): DecodedMessage {
  const receives = Number(received.Attributes?.ApproximateReceiveCount ?? 1);
  const before = Number(received.MessageAttributes?.[ATTEMPTS_ATTRIBUTE]?.StringValue ?? 0);
  const attempt = wholeOr(before, 0) + Math.max(1, wholeOr(receives, 1));
  return { message: parseBody(received.Body ?? ""), attempt };
}

function parseBody(body: string): QueueMessage | null {
  try {
    return QueueMessage.safeParse(JSON.parse(body)).data ?? null;
  } catch {
    return null;
  }
}

function wholeOr(value: number, fallback: number): number {
  return Number.isInteger(value) && value >= 0 ? value : fallback;
}

/** Characters outside XML 1.0's Char production, which SQS refuses in attributes. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const NOT_XML_CHAR = /[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu;

function xmlSafe(text: string): string {
  return text.replace(NOT_XML_CHAR, "\ufffd");
}
