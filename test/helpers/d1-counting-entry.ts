/**
 * The gateway's Workers entry with its D1 binding counted: every statement it runs (one a
 * `prepare(...).all()/run()/first()/raw()`, each statement of a `batch()`, and each of an
 * `exec()`'s lines), per invocation, its `waitUntil` work included, since Cloudflare counts
 * D1 queries per Worker invocation (https://developers.cloudflare.com/d1/platform/limits/).
 * Bundled by workerd-counted.ts; `GET /__d1/invocations` answers the invocations since the
 * last such call, each `{ path, statements }`, once their background work is done.
 */
import type {
  D1Database,
  D1PreparedStatement,
  ExecutionContext,
  ScheduledController,
} from "@cloudflare/workers-types";
import entry, { type WorkerEnv } from "../../gateway/runtime/workers/index.ts";

export { GantryRateLimiter } from "../../gateway/runtime/workers/index.ts";

interface Invocation {
  path: string;
  statements: number;
  /** Statements by their SQL's first 60 characters, to say which ones a route repeats. */
  texts: Record<string, number>;
}

const finished: Invocation[] = [];
const pending = new Set<Promise<unknown>>();
// Requests are counted one at a time: the test sends each after the one before has ended.
let current: Invocation = { path: "(none)", statements: 0, texts: {} };

function count(sql: string) {
  current.statements += 1;
  const text = sql.replace(/\s+/g, " ").trim().slice(0, 60);
  current.texts[text] = (current.texts[text] ?? 0) + 1;
}

const real = new WeakMap<object, D1PreparedStatement>();

const texts = new WeakMap<object, string>();

function countedStatement(statement: D1PreparedStatement, sql: string): D1PreparedStatement {
  const counted = new Proxy(statement, {
    get(target, property) {
      if (property === "bind") {
        return (...values: unknown[]) => countedStatement(target.bind(...values), sql);
      }
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== "function") return value;
      if (["all", "run", "first", "raw"].includes(String(property))) count(sql);
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
  real.set(counted, statement);
  texts.set(counted, sql);
  return counted;
}

function countedDatabase(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, property) {
      if (property === "prepare") {
        return (query: string) => countedStatement(target.prepare(query), query);
      }
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) => {
          for (const one of statements) count(texts.get(one) ?? "(batch)");
          return target.batch(statements.map((one) => real.get(one) ?? one));
        };
      }
      if (property === "exec") {
        return (query: string) => {
          for (const line of query.split("\n").filter((one) => one.trim())) count(line);
          return target.exec(query);
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

// The gateway keys its isolate's state by `env`: the same counted env for every request.
const countedEnvs = new WeakMap<WorkerEnv, WorkerEnv>();
function counted(env: WorkerEnv): WorkerEnv {
  let wrapped = countedEnvs.get(env);
  if (!wrapped) {
    wrapped = env.DB ? { ...env, DB: countedDatabase(env.DB) } : env;
    countedEnvs.set(env, wrapped);
  }
  return wrapped;
}

function begin(path: string, ctx: ExecutionContext): ExecutionContext {
  current = { path, statements: 0, texts: {} };
  const mine = current;
  finished.push(mine);
  return {
    ...ctx,
    passThroughOnException: () => ctx.passThroughOnException(),
    waitUntil(work: Promise<unknown>) {
      const tracked = work.finally(() => pending.delete(tracked));
      pending.add(tracked);
      ctx.waitUntil(tracked);
    },
  } as ExecutionContext;
}

export default {
  async fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/__d1/invocations") {
      while (pending.size > 0) await Promise.allSettled([...pending]);
      const answer = finished.splice(0);
      return Response.json(answer);
    }
    return entry.fetch(request, counted(env), begin(`${request.method} ${url.pathname}`, ctx));
  },
  async scheduled(controller: ScheduledController, env: WorkerEnv, ctx: ExecutionContext) {
    await entry.scheduled(controller, counted(env), begin("scheduled", ctx));
  },
};
