import { afterEach, describe, expect, it } from "vitest";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * docs/api.md: `max_running_jobs` bounds a tenant's jobs running at once. A job of a paused
 * model cannot start, so it must not hold one of those places: a tenant whose `noop` jobs
 * wait for a resume still runs its `ocr` jobs. And once `noop` resumes, its jobs go out
 * within the bound again, not all at once past it.
 */
const opened: InProcessGateway[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gw) => gw.close()));
});

type Viewed = { id: string; status: string; waiting_reason?: string; waiting_detail?: string };

async function rig() {
  const gw = await startInProcessGateway({ queueDepthCacheMs: 0 });
  opened.push(gw);
  const key = await gw.addTenant({ id: "ten_two", plan: "pro", limits: { max_running_jobs: 2 } });
  const call = async (path: string, json?: unknown) => {
    const init = json === undefined ? { key } : { method: "POST", key, json };
    const answer = await gw.request(path, init);
    expect(answer.status, path).toBeLessThan(300);
    return (await answer.json()) as Viewed;
  };
  const submit = async (model: "noop" | "ocr") => {
    const input = model === "noop" ? {} : { image: "https://x.test/a.png" };
    const job = await call("/v1/jobs", { model, input });
    // The submit's release pass runs in the background: let it finish first.
    await releaseModel(gw.gateway, model);
    return job;
  };
  return { gw, call, submit };
}

describe("a paused model's jobs and the tenant's max_running_jobs", () => {
  it("do not keep the tenant's other models waiting", async () => {
    const { call, submit } = await rig();
    await call("/v1/admin/models/noop/pause", {});
    await submit("noop");
    await submit("noop");
    const ocr = await submit("ocr");
    const viewed = await call(`/v1/jobs/${ocr.id}`);
    // No agent serves ocr in this rig: that, not the paused noop jobs, is why it waits.
    expect(viewed.waiting_reason).toBe("no_agent_for_model");
  });

  it("go out within the bound once the model resumes", async () => {
    const { gw, call, submit } = await rig();
    await call("/v1/admin/models/noop/pause", {});
    const noops = [await submit("noop"), await submit("noop")];
    await submit("ocr");
    await call("/v1/admin/models/noop/resume", {});
    await releaseModel(gw.gateway, "noop");
    const reasons = await Promise.all(
      noops.map(async (job) => (await call(`/v1/jobs/${job.id}`)).waiting_reason),
    );
    // ocr holds one of the two places: one noop job goes out, the other waits its turn.
    expect(reasons.sort()).toEqual(["no_agent_for_model", "tenant_concurrency_limit"]);
  });
});

describe("a job waiting for the tenant's max_running_jobs", () => {
  it("says which jobs hold the places: here one handed to ocr's agents, none of which came", async () => {
    const { gw, call, submit } = await rig();
    await gw.request("/v1/admin/tenants/ten_two", {
      method: "PATCH",
      key: await gw.addTenant({ id: "ten_admin" }),
      json: { limits: { max_running_jobs: 1 } },
    });
    await submit("ocr");
    const noop = await submit("noop");
    const viewed = await call(`/v1/jobs/${noop.id}`);
    expect(viewed.waiting_reason).toBe("tenant_concurrency_limit");
    expect(viewed.waiting_detail).toBe(
      "Your max_running_jobs is 1, and 1 of your jobs holds those places (handed to agents and not yet taken: 1 of ocr); this one starts when one of them ends.",
    );
  });
});
