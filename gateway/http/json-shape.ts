import { HttpProblem } from "../../shared/errors.ts";

/**
 * How deep a request's JSON may nest (the body itself is level 1). Far past any input,
 * output or metadata the API takes (an OCR output is 6 deep, a tensor one level per
 * dimension), and far below where serializing a row overflows the stack (some thousands).
 */
export const MAX_JSON_DEPTH = 256;

/**
 * Postgres keeps no NUL in text, and ids, filters and most fields reach it as text: a NUL
 * made it refuse the statement (a 500). Refused in public bodies (`nul`): an agent's report
 * is the model's output, stored as escaped JSON, and is not the client's to correct.
 */
const NUL_MESSAGE = "holds a NUL character (\\u0000), which the API does not keep";

const refusal = (path: string, message: string) =>
  new HttpProblem(
    422,
    "validation_failed",
    "Request validation failed",
    `body: ${path}: ${message}`,
    {
      errors: [{ path, message }],
    },
  );

/**
 * Whether `text` may hold what `refuseUnkeptShapes` refuses: more opening brackets than the
 * depth bound, or a `__proto__` key (spelled out, or with escaped letters). Most bodies hold
 * neither and are not walked.
 */
function mayHoldUnkept(text: string): boolean {
  if (text.includes("proto") || text.includes("\\u")) return true;
  let brackets = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code === 123 || code === 91) && ++brackets > MAX_JSON_DEPTH) return true; // { [
  }
  return false;
}

/**
 * Refuses, naming where, what a parsed body may hold but the API cannot keep:
 *
 * - with `nul`, a NUL character in a string or a key (see `NUL_MESSAGE`);
 * - nesting past `MAX_JSON_DEPTH`: a model parameter nested some thousands deep passed every
 *   schema and overflowed the stack where the job row was serialized (500);
 * - a `__proto__` key: it parses as a key of its own, but the schemas drop it without a word
 *   (no object keeps it), so a metadata label or parameter of that name was accepted and lost.
 *
 * Walked with a stack of its own, so no body can overflow the call stack here.
 */
export function refuseUnkeptShapes(text: string, value: unknown, nul = false): void {
  if (!mayHoldUnkept(text)) return;
  const stack: Array<{ at: string; depth: number; value: unknown }> = [{ at: "", depth: 1, value }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (nul && typeof next.value === "string" && next.value.includes("\0")) {
      throw refusal(next.at || "(root)", NUL_MESSAGE);
    }
    if (typeof next.value !== "object" || next.value === null) continue;
    const { at, depth } = next;
    if (depth > MAX_JSON_DEPTH) {
      throw refusal(at || "(root)", `nested more than ${MAX_JSON_DEPTH} levels deep`);
    }
    if (!Array.isArray(next.value) && Object.hasOwn(next.value, "__proto__")) {
      const path = at ? `${at}.__proto__` : "__proto__";
      throw refusal(path, "__proto__ cannot be a key (no object keeps it); rename it");
    }
    for (const [key, child] of Object.entries(next.value)) {
      if (nul && key.includes("\0")) throw refusal(at ? `${at}.${key}` : key, NUL_MESSAGE);
      stack.push({ at: at ? `${at}.${key}` : key, depth: depth + 1, value: child });
    }
  }
}
