import { type RawBuilder, sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration, SqlDialect } from "./types.ts";

/**
 * Webhook attempts say why they failed with a reason from a fixed set (`reason`), and their
 * `error` no longer carries how a connection failed: before, a refused connection recorded
 * `fetch failed: connect ECONNREFUSED 10.0.0.5:443`, and a name the address policy refused
 * what it resolved to, which the tenant could read in its delivery log and endpoint health.
 * Rows written before are rewritten here the same way: such an error becomes the fixed
 * sentence of its reason, wherever it was copied (an endpoint's `last_error`, the `last
 * error:` of its disabled reason, the attempts skipped because of it).
 *
 * The sentences are those of gateway/webhooks/post.ts when this was written, as literals:
 * an applied migration never changes.
 */
const CONNECTION = "could not connect to the receiver";
const TLS = "the TLS handshake with the receiver failed";
const POLICY = "not sent: the receiver's address is not allowed by the gateway's address policy";

export const webhookAttemptReason: Migration = {
  name: "0018_webhook_attempt_reason",
  async up(db, dialect) {
    await addColumn(db, dialect, "webhook_attempts", "reason", sql`text`);

    // A whole error that is a network failure's description: attempts and `last_error`.
    const attempts = sql`status_code IS NULL AND ${leaky(sql.ref("error"))}`;
    await sql`UPDATE webhook_attempts SET error = ${sentenceFor(sql.ref("error"))}
      WHERE ${attempts}`.execute(db);
    await sql`UPDATE webhook_endpoints SET last_error = ${sentenceFor(sql.ref("last_error"))}
      WHERE ${leaky(sql.ref("last_error"))}`.execute(db);
    // The same after "last error: ", in disabled reasons and the skips that quote them.
    for (const [table, column] of [
      ["webhook_endpoints", "disabled_reason"],
      ["webhook_attempts", "error"],
    ] as const) {
      const text = sql.ref(column);
      const tail = afterLastError(dialect, text);
      await sql`UPDATE ${sql.table(table)}
        SET ${text} = ${upToLastError(dialect, text)} || ${sentenceFor(tail)}
        WHERE ${text} LIKE '%last error: %' AND ${leaky(tail)}`.execute(db);
    }

    const reasons: [string, RawBuilder<unknown>][] = [
      ["http_status", sql`status_code IS NOT NULL`],
      ["timeout", sql`error LIKE 'timed out%'`],
      ["endpoint_disabled", sql`error LIKE 'not sent: endpoint disabled%'`],
      ["refused_by_policy", sql`(error LIKE 'not sent: the webhook URL%' OR error = ${POLICY})`],
      ["no_signing_secret", sql`error LIKE 'no signing secret%'`],
      ["tls_error", sql`error = ${TLS}`],
      ["connection_failed", sql`error = ${CONNECTION}`],
    ];
    for (const [reason, when] of reasons) {
      await sql`UPDATE webhook_attempts SET reason = ${reason}
        WHERE reason IS NULL AND error IS NOT NULL AND ${when}`.execute(db);
    }
  },
};

/** An error text that is neither an answer, a timeout, a skip nor one of the sentences. */
function leaky(text: RawBuilder<unknown>) {
  return sql`${text} IS NOT NULL
    AND ${text} NOT LIKE 'HTTP %' AND ${text} NOT LIKE 'timed out%'
    AND ${text} NOT LIKE 'not sent%' AND ${text} NOT LIKE 'no signing secret%'
    AND ${text} <> ${CONNECTION} AND ${text} <> ${TLS}`;
}

function sentenceFor(text: RawBuilder<unknown>) {
  return sql`CASE
    WHEN lower(${text}) LIKE '%refused to connect%' THEN ${POLICY}
    WHEN lower(${text}) LIKE '%certificate%' OR lower(${text}) LIKE '%tls%'
      OR lower(${text}) LIKE '%ssl%' THEN ${TLS}
    ELSE ${CONNECTION} END`;
}

const MARK = "last error: ";

function position(dialect: SqlDialect, text: RawBuilder<unknown>) {
  return dialect === "postgres" ? sql`strpos(${text}, ${MARK})` : sql`instr(${text}, ${MARK})`;
}

function upToLastError(dialect: SqlDialect, text: RawBuilder<unknown>) {
  return sql`substr(${text}, 1, ${position(dialect, text)} + ${sql.lit(MARK.length - 1)})`;
}

function afterLastError(dialect: SqlDialect, text: RawBuilder<unknown>) {
  return sql`substr(${text}, ${position(dialect, text)} + ${sql.lit(MARK.length)})`;
}
