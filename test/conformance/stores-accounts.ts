import { expect, it } from "vitest";
import { PLANS } from "../../gateway/plans.ts";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import { freshModel, freshTenant, newJob, T0 } from "./stores-jobs.ts";

/** The tenant/key, upload and agent stores' part of the store conformance suite. */
export function accountStoreCases(stores: () => Stores): void {
  const tenants = () => stores().tenants;
  const newTenant = (id = freshTenant()) => ({
    id,
    name: `Tenant ${id}`,
    plan: "pro" as const,
    webhookSecret: newWebhookSecret(),
    now: T0,
  });

  it("tenants: insert once per id, read back, list in pages by id", async () => {
    const prefix = `ten_${randomToken(6).toLowerCase().replace(/\W/g, "x")}`;
    const ids = [`${prefix}_a`, `${prefix}_b`, `${prefix}_c`];
    for (const id of ids)
      expect(await tenants().insert(newTenant(id))).toMatchObject({ id, plan: "pro" });
    expect(await tenants().insert({ ...newTenant(ids[0]), name: "again" })).toBeNull();
    expect(await tenants().byId(ids[0]!)).toMatchObject({ name: `Tenant ${ids[0]}`, limits: null });
    expect(await tenants().byId("ten_missing")).toBeUndefined();
    const first = await tenants().list({ limit: 2, after: `${prefix}` });
    expect(first.map((row) => row.id)).toEqual(ids.slice(0, 2));
    const next = await tenants().list({ limit: 2, after: first.at(-1)!.id });
    expect(next[0]?.id).toBe(ids[2]);
  });

  it("tenants: plan and overrides change apart; null clears the overrides", async () => {
    const { id } = newTenant();
    await tenants().insert({ ...newTenant(id), overrides: { burst: 7 } });
    expect(JSON.parse((await tenants().byId(id))!.limits ?? "null")).toEqual({ burst: 7 });
    const moved = await tenants().updatePlan(id, { plan: "enterprise" });
    expect(moved).toMatchObject({ plan: "enterprise" });
    expect(JSON.parse(moved!.limits ?? "null")).toEqual({ burst: 7 });
    const overridden = await tenants().updatePlan(id, { overrides: { max_queued_jobs: 3 } });
    expect(overridden).toMatchObject({ plan: "enterprise" });
    expect(JSON.parse(overridden!.limits ?? "null")).toEqual({ max_queued_jobs: 3 });
    expect(await tenants().updatePlan(id, { overrides: null })).toMatchObject({ limits: null });
    expect(await tenants().updatePlan("ten_missing", { plan: "free" })).toBeUndefined();
  });

  it("tenants: a key verifies to its tenant with resolved limits until it is revoked", async () => {
    const { id } = newTenant();
    await tenants().insert({ ...newTenant(id), overrides: { burst: 3 } });
    const created = await tenants().insertKey({
      tenantId: id,
      scopes: ["jobs:read", "jobs:read"],
      name: "ci",
      now: T0,
    });
    if (!created) throw new Error("key refused");
    expect(created.key.startsWith("gk_live_")).toBe(true);
    expect(created.row).toMatchObject({
      tenant_id: id,
      name: "ci",
      scopes: "jobs:read",
      revoked_at: null,
    });
    expect(created.row.hash).not.toContain(created.key);
    const found = await tenants().forKey(created.key);
    expect(found).toEqual({
      tenant: { id, name: `Tenant ${id}`, plan: "pro", limits: { ...PLANS.pro, burst: 3 } },
      key: { id: created.row.id, prefix: created.row.prefix, scopes: ["jobs:read"] },
    });
    expect(await tenants().forKey(`${created.key}x`)).toBeNull();
    // A chosen key that is already stored is refused, for any tenant.
    expect(
      await tenants().insertKey({ tenantId: freshTenant(), scopes: [], key: created.key, now: T0 }),
    ).toBeNull();
    expect((await tenants().listKeys(id)).map((row) => row.id)).toEqual([created.row.id]);
    expect((await tenants().listKeys()).some((row) => row.id === created.row.id)).toBe(true);
    expect(await tenants().keyById(created.row.id)).toEqual(created.row);

    expect(await tenants().revokeKey(created.row.id, T0 + 5)).toMatchObject({ revoked_at: T0 + 5 });
    expect(await tenants().revokeKey(created.row.id, T0 + 9)).toMatchObject({ revoked_at: T0 + 5 });
    expect(await tenants().forKey(created.key)).toBeNull();
    expect(await tenants().revokeKey("key_missing", T0)).toBeUndefined();
  });

  it("tenants: the bootstrap tenant and key are made once, and follow the configured plan", async () => {
    const id = freshTenant();
    const apiKey = `gk_${randomToken(24)}`;
    const bootstrap = { id, name: id, apiKey, webhookSecret: newWebhookSecret() };
    await tenants().ensureWithKey(bootstrap, T0);
    await tenants().ensureWithKey(bootstrap, T0 + 1);
    expect(await tenants().listKeys(id)).toHaveLength(1);
    expect((await tenants().forKey(apiKey))?.tenant).toMatchObject({ id, plan: "enterprise" });
    await tenants().ensureWithKey(
      { ...bootstrap, plan: "free", webhookSecret: "whsec_other" },
      T0 + 2,
    );
    expect(await tenants().byId(id)).toMatchObject({
      plan: "free",
      webhook_secret: bootstrap.webhookSecret,
    });
    expect((await tenants().forKey(apiKey))?.key.scopes).toEqual([
      "jobs:read",
      "jobs:write",
      "admin",
    ]);
  });

  it("uploads: stored and found by their tenant only", async () => {
    const tenant = freshTenant();
    const id = newId("upl", T0);
    const upload = {
      id,
      tenant_id: tenant,
      content_type: "image/png",
      size_bytes: 1234,
      blob_key: `inputs/${id}`,
      created_at: T0,
      expires_at: T0 + 3_600_000,
    };
    await stores().uploads.insert(upload);
    // Retention's columns start empty (migrations 0013 and 0017).
    const stored = {
      ...upload,
      used_at: null,
      purge_token: null,
      purge_until: null,
      purge_failures: 0,
    };
    expect(await stores().uploads.forTenant(tenant, id)).toEqual(stored);
    expect(await stores().uploads.forTenant(freshTenant(), id)).toBeUndefined();
    await expect(stores().uploads.insert(upload)).rejects.toThrow();
  });

  const agents = () => stores().agents;

  it("agents: created with a secret, registered, heartbeating; fields left out keep their value", async () => {
    const { row, secret } = await agents().create({ name: "box-1", source: "admin", now: T0 });
    expect(secret).toMatch(/^gas_/);
    expect(row).toMatchObject({
      name: "box-1",
      source: "admin",
      secret,
      models: null,
      revoked_at: null,
    });
    const unnamed = await agents().create({ source: "enrollment", now: T0 });
    expect(unnamed.row.name).toBe(unnamed.row.id);
    const registered = await agents().register(
      row.id,
      {
        v: 1,
        models: ["noop", "ocr"],
        provider: "cuda",
        slots: 4,
        heartbeat_interval_seconds: 2.5,
      },
      T0 + 1,
    );
    expect(registered).toMatchObject({
      slots: 4,
      heartbeat_interval_ms: 2500,
      last_heartbeat_at: T0 + 1,
    });
    expect(JSON.parse(registered!.models ?? "[]")).toEqual(["noop", "ocr"]);
    expect(
      await agents().register(
        "agt_missing",
        { v: 1, models: ["noop"], provider: "cpu", slots: 1 },
        T0,
      ),
    ).toBeUndefined();
    await agents().heartbeat(
      row.id,
      { slots_busy: 2, run_time_ms_avg: 12.6, state: "draining" },
      T0 + 2,
    );
    await agents().heartbeat(row.id, { vram_used_mb: 512 }, T0 + 3);
    expect(await agents().byId(row.id)).toMatchObject({
      slots_busy: 2,
      run_time_ms_avg: 13,
      vram_used_mb: 512,
      reported_state: "draining",
      provider: "cuda",
      last_heartbeat_at: T0 + 3,
    });
  });

  it("agents: listed newest first in pages; revoked once", async () => {
    const made = [];
    for (let i = 0; i < 3; i++)
      made.push((await agents().create({ source: "admin", now: T0 + 9e9 + i })).row.id);
    const page = await agents().list({ limit: 2 });
    expect(page.map((row) => row.id)).toEqual([made[2], made[1]]);
    expect((await agents().list({ limit: 1, before: made[1] }))[0]?.id).toBe(made[0]);
    expect(await agents().revoke(made[0]!, T0 + 1)).toMatchObject({ revoked_at: T0 + 1 });
    expect(await agents().revoke(made[0]!, T0 + 2)).toMatchObject({ revoked_at: T0 + 1 });
    expect(await agents().revoke("agt_missing", T0)).toBeUndefined();
  });

  it("agents: count running jobs per agent and queued jobs per model", async () => {
    const model = freshModel();
    const tenant = freshTenant();
    const rows = await Promise.all(
      [0, 1, 2].map(() => stores().jobs.insert(newJob({ tenantId: tenant, model }))),
    );
    const [a, b] = rows.map((row) => row!.id);
    await stores().jobs.claim(a!, "agt_run_a", 1, T0);
    await stores().jobs.claim(b!, "agt_run_a", 1, T0);
    const running = await agents().runningJobs(["agt_run_a", "agt_run_none"]);
    expect(running.get("agt_run_a")).toBe(2);
    expect(running.get("agt_run_none") ?? 0).toBe(0);
    expect(await agents().runningJobs([])).toEqual(new Map());
    expect((await agents().queuedJobsByModel()).get(model)).toBe(1);
  });

  it("agents: a nonce is accepted once; expired nonces are pruned", async () => {
    const agentId = `agt_${randomToken(6)}`;
    const entry = { agentId, nonce: randomToken(16), expiresAt: T0 + 1_000 };
    expect(await agents().recordNonce(entry, T0)).toBe(true);
    expect(await agents().recordNonce(entry, T0)).toBe(false);
    expect(await agents().recordNonce({ ...entry, agentId: `${agentId}b` }, T0)).toBe(true);
    expect(await agents().pruneNonces(T0 + 2_000, true)).toBeGreaterThanOrEqual(2);
    expect(await agents().recordNonce(entry, T0 + 2_000)).toBe(true);
  });
}
