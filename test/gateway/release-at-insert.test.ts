import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KyselyJobStore, type NewJob } from "../../gateway/store/job-store.ts";
import { openDatabase } from "../../shared/db/open.ts";
import { newId } from "../../shared/ids.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * A submit's job released by its own insert (gateway/store/insert-released.ts): only when a
 * release pass would release it at once, and never past the window or the tenant's limit,
 * even with two gateways inserting at the same moment (Postgres; SQLite has one writer).
 */
describe.each(["sqlite", "postgres"] as const)("release at insert (%s)", (kind) => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let store: KyselyJobStore;
  let model = "";
  let modelCount = 0;

  beforeAll(async () => {
    database = await openTestDatabase(kind);
    store = new KyselyJobStore(database.db, { maxParameters: 10_000 });
  });
  afterAll(() => database.close());

  const nextModel = () => {
    model = `m${modelCount++}`;
    return model;
  };
  /** Two tenants with nothing running yet. */
  const tenants = async () => {
    const ids = [`t_a${modelCount}`, `t_b${modelCount}`] as const;
    for (const id of ids) await proTenant(database.db, id);
    return ids;
  };
  // A second apart: a store skips the try for a moment after a model's group came back
  // held (insert-released.ts), and each case here is about the try itself.
  let clock = Date.now();
  const job = (tenantId: string, window = 4, maxActive = 100): NewJob => {
    clock += 1_000;
    const now = clock;
    return {
      id: newId("job", now),
      tenantId,
      model,
      priority: 0,
      input: {},
      webhook: null,
      idempotencyKey: null,
      requestHash: null,
      traceparent: null,
      now,
      expiresAt: now + 60_000,
      held: true,
      releaseIfFree: { window, maxActive },
    };
  };
  const insert = async (of: NewJob, on = store) => {
    const row = await on.insert(of);
    if (!row) throw new Error("not inserted");
    return row;
  };
  const released = (row: { released_at: number | null }) => row.released_at !== null;

  it("releases a job when nothing of its model is held and the window has room", async () => {
    nextModel();
    const [a, b] = await tenants();
    expect(released(await insert(job(a)))).toBe(true);
    expect(released(await insert(job(b)))).toBe(true);
  });

  it("holds it once the window is full, and behind any held job of its model", async () => {
    nextModel();
    const [a, b] = await tenants();
    for (let i = 0; i < 2; i++) expect(released(await insert(job(a, 2)))).toBe(true);
    expect(released(await insert(job(b, 2)))).toBe(false);
    // The window has room again (a bigger fleet), but a job waits: this one waits behind it.
    expect(released(await insert(job(b, 8)))).toBe(false);
  });

  it("holds it when its tenant is at max_running_jobs, not another tenant's", async () => {
    nextModel();
    const [a, b] = await tenants();
    expect(released(await insert(job(a, 8, 1)))).toBe(true);
    expect(released(await insert(job(a, 8, 1)))).toBe(false);
    nextModel();
    // a's released job of the other model counts against its limit here too.
    expect(released(await insert(job(a, 8, 1)))).toBe(false);
    nextModel();
    expect(released(await insert(job(b, 8, 1)))).toBe(true);
  });

  it("stores every column a submit sets, as a plain insert does", async () => {
    nextModel();
    const [a] = await tenants();
    const full = (of: NewJob): NewJob => ({
      ...of,
      input: { text: 'ünïcode \\ "quoted"', n: 1.5, list: [null, true] },
      webhook: { url: "https://example.com/hook", events: ["job.succeeded"] },
      idempotencyKey: `key-${of.id}`,
      requestHash: "sha256:abc",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      metadata: { customer: "c-1", "a b": "x" },
      timeoutSeconds: 90,
      timeoutDefault: true,
      keyId: "key_1",
      fairnessKey: "user-7",
    });
    const tried = await insert(full(job(a)));
    expect(released(tried)).toBe(true);
    const plain = await insert({ ...full(job(a)), held: false, releaseIfFree: undefined });
    const columns = (row: object) =>
      Object.fromEntries(
        Object.entries(row).filter(
          ([column]) =>
            ![
              "id",
              "idempotency_key",
              "created_at",
              "updated_at",
              "expires_at",
              "released_at",
            ].includes(column),
        ),
      );
    expect(columns(tried)).toEqual(columns(plain));
    expect(tried.idempotency_key).toBe(`key-${tried.id}`);
    expect(tried.created_at).toBe(tried.released_at);
  });

  it.runIf(kind === "postgres")(
    "lets only one of two gateways' simultaneous inserts into a window of one",
    async () => {
      const other = await openDatabase(database.url);
      try {
        const second = new KyselyJobStore(other.db, { maxParameters: 10_000 });
        const [a, b] = await tenants();
        for (let round = 0; round < 15; round++) {
          nextModel();
          const rows = await Promise.all([insert(job(a, 1)), insert(job(b, 1), second)]);
          expect(rows.filter(released)).toHaveLength(1);
        }
      } finally {
        await other.close();
      }
    },
  );
});
