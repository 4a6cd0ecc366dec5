import type { Context, HonoRequest } from "hono";
import { z } from "zod";
import { HttpProblem } from "../../shared/errors.ts";
import { clientMessages } from "./client-messages.ts";
import { refuseUnkeptShapes } from "./json-shape.ts";
import { validationProblem } from "./problem.ts";

/** Reads and validates a JSON body; every failure is a clear 4xx, never a 500. */
export async function parseJsonBody<T extends z.ZodType>(
  c: Context,
  schema: T,
): Promise<z.infer<T>> {
  return parseWith(schema, await readJsonBody(c, true), "body");
}

/**
 * The request's JSON body, not yet validated: 415 unless it says JSON, 400 unless it is, 422
 * for a shape the API cannot keep (json-shape.ts; `nul`: a NUL in a string too, for the
 * public API's bodies).
 */
export async function readJsonBody(c: Context, nul = false): Promise<unknown> {
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/(.+\+)?json\b/i.test(contentType)) {
    throw new HttpProblem(
      415,
      "unsupported_media_type",
      "Unsupported media type",
      "Send the body as JSON with `Content-Type: application/json`.",
    );
  }
  // A leading byte order mark (.NET's, Windows PowerShell's UTF-8) is not JSON's, and RFC 8259
  // lets a parser drop it: Node's decoder did, workerd's Request.text() keeps it.
  const text = (await c.req.text()).replace(/^\uFEFF/, "");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpProblem(
      400,
      "malformed_json",
      "Malformed JSON",
      "The request body is not valid JSON.",
    );
  }
  refuseUnkeptShapes(text, value, nul);
  return value;
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

/**
 * A route's query, read with `schema` after its names are checked: a name the route does not
 * take is refused (422), not ignored. Ignored, a mistyped filter (`?stauts=failed`) or one
 * the route does not have (`GET /v1/jobs?batch_id=…`) answered with every job as though it
 * had applied. So is a name given twice: read as its first value, `?status=succeeded&status=failed`
 * answered with the succeeded jobs alone. `families`: prefixes of open-ended names
 * (`metadata.` for `metadata.KEY`).
 */
export function parseQuery<T extends z.ZodObject>(
  schema: T,
  request: Pick<HonoRequest, "query" | "queries">,
  families: readonly string[] = [],
): z.infer<T> {
  const query = request.query();
  refuseUnknownParameters(query, Object.keys(schema.shape), families);
  refuseRepeatedParameters(request.queries());
  return parseWith(schema, query, "query");
}

/** 422 naming each query parameter given more than once: each takes one value. */
function refuseRepeatedParameters(queries: Record<string, string[]>): void {
  const repeated = Object.entries(queries).filter(([, values]) => values.length > 1);
  const [first] = repeated;
  if (first === undefined) return;
  const message = (count: number) => `given ${count} times; it takes one value`;
  throw new HttpProblem(
    422,
    "validation_failed",
    "Request validation failed",
    `query: ${first[0]}: ${message(first[1].length)}`,
    {
      errors: repeated
        .slice(0, 20)
        .map(([name, values]) => ({ path: name, message: message(values.length) })),
    },
  );
}

/** 422 naming each query parameter that is neither `known` nor of one of the `families`. */
export function refuseUnknownParameters(
  query: Record<string, string>,
  known: readonly string[],
  families: readonly string[] = [],
): void {
  const unknown = Object.keys(query).filter(
    (name) => !known.includes(name) && !families.some((prefix) => name.startsWith(prefix)),
  );
  const [first] = unknown;
  if (first === undefined) return;
  const takes = [...known, ...families.map((prefix) => `${prefix}KEY`)].join(", ") || "none";
  const message = `unknown parameter (this route takes ${takes})`;
  throw new HttpProblem(
    422,
    "validation_failed",
    "Request validation failed",
    `query: ${first}: ${message}`,
    { errors: unknown.slice(0, 20).map((name) => ({ path: name, message })) },
  );
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
