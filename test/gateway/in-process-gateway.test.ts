/**
 * The in-process gateway helper (used by ten test files) turns a failure in the gateway's
 * background work into a failed close, so it fails the test instead of being swallowed.
 */
import { describe, expect, it } from "vitest";
import { startInProcessGateway } from "../helpers/in-process-gateway.ts";

describe("in-process gateway helper", () => {
  it("close rejects, naming the failure, when background work failed", async () => {
    const gw = await startInProcessGateway();
    gw.gateway.background(Promise.reject(new Error("webhook send blew up")));
    const closing = gw.close();
    await expect(closing).rejects.toThrow("the gateway's background work failed 1 time(s)");
    await expect(closing).rejects.toMatchObject({
      errors: [expect.objectContaining({ message: "webhook send blew up" })],
    });
  });

  it("close waits for background work still running, and resolves when it succeeded", async () => {
    const gw = await startInProcessGateway();
    let finished = false;
    gw.gateway.background(
      new Promise<void>((resolve) => setTimeout(resolve, 20)).then(() => {
        finished = true;
      }),
    );
    await gw.close();
    expect(finished).toBe(true);
  });
});
