import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { Gantry } from "../../client/index.ts";

/**
 * A caller's signal passed to every call (gantry submit passes one to each call of a run)
 * keeps nothing of the calls that ended. Through `AbortSignal.any` each left a WeakRef in
 * the signal's set of dependants (Node 20 never prunes it): about 60 bytes a request, for
 * the signal's life. Counted: that set (a Node internal, read by its symbol's name; absent
 * elsewhere, where it counts 0) and the abort listeners.
 */
function links(signal: AbortSignal): number {
  const symbol = Object.getOwnPropertySymbols(signal).find(
    (s) => s.description === "kDependantSignals",
  );
  // Read by shape: the set was made in Node's own realm, not the test's.
  const dependants: unknown = symbol ? Reflect.get(signal, symbol) : undefined;
  const size: unknown = dependants ? Reflect.get(dependants, "size") : 0;
  return (typeof size === "number" ? size : 0) + getEventListeners(signal, "abort").length;
}

const job = {
  id: "job_1",
  object: "job",
  model: "noop",
  status: "succeeded",
  input: {},
  output: {},
  error: null,
  attempt: 1,
  created_at: "2026-01-01T00:00:00.000Z",
};

describe("the SDK's calls with the caller's signal", () => {
  it("leave no link on it once answered", async () => {
    const gantry = new Gantry({
      baseUrl: "http://gateway.test",
      apiKey: "gk_test_0123456789abcdef",
      fetch: async () => Response.json(job),
    });
    const run = new AbortController();
    for (let i = 0; i < 20; i++) {
      expect((await gantry.jobs.get("job_1", { signal: run.signal })).id).toBe("job_1");
    }
    expect(links(run.signal)).toBe(0);
  });

  it("are still ended by it, with its reason", async () => {
    const gantry = new Gantry({
      baseUrl: "http://gateway.test",
      apiKey: "gk_test_0123456789abcdef",
      maxRetries: 0,
      fetch: (_url, init) =>
        new Promise((_, reject) => {
          // As fetch: an aborted signal refuses at once, else when it aborts.
          if (init?.signal?.aborted) reject(init.signal.reason);
          init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
        }),
    });
    const run = new AbortController();
    const pending = gantry.jobs.get("job_1", { signal: run.signal });
    run.abort(new Error("stopped by the user"));
    await expect(pending).rejects.toThrow("stopped by the user");
    await expect(gantry.jobs.get("job_1", { signal: run.signal })).rejects.toThrow(
      "stopped by the user",
    );
    expect(links(run.signal)).toBe(0);
  });
});
