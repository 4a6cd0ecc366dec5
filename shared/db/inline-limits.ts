import {
  type KyselyPlugin,
  LimitNode,
  OffsetNode,
  type OperationNode,
  type OperationNodeSource,
  OperationNodeTransformer,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
  ValueNode,
} from "kysely";

/**
 * A `LIMIT` for a raw `sql` query, written `ORDER BY id ${limitClause(n)}` (the keyword
 * included): Kysely's own limit node, so `InlineLimitsPlugin` sees it as it sees the limits
 * of built queries, and Postgres gets it as a parameter like any other.
 */
export function limitClause(count: number): OperationNodeSource {
  return { toOperationNode: () => LimitNode.create(ValueNode.create(count)) };
}

/**
 * Writes a query's integer `LIMIT` and `OFFSET` into its SQL text instead of binding them,
 * for the embedded SQLite database.
 *
 * SQLite (3.53 here, through better-sqlite3) plans a statement with the value bound to its
 * `LIMIT ?`, and so marks the statement to be compiled again whenever that parameter is
 * bound: every run. The statement cache (sqlite.ts) then saved nothing for the hot path's
 * claims, the change feed's read and the fair release, each recompiled on every call (found
 * with a probe on `sqlite3Reprepare`: 1.6 recompiles a job at 200 jobs/s, 5 % of the
 * gateway's CPU). With the number in the text each distinct limit is a statement of its own,
 * compiled once and kept.
 *
 * Not on Postgres: it plans a named statement once whatever its parameters, and a text per
 * limit would use up its named statements (pg-prepared.ts).
 */
export class InlineLimitsPlugin implements KyselyPlugin {
  private readonly transformer = new InlineLimits();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return this.transformer.transformNode(args.node);
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

class InlineLimits extends OperationNodeTransformer {
  protected override transformLimit(node: LimitNode): LimitNode {
    const count = inlined(node.limit);
    return count ? LimitNode.create(count) : super.transformLimit(node);
  }

  protected override transformOffset(node: OffsetNode): OffsetNode {
    const count = inlined(node.offset);
    return count ? OffsetNode.create(count) : super.transformOffset(node);
  }
}

/** The count as a literal, when it is a bound integer: nothing else is written into the text. */
function inlined(node: OperationNode): ValueNode | undefined {
  if (!ValueNode.is(node) || node.immediate) return undefined;
  const { value } = node;
  const integer =
    typeof value === "number" ? Number.isSafeInteger(value) : typeof value === "bigint";
  return integer ? ValueNode.createImmediate(value) : undefined;
}
