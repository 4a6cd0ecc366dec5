import type { RootOperationNode } from "kysely";

/**
 * A statement's first word as a Kysely plugin sees it: a built query's kind (`Select`,
 * `Update`, …), or the first word of SQL text. For tests that count what a store sends.
 */
export function firstWord(node: RootOperationNode): string {
  if (node.kind === "RawNode") return /^\s*(\w+)/.exec(node.sqlFragments[0] ?? "")?.[1] ?? "";
  return node.kind.replace(/QueryNode$/, "");
}
