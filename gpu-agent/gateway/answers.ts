import type { z } from "zod";
import type { HttpAnswer } from "../transfer/http.ts";
import type { Answer } from "./batching.ts";
import { GatewayError } from "./errors.ts";

/** A gateway response read once: its status, its JSON body (or text), its problem code. */
export function readAnswer(response: HttpAnswer): Answer {
  const text = response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  return answerOf(response.status, body);
}

/** An answer's status and body, with its problem+json `code` when it has one. */
export function answerOf(status: number, body: unknown): Answer {
  const code =
    body !== null && typeof body === "object" && "code" in body && typeof body.code === "string"
      ? body.code
      : null;
  return { status, body, code };
}

export function problemDetail(body: unknown): string | null {
  if (body !== null && typeof body === "object" && "detail" in body) {
    return typeof body.detail === "string" ? body.detail : null;
  }
  return null;
}

/** An answer the agent has no use for, with what the gateway said about it. */
export function unexpectedAnswer(action: string, answer: Answer): GatewayError {
  const detail = problemDetail(answer.body);
  return new GatewayError(
    `unexpected gateway answer to ${action}: HTTP ${answer.status}${answer.code ? ` ${answer.code}` : ""}${detail ? `: ${detail}` : ""}`,
    answer.status === 403 && answer.code ? answer.code : "gateway_bad_response",
    answer.status,
  );
}

export function parseAnswer<T extends z.ZodType>(
  schema: T,
  action: string,
  answer: Answer,
): z.infer<T> {
  const result = schema.safeParse(answer.body);
  if (!result.success) {
    throw new GatewayError(
      `malformed gateway answer to ${action}: ${result.error.issues[0]?.message ?? "invalid"}`,
      "gateway_bad_response",
      answer.status,
    );
  }
  return result.data;
}
