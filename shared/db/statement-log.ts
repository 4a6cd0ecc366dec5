import type { KyselyConfig } from "kysely";

/**
 * Told of every statement the store sends (its SQL text), answered or refused: for counting
 * round trips to the database, which at ordinary load cost a gateway more than any query's
 * own work (each is a write to the socket and a wake-up of the server process). The BEGIN
 * and COMMIT of Kysely's transactions pass through its log too, and are counted as the
 * statements they are (test/gateway/shared-rate-store.test.ts counts them).
 */
export type OnStatement = (sql: string) => void;

/** The Kysely `log` option that reports each statement to `onStatement`, or nothing. */
export function statementLog(onStatement: OnStatement | undefined): Pick<KyselyConfig, "log"> {
  return onStatement ? { log: (event) => onStatement(event.query.sql) } : {};
}

/** What a statement's SQL text begins with, for a metric's label. */
export const STATEMENT_KINDS = ["select", "insert", "update", "delete", "with", "other"] as const;
export type StatementKind = (typeof STATEMENT_KINDS)[number];

// Leading blanks and comments (PLAN_EACH_CALL, pg-prepared.ts) skipped, then the first word.
const FIRST_WORD = /^(?:\s|\/\*[\s\S]*?\*\/)*([A-Za-z]+)/;

export function statementKind(sql: string): StatementKind {
  const word = FIRST_WORD.exec(sql)?.[1]?.toLowerCase();
  return (STATEMENT_KINDS as readonly string[]).includes(word ?? "")
    ? (word as StatementKind)
    : "other";
}
