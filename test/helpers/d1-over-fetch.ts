import type { D1Database } from "@cloudflare/workers-types";
import type { Miniflare } from "miniflare";

/**
 * The entry worker of a test's Miniflare that runs one D1 statement per request. Why not
 * `mf.getD1Database()`: that binding's `prepare` and `bind` are synchronous calls through
 * Miniflare's `SynchronousFetcher`, whose helper thread stores its "done" flag and only then
 * notifies. A notify left over from one call can wake the next call before its answer is
 * posted; that call then fails (`message?.id === id`) and every later one reads the answer
 * of the call before it. Seen here once in three full runs on an idle machine. An ordinary
 * async fetch to a worker bound to the same D1 has no such path.
 */
export const D1_SQL_WORKER = `export default {
  async fetch(request, env) {
    const { sql, params } = await request.json();
    try {
      return Response.json(await env.DB.prepare(sql).bind(...params).all());
    } catch (error) {
      return Response.json({ error: String(error?.message ?? error) }, { status: 500 });
    }
  },
};`;

type Param = string | number | boolean | null;

/**
 * What kysely-d1 uses of a D1 binding (`prepare(sql).bind(...params).all()`), each statement
 * sent to `D1_SQL_WORKER` as JSON. Parameters are JSON values: Gantry's stores bind strings,
 * numbers and nulls only (no blobs).
 */
export function d1OverFetch(mf: Miniflare): D1Database {
  const run = async (sql: string, params: readonly unknown[]) => {
    for (const param of params) {
      if (param !== null && !["string", "number", "boolean"].includes(typeof param)) {
        throw new Error(`d1OverFetch: a ${typeof param} parameter cannot travel as JSON`);
      }
    }
    const response = await mf.dispatchFetch("http://d1.test/", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sql, params: params as Param[] }),
    });
    const body = (await response.json()) as { error?: string };
    if (!response.ok) throw new Error(body.error ?? `D1 worker answered ${response.status}`);
    return body;
  };
  const database = {
    prepare: (sql: string) => ({
      bind: (...params: unknown[]) => ({ all: () => run(sql, params) }),
    }),
  };
  // Only the three calls kysely-d1 makes exist; the rest of the binding is never reached.
  return database as unknown as D1Database;
}
