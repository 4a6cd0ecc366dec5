import { HttpProblem } from "../../shared/errors.ts";
import type { BatchItemError } from "../../shared/protocol/index.ts";

/** Why a batch's item was refused, from the problem a submit of it would have answered. */
export const itemError = (index: number, error: unknown): BatchItemError => {
  if (error instanceof HttpProblem) {
    return { index, code: error.code, message: error.detail ?? error.title };
  }
  throw error;
};

/** A batch refused as a whole (`atomic`, or no item good): 422, every item's error listed. */
export function refused(errors: BatchItemError[]): HttpProblem {
  errors.sort((a, b) => a.index - b.index);
  return new HttpProblem(422, "batch_invalid", "Invalid batch items", describe(errors), {
    errors,
  });
}

function describe(errors: BatchItemError[]): string {
  // Each message is a sentence of its own or none: end on one full stop either way.
  const shown = errors.slice(0, 5).map((e) => `item ${e.index}: ${e.message.replace(/\.$/, "")}`);
  const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : "";
  return `${errors.length} item(s) refused: ${shown.join("; ")}${more}.`;
}
