import type { Insertable } from "kysely";
import type { QueueMessageTable } from "../../db/schema.ts";
import { naturalBatcher } from "../../natural-batch.ts";
import type { Context } from "./claim.ts";

type Row = Insertable<QueueMessageTable>;
type Written = { error: unknown } | null;

/**
 * Writes the queue's messages. With `grouped`, publishes that come while one is being
 * written go in the next INSERT together, one statement and one commit for all of them, as
 * the gateway's submits do (gateway/store/job-inserts.ts): on Postgres a publish was one of
 * a job's commits, and in process on SQLite each commit writes the WAL frames of every page
 * it touched. A failed group is written row by row, so one bad row fails only its own
 * publish. Not grouped on Workers, where one request's I/O cannot settle another's.
 */
export function messageWriter(ctx: Context, grouped: boolean): (row: Row) => Promise<void> {
  const insert = async (rows: Row[]) => {
    await ctx.db.insertInto("queue_messages").values(rows).execute();
  };
  if (!grouped) return (row) => insert([row]);
  const oneByOne = (rows: Row[]) =>
    Promise.all(
      rows.map((row) =>
        insert([row]).then(
          (): Written => null,
          (error: unknown): Written => ({ error }),
        ),
      ),
    );
  const batcher = naturalBatcher<Row, Written>(
    async (rows) => {
      try {
        await insert(rows);
        return rows.map(() => null);
      } catch (error) {
        return rows.length === 1 ? [{ error }] : oneByOne(rows);
      }
    },
    {
      // Eight parameters a row: well under SQLite's and Postgres's bounds.
      maxBatch: 500,
      // In process, SQLite's statements finish before anything else runs: publishes only
      // group when they wait for the loop's turn.
      nextTurn: !ctx.postgres,
    },
  );
  return async (row) => {
    const written = await batcher.add(row);
    if (written) throw written.error;
  };
}
