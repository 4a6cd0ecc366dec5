import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { loggablePrefix, requiredScope } from "../../gateway/http/auth.ts";
import { ensureTenantWithKey, tenantForKey } from "../../gateway/store/tenants.ts";
import { randomToken } from "../../shared/ids.ts";
import {
  adminKey,
  createKey,
  createTenant,
  gw,
  type KeyView,
  useAdminGateway,
} from "../helpers/admin-gateway.ts";
import { problemOf } from "../helpers/in-process-gateway.ts";

useAdminGateway();

describe("API keys", () => {
  it("shows a new key once, stores only its hash and a short prefix", async () => {
    const tenant = await createTenant("ten_acme");
    expect(tenant.plan).toBe("pro");
    const created = await createKey("ten_acme");
    expect(created.key).toMatch(/^gk_live_[A-Za-z0-9_-]{32}$/);
    expect(created.prefix).toBe(created.key.slice(0, 12));
    expect(created.scopes).toEqual(["jobs:read", "jobs:write"]);

    const rows = await gw.db.selectFrom("api_keys").selectAll().execute();
    const stored = rows.find((row) => row.id === created.id);
    expect(stored?.hash).toBe(createHash("sha256").update(created.key).digest("hex"));
    expect(JSON.stringify(rows)).not.toContain(created.key);

    const list = await gw.request("/v1/admin/tenants/ten_acme/keys", { key: adminKey });
    const { data } = (await list.json()) as { data: Array<Record<string, unknown>> };
    expect(data).toHaveLength(1);
    expect(Object.keys(data[0]!).sort()).toEqual(
      ["created_at", "id", "name", "object", "prefix", "revoked_at", "scopes", "tenant_id"].sort(),
    );
    expect(JSON.stringify(data)).not.toContain(created.key);

    expect((await gw.request("/v1/jobs", { key: created.key })).status).toBe(200);
  });

  it("refuses a revoked key at its next request", async () => {
    await createTenant("ten_revoke");
    const created = await createKey("ten_revoke");
    expect((await gw.request("/v1/jobs", { key: created.key })).status).toBe(200);
    const revoked = await gw.request(`/v1/admin/keys/${created.id}/revoke`, {
      method: "POST",
      key: adminKey,
    });
    const view = (await revoked.json()) as KeyView;
    expect(view.revoked_at).not.toBeNull();
    const refused = await gw.request("/v1/jobs", { key: created.key });
    expect((await problemOf(refused)).code).toBe("unauthorized");
    expect(refused.headers.get("www-authenticate")).toContain("Bearer");

    const again = await gw.request(`/v1/admin/keys/${created.id}/revoke`, {
      method: "POST",
      key: adminKey,
    });
    expect(((await again.json()) as KeyView).revoked_at).toBe(view.revoked_at);
    const unknown = await gw.request("/v1/admin/keys/key_nope/revoke", {
      method: "POST",
      key: adminKey,
    });
    expect(unknown.status).toBe(404);
  });

  it("enforces scopes with a 403 that names the missing one", async () => {
    await createTenant("ten_scopes");
    const reader = (await createKey("ten_scopes", ["jobs:read"])).key;
    const writer = (await createKey("ten_scopes", ["jobs:write"])).key;

    expect((await gw.request("/v1/jobs", { key: reader })).status).toBe(200);
    expect((await gw.request("/v1/models", { key: reader })).status).toBe(200);
    for (const [path, method] of [
      ["/v1/jobs", "POST"],
      ["/v1/uploads", "POST"],
      ["/v1/jobs/job_x/cancel", "POST"],
      ["/v1/webhooks/secret", "GET"],
    ] as const) {
      const body = method === "POST" ? { json: {} } : {};
      const refused = await gw.request(path, { method, key: reader, ...body });
      const problem = await problemOf(refused);
      expect(problem.code).toBe("insufficient_scope");
      expect(problem.required_scope).toBe("jobs:write");
      expect(problem.detail).toContain("jobs:write");
    }
    const admin = await problemOf(await gw.request("/v1/admin/tenants", { key: reader }));
    expect(admin.required_scope).toBe("admin");

    const submitted = await gw.request("/v1/jobs", {
      method: "POST",
      key: writer,
      json: { model: "noop", input: {} },
    });
    expect(submitted.status).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    const read = await problemOf(await gw.request(`/v1/jobs/${id}`, { key: writer }));
    expect(read.required_scope).toBe("jobs:read");
    const canceled = await gw.request(`/v1/jobs/${id}/cancel`, { method: "POST", key: writer });
    expect(canceled.status).toBe(200);
  });

  it("answers a method no route takes 405, not 403 naming a scope that would allow nothing", async () => {
    await createTenant("ten_methods");
    const reader = (await createKey("ten_methods", ["jobs:read"])).key;
    for (const [path, method] of [
      ["/v1/jobs", "OPTIONS"],
      ["/v1/jobs/job_x", "DELETE"],
      ["/v1/uploads/upl_x", "PATCH"],
    ] as const) {
      const answer = await gw.request(path, { method, key: reader });
      expect((await problemOf(answer)).code, `${method} ${path}`).toBe("method_not_allowed");
      expect(answer.headers.get("allow"), `${method} ${path}`).toContain("GET");
    }
    // A method the path takes still needs its scope; the admin routes stay 403 to non-admins.
    const submit = await gw.request("/v1/jobs", { method: "POST", key: reader, json: {} });
    expect((await problemOf(submit)).code).toBe("insufficient_scope");
    const admin = await gw.request("/v1/admin/tenants", { method: "DELETE", key: reader });
    expect((await problemOf(admin)).code).toBe("insufficient_scope");
  });

  it("maps every request to its scope in one place", () => {
    expect(requiredScope("GET", "/v1/admin/agents")).toBe("admin");
    expect(requiredScope("GET", "/v1/jobs/job_1/webhooks")).toBe("jobs:read");
    expect(requiredScope("POST", "/v1/jobs/job_1/webhooks/whd_1/redeliver")).toBe("jobs:write");
    expect(requiredScope("POST", "/v1/webhooks/secret/rotate")).toBe("jobs:write");
    // The secret signs webhooks: reading it takes jobs:write. Endpoint health is a read.
    expect(requiredScope("GET", "/v1/webhooks/secret")).toBe("jobs:write");
    expect(requiredScope("GET", "/v1/webhooks/endpoints")).toBe("jobs:read");
    expect(requiredScope("POST", "/v1/webhooks/endpoints/enable")).toBe("jobs:write");
    expect(requiredScope("GET", "/v1/models/ocr")).toBeNull();
    expect(requiredScope("GET", "/v1/administrator")).toBe("jobs:read");
  });

  it("hides another tenant's upload", async () => {
    await createTenant("ten_up_a");
    await createTenant("ten_up_b");
    const a = (await createKey("ten_up_a")).key;
    const b = (await createKey("ten_up_b")).key;
    const presigned = await gw.request("/v1/uploads", {
      method: "POST",
      key: a,
      json: { content_type: "image/png", size_bytes: 10 },
    });
    const { id } = (await presigned.json()) as { id: string };
    const problem = await problemOf(
      await gw.request("/v1/jobs", {
        method: "POST",
        key: b,
        json: { model: "ocr", input: { image: id } },
      }),
    );
    expect(problem.code).toBe("unknown_upload");
  });
});

describe("admin API: tenants and plans", () => {
  it("validates plans and limit overrides, and refuses a taken id", async () => {
    const bad = await gw.request("/v1/admin/tenants", {
      method: "POST",
      key: adminKey,
      json: { name: "x", plan: "platinum" },
    });
    expect((await problemOf(bad)).status).toBe(422);
    const band = await gw.request("/v1/admin/tenants", {
      method: "POST",
      key: adminKey,
      json: { name: "x", plan: "free", limits: { priority_default: 8 } },
    });
    expect((await problemOf(band)).code).toBe("invalid_limits");
    await createTenant("ten_dup");
    const dup = await gw.request("/v1/admin/tenants", {
      method: "POST",
      key: adminKey,
      json: { id: "ten_dup", name: "again" },
    });
    expect((await problemOf(dup)).code).toBe("tenant_exists");
    const made = await gw.request("/v1/admin/tenants", {
      method: "POST",
      key: adminKey,
      json: { name: "Generated id" },
    });
    const view = (await made.json()) as { id: string; plan: string };
    expect(view.id).toMatch(/^ten_/);
    expect(view.plan).toBe("free");
    expect(JSON.stringify(view)).not.toContain("whsec_");
  });

  it("clamps job priority into the plan's band, and follows a plan change", async () => {
    const tenant = await createTenant("ten_band", "free");
    expect(tenant.limits.burst).toBeGreaterThan(0);
    const key = (await createKey("ten_band")).key;
    const submit = async (priority?: number) => {
      const response = await gw.request("/v1/jobs", {
        method: "POST",
        key,
        json: { model: "noop", input: {}, ...(priority === undefined ? {} : { priority }) },
      });
      return ((await response.json()) as { priority: number }).priority;
    };
    expect(await submit()).toBe(1);
    expect(await submit(9)).toBe(2);
    expect(await submit(0)).toBe(0);
    const patched = await gw.request("/v1/admin/tenants/ten_band", {
      method: "PATCH",
      key: adminKey,
      json: { plan: "pro" },
    });
    expect(((await patched.json()) as { plan: string }).plan).toBe("pro");
    expect(await submit()).toBe(5);
    expect(await submit(0)).toBe(3);
  });

  it("stores the limits a PATCH sends, and the new rate applies at the next request", async () => {
    await createTenant("ten_patched", "free");
    const key = (await createKey("ten_patched")).key;
    const before = await gw.request("/v1/jobs", { key });
    expect(before.headers.get("ratelimit-limit")).toBe("20");
    const patched = await gw.request("/v1/admin/tenants/ten_patched", {
      method: "PATCH",
      key: adminKey,
      json: { limits: { rate_per_second: 1000, burst: 2000 } },
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({
      plan: "free",
      overrides: { rate_per_second: 1000, burst: 2000 },
      limits: { rate_per_second: 1000, burst: 2000 },
    });
    const read = await gw.request("/v1/admin/tenants/ten_patched", { key: adminKey });
    expect(await read.json()).toMatchObject({ overrides: { rate_per_second: 1000 } });
    const after = await gw.request("/v1/jobs", { key });
    expect(after.headers.get("ratelimit-limit")).toBe("2000");
    // A plan change alone keeps the overrides; `limits: null` clears them.
    const moved = await gw.request("/v1/admin/tenants/ten_patched", {
      method: "PATCH",
      key: adminKey,
      json: { plan: "pro" },
    });
    expect(await moved.json()).toMatchObject({ plan: "pro", overrides: { burst: 2000 } });
    const cleared = await gw.request("/v1/admin/tenants/ten_patched", {
      method: "PATCH",
      key: adminKey,
      json: { limits: null },
    });
    expect(await cleared.json()).toMatchObject({ overrides: null, limits: { burst: 100 } });
  });

  it("makes the bootstrap tenant an enterprise admin, idempotently", async () => {
    const apiKey = `gk_${randomToken(24)}`;
    const tenant = { id: "ten_boot", name: "default", apiKey, webhookSecret: "whsec_AAAA" };
    await ensureTenantWithKey(gw.db, tenant);
    await ensureTenantWithKey(gw.db, tenant);
    const found = await tenantForKey(gw.db, apiKey);
    expect(found?.tenant.plan).toBe("enterprise");
    expect(found?.key.scopes.sort()).toEqual(["admin", "jobs:read", "jobs:write"]);
    const keys = await gw.db
      .selectFrom("api_keys")
      .selectAll()
      .where("tenant_id", "=", "ten_boot")
      .execute();
    expect(keys).toHaveLength(1);
    // The printed key can make other tenants' keys.
    const made = await gw.request("/v1/admin/tenants/ten_acme/keys", {
      method: "POST",
      key: apiKey,
      json: { scopes: ["jobs:read"] },
    });
    expect(made.status).toBe(201);
  });
});

describe("secrets stay out of logs and problems", () => {
  it("logs only key prefixes, and never echoes a key in a problem", async () => {
    const goodKey = await gw.addTenant({ id: "ten_logs" });
    const badKey = `gk_live_${randomToken(24)}`;
    const refused = await gw.request("/v1/jobs", { key: badKey });
    const refusedText = await refused.text();
    const accepted = await gw.request("/v1/jobs", {
      method: "POST",
      key: goodKey,
      json: { model: "noop", input: {} },
    });
    expect(accepted.status).toBe(202);
    const acceptedText = await accepted.text();
    const forbidden = await gw.request("/v1/admin/tenants", {
      key: (await createKey("ten_acme", ["jobs:read"])).key,
    });
    const forbiddenText = await forbidden.text();

    const logs = gw.logs.join("");
    expect(logs).toContain(loggablePrefix(badKey));
    for (const key of [goodKey, badKey, adminKey]) {
      expect(logs).not.toContain(key);
      for (const body of [refusedText, acceptedText, forbiddenText])
        expect(body).not.toContain(key);
    }
    expect(refusedText).not.toContain("Bearer");
  });

  it("never logs a short or foreign token whole", () => {
    expect(loggablePrefix("gk_live_abcdefghijklmnop")).toBe("gk_live_abcd");
    expect(loggablePrefix("nope")).toBe("n…");
    expect(loggablePrefix("sixteen-chars-ok")).toBe("sixt…");
  });
});
