import { expect, it } from "vitest";
import { z } from "zod";
import { clientMessages } from "../../gateway/http/client-messages.ts";
import { validationProblem } from "../../gateway/http/problem.ts";

const Body = z.strictObject({
  model: z.string().min(1).max(64),
  priority: z.number().int().min(0).max(9).optional(),
  ttl_seconds: z.number().int().gt(9).optional(),
  format: z.enum(["png", "webp"]).optional(),
  items: z
    .array(z.object({ n: z.number() }))
    .min(1)
    .max(2)
    .optional(),
  webhook: z.object({ url: z.string() }).optional(),
  tag: z
    .string()
    .regex(/^[a-z]+$/, "lowercase letters")
    .optional(),
});

const messages = (value: unknown) =>
  Body.safeParse(value, { error: clientMessages }).error?.issues.map(
    (issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`,
  );

it("says what a field must be in the API's words, not zod's", () => {
  expect(messages({})).toEqual(["model: required"]);
  expect(messages({ model: "" })).toEqual(["model: must be at least 1 character long"]);
  expect(messages({ model: "m", priority: "5" })).toEqual([
    "priority: must be a number, not a string",
  ]);
  expect(messages({ model: "m", priority: 1.5 })).toEqual(["priority: must be a whole number"]);
  expect(messages({ model: "m", priority: 10 })).toEqual(["priority: must be at most 9"]);
  expect(messages({ model: "m", ttl_seconds: 9 })).toEqual(["ttl_seconds: must be more than 9"]);
  expect(messages({ model: "m", format: "gif" })).toEqual(["format: must be one of png, webp"]);
  expect(messages({ model: "m", items: [] })).toEqual(["items: must have at least 1 item"]);
  expect(messages({ model: "m", items: [{ n: 1 }, { n: 2 }, { n: 3 }] })).toEqual([
    "items: must have at most 2 items",
  ]);
  expect(messages({ model: "m", webhook: "https://x" })).toEqual([
    "webhook: must be an object, not a string",
  ]);
  expect(messages({ model: "m", webhook: null })).toEqual(["webhook: must be an object, not null"]);
  expect(messages([1])).toEqual(["(root): must be an object, not an array"]);
  expect(messages({ model: "m", inputs: {}, extra: 1 })).toEqual([
    '(root): unknown fields "inputs", "extra"',
  ]);
  // JSON's 1e400 parses to Infinity: a number to JSON.parse, not one to zod.
  expect(messages(JSON.parse('{"model": "m", "priority": 1e400}'))).toEqual([
    "priority: must be a finite number, not one too large to represent",
  ]);
  expect(messages(JSON.parse('{"model": "m", "items": [{"n": -1e400}]}'))).toEqual([
    "items.0.n: must be a finite number, not one too large to represent",
  ]);
  // A schema's own message still wins.
  expect(messages({ model: "m", tag: "A" })).toEqual(["tag: lowercase letters"]);
});

it("names a whole value refused by where it came from alone, not '(root)'", () => {
  const header = z.string().min(1).max(8).safeParse("x".repeat(9), { error: clientMessages });
  expect(validationProblem(header.error as z.ZodError, "Idempotency-Key header").detail).toBe(
    "Idempotency-Key header: must be at most 8 characters long",
  );
  const body = Body.safeParse([], { error: clientMessages });
  expect(validationProblem(body.error as z.ZodError, "body").detail).toBe(
    "body: must be an object, not an array",
  );
  const field = Body.safeParse({ model: "m", priority: 10 }, { error: clientMessages });
  expect(validationProblem(field.error as z.ZodError, "body").detail).toBe(
    "body: priority: must be at most 9",
  );
});
