/**
 * An in-process gateway for a test file, with an enterprise operator tenant whose key
 * administers the others, and the admin calls that make tenants and keys through it.
 * `gw` and `adminKey` are live bindings: set by the hooks `useAdminGateway` registers.
 */
import { afterAll, beforeAll, expect } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "./in-process-gateway.ts";

export let gw: InProcessGateway;
export let adminKey: string;

/** Starts the gateway before the file's tests and closes it after them. */
export function useAdminGateway(): void {
  beforeAll(async () => {
    gw = await startInProcessGateway();
    adminKey = await gw.addTenant({ id: "ten_operator", plan: "enterprise" });
  });
  afterAll(() => gw.close());
}

export interface KeyView {
  id: string;
  prefix: string;
  scopes: string[];
  key?: string;
  revoked_at: string | null;
  created_at: string;
}

export async function createTenant(id: string, plan = "pro") {
  const response = await gw.request("/v1/admin/tenants", {
    method: "POST",
    key: adminKey,
    json: { id, name: `Tenant ${id}`, plan },
  });
  expect(response.status).toBe(201);
  return (await response.json()) as { id: string; plan: string; limits: { burst: number } };
}

export async function createKey(tenantId: string, scopes?: string[]) {
  const response = await gw.request(`/v1/admin/tenants/${tenantId}/keys`, {
    method: "POST",
    key: adminKey,
    json: scopes ? { scopes, name: "test" } : {},
  });
  expect(response.status).toBe(201);
  expect(response.headers.get("cache-control")).toBe("no-store");
  return (await response.json()) as KeyView & { key: string };
}
