import type { Context } from "hono";
import { z } from "zod";
import { HttpProblem } from "../../shared/errors.ts";
import { clientMessages, validationProblem } from "./problem.ts";

/** Reads and validates a JSON body; every failure is a clear 4xx, never a 500. */
export async function parseJsonBody<T extends z.ZodType>(
  c: Context,
  schema: T,
): Promise<z.infer<T>> {
  return parseWith(schema, await readJsonBody(c), "body");
}

/** The request's JSON body, not yet validated: 415 unless it says JSON, 400 unless it is. */
export async function readJsonBody(c: Context): Promise<unknown> {
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/(.+\+)?json\b/i.test(contentType)) {
    throw new HttpProblem(
      415,
      "unsupported_media_type",
      "Unsupported media type",
      "Send the body as JSON with `Content-Type: application/json`.",
    );
  }
  try {
    return JSON.parse(await c.req.text());
  } catch {
    throw new HttpProblem(
      400,
      "malformed_json",
      "Malformed JSON",
      "The request body is not valid JSON.",
    );
  }
}

export function parseWith<T extends z.ZodType>(
  schema: T,
  value: unknown,
  where: string,
): z.infer<T> {
  const result = schema.safeParse(value, { error: clientMessages });
  if (!result.success) throw validationProblem(result.error, where);
  return result.data;
}

const IdempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, "printable ASCII");

/** The request's `Idempotency-Key` header (on every create), checked; null without one. */
export function idempotencyKeyOf(c: Context): string | null {
  const raw = c.req.header("idempotency-key");
  return raw === undefined ? null : parseWith(IdempotencyKey, raw, "Idempotency-Key header");
}
