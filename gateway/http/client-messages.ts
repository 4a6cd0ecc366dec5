import type { z } from "zod";

/**
 * Messages for zod's parses of what a client sent (`safeParse(value, { error:
 * clientMessages })`), in the words the rest of the API uses: `required` for a missing field
 * (zod: "Invalid input: expected string, received undefined"), `must be a number, not a
 * string`, `must be at most 9`, `must be one of png, webp`, `unknown field "inputs"`. Each is
 * shown after the field's path (`body: priority: must be at most 9`). A schema's own message
 * still wins; an issue not named here keeps zod's.
 */
export const clientMessages: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case "invalid_type": {
      if (issue.input === undefined) return "required";
      // JSON.parse reads 1e400 as Infinity, a number to typeof: without this the client
      // would read "must be a number, not a number".
      if (typeof issue.input === "number" && !Number.isFinite(issue.input)) {
        return "must be a finite number, not one too large to represent";
      }
      const sent = typeOf(issue.input);
      // 1.5 for an int: a number still, only not a whole one.
      if (issue.expected === "int" && sent === "number") return "must be a whole number";
      return `must be ${withArticle(issue.expected)}, not ${withArticle(sent)}`;
    }
    case "too_small":
      return bound(AT_LEAST, issue.origin, issue.minimum, issue.inclusive, issue.exact);
    case "too_big":
      return bound(AT_MOST, issue.origin, issue.maximum, issue.inclusive, issue.exact);
    case "invalid_value":
      return issue.values.length === 1
        ? `must be ${String(issue.values[0])}`
        : `must be one of ${issue.values.map(String).join(", ")}`;
    case "invalid_key": {
      // A record's key (metadata's): zod's "Invalid key in record" hides the key's own rule.
      const rule = issue.issues[0]?.message;
      return rule ? `not a valid key: ${rule}` : "not a valid key";
    }
    case "unrecognized_keys":
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((key) => JSON.stringify(key)).join(", ")}`;
    default:
      return undefined;
  }
};

/** A bound's words when the limit itself is allowed, and when it is not. */
type BoundWords = { readonly inclusive: string; readonly exclusive: string };
const AT_LEAST: BoundWords = { inclusive: "at least", exclusive: "more than" };
const AT_MOST: BoundWords = { inclusive: "at most", exclusive: "less than" };

/** `must be at most 9`, `must be at least 10 characters long`, `must have at most 1000 items`. */
function bound(
  words: BoundWords,
  origin: string,
  limit: number | bigint,
  inclusive = true,
  exact = false,
): string | undefined {
  const than = exact ? "exactly" : inclusive ? words.inclusive : words.exclusive;
  switch (origin) {
    case "number":
    case "int":
    case "bigint":
      return `must be ${than} ${limit}`;
    case "string":
      return `must be ${than} ${limit} character${limit === 1 ? "" : "s"} long`;
    case "array":
    case "set":
      return `must have ${than} ${limit} item${limit === 1 ? "" : "s"}`;
    default:
      return undefined;
  }
}

/** What JSON sent: `null`, an array, or `typeof`'s word. */
const typeOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "array" : typeof value;

const withArticle = (type: string): string =>
  type === "null" || type === "undefined"
    ? type
    : type === "int"
      ? "a whole number"
      : `${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`;
