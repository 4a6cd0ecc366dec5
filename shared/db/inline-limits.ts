import {
  LimitNode,
  type OffsetNode,
  type OperationNode,
  type OperationNodeSource,
  type QueryCompiler,
  SqliteDialect,
  SqliteQueryCompiler,
  ValueNode,
} from "kysely";

/**
 * A `LIMIT` for a raw `sql` query, written `ORDER BY id ${limitClause(n)}` (the keyword
 * included): Kysely's own limit node, so the SQLite compiler below writes it as it writes the
 * limits of built queries, and Postgres gets it as a parameter like any other.
 */
export function limitClause(count: number): OperationNodeSource {
  return { toOperationNode: () => LimitNode.create(ValueNode.create(count)) };
}

/**
 * Kysely's SQLite dialect, with a query's integer `LIMIT` and `OFFSET` written into its SQL
 * text instead of bound.
 *
 * SQLite (3.53 here, through better-sqlite3) plans a statement with the value bound to its
 * `LIMIT ?`, and so marks the statement to be compiled again whenever that parameter is
 * bound: every run. The statement cache (sqlite.ts) then saved nothing for the hot path's
 * claims, the change feed's read and the fair release, each recompiled on every call (found
 * with a probe on `sqlite3Reprepare`: 1.6 recompiles a job at 200 jobs/s). With the number in
 * the text each distinct limit is a statement of its own, compiled once and kept.
 *
 * In the compiler, which walks every query anyway, not in a plugin: a plugin's transformer
 * rebuilds the whole tree of every query to change one node.
 *
 * Not on Postgres: a statement there is named once per text and keeps its plans whatever is
 * bound to it, and a text per limit would use up the names (pg-prepared.ts).
 */
export class InlineLimitsSqliteDialect extends SqliteDialect {
  override createQueryCompiler(): QueryCompiler {
    return new InlineLimitsCompiler();
  }
}

class InlineLimitsCompiler extends SqliteQueryCompiler {
  protected override visitLimit(node: LimitNode): void {
    if (!this.appendInteger("limit ", node.limit)) super.visitLimit(node);
  }

  protected override visitOffset(node: OffsetNode): void {
    if (!this.appendInteger("offset ", node.offset)) super.visitOffset(node);
  }

  /** Writes a bound integer as a literal: nothing else is written into the text. */
  private appendInteger(keyword: string, node: OperationNode): boolean {
    if (!ValueNode.is(node) || node.immediate) return false;
    const { value } = node;
    if (!(typeof value === "number" ? Number.isSafeInteger(value) : typeof value === "bigint")) {
      return false;
    }
    this.append(keyword);
    this.appendImmediateValue(value);
    return true;
  }
}
