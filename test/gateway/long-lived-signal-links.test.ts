import { getEventListeners } from "node:events";
import { describe, expect, it, onTestFinished } from "vitest";
import { waitForJob } from "../../gateway/jobs/wait.ts";
import { postWebhook } from "../../gateway/webhooks/post.ts";
import { linkSignals } from "../../shared/abort-link.ts";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * What a webhook attempt or a `Prefer: wait` request links to the gateway's `stopping`
 * signal goes when it ends. Through `AbortSignal.any`, each left a WeakRef in that signal's
 * set of dependants (Node 20 never prunes it), about 60 bytes per attempt or wait for the
 * gateway's life. Counted here: the set's size (a Node internal, read by its symbol's
 * name; absent elsewhere, where it counts 0) and the abort listeners.
 */
function links(signal: AbortSignal): number {
  const symbol = Object.getOwnPropertySymbols(signal).find(
    (s) => s.description === "kDependantSignals",
  );
  // Read by shape: the set was made in Node's own realm, not the test's.
  const dependants: unknown = symbol ? Reflect.get(signal, symbol) : undefined;
  const size: unknown = dependants ? Reflect.get(dependants, "size") : 0;
  const held = typeof size === "number" ? size : 0;
  return held + getEventListeners(signal, "abort").length;
}

const answered: typeof fetch = async () => new Response(null, { status: 204 });
const failing: typeof fetch = async () => new Response("no", { status: 500 });

describe("links to a long-lived signal", () => {
  it("a webhook attempt leaves none on the gateway's stopping signal", async () => {
    const stopping = new AbortController().signal;
    const before = links(stopping);
    for (let i = 0; i < 20; i++) {
      const ok = await postWebhook(answered, "http://receiver/h", "{}", hookHeaders(), {
        timeoutMs: 5_000,
        stopping,
      });
      expect(ok.statusCode).toBe(204);
      const refused = await postWebhook(failing, "http://receiver/h", "{}", hookHeaders(), {
        timeoutMs: 5_000,
        stopping,
      });
      expect(refused.reason).toBe("http_status");
    }
    expect(links(stopping)).toBe(before);
  });

  it("an attempt still ends with the gateway's stop, or at its own timeout", async () => {
    const stop = new AbortController();
    const hang: typeof fetch = (_url, init) =>
      new Promise((_, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    const timedOut = await postWebhook(hang, "http://receiver/h", "{}", hookHeaders(), {
      timeoutMs: 50,
      stopping: stop.signal,
    });
    expect(timedOut.reason).toBe("timeout");
    expect(timedOut.error).toBe("timed out after 50 ms");
    const attempt = postWebhook(hang, "http://receiver/h", "{}", hookHeaders(), {
      timeoutMs: 60_000,
      stopping: stop.signal,
    });
    stop.abort();
    expect((await attempt).error).toContain("cut short");
  });

  it("a Prefer: wait leaves none on the gateway's stopping signal", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    onTestFinished(() => gw.close());
    const stopping = gw.gateway.stopping;
    if (!stopping) throw new Error("the Node gateway has a stopping signal");
    const [job] = await submitNoopJobs(gw, 1, () => ({}));
    const row = await gw.gateway.stores.jobs.byId(job?.id ?? "");
    if (!row) throw new Error("the job was stored");
    const before = links(stopping);
    for (let i = 0; i < 20; i++) {
      const client = new AbortController();
      expect((await waitForJob(gw.gateway, row, 5, client.signal)).id).toBe(row.id);
      expect((await waitForJob(gw.gateway, row, 5)).id).toBe(row.id);
    }
    expect(links(stopping)).toBe(before);
  });

  it("a linked signal aborts with its first source's reason, and at once if one has", () => {
    const a = new AbortController();
    const b = new AbortController();
    const link = linkSignals(a.signal, undefined, b.signal);
    b.abort("b stopped");
    expect(link.signal.reason).toBe("b stopped");
    expect(getEventListeners(a.signal, "abort")).toHaveLength(0);
    const late = linkSignals(a.signal, b.signal);
    expect(late.signal.aborted).toBe(true);
  });
});

function hookHeaders() {
  return { "webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,x" };
}
