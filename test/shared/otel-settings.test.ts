import { describe, expect, it } from "vitest";
import { UserError } from "../../shared/errors.ts";
import { startTracing } from "../../shared/tracing/otel-node.ts";

/**
 * The OTLP variables are settings like any other: a bad value stops the gateway or agent
 * with a line naming it (a UserError, exit 2), not an internal error and a stack trace, nor
 * a start that exports nowhere.
 */
describe("OTLP settings", () => {
  it("refuses an endpoint that is no http(s) URL, naming the variable", async () => {
    const cases = [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "notaurl" },
      { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" },
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://collector/v1/traces" },
    ];
    for (const env of cases) {
      const [name] = Object.keys(env);
      const started = startTracing("gantry-test", env);
      await expect(started, name).rejects.toBeInstanceOf(UserError);
      await expect(started, name).rejects.toThrow(new RegExp(`^${name}=.*http\\(s\\) URL`));
    }
  });

  it("starts with an http(s) endpoint", async () => {
    const tracing = await startTracing("gantry-test", {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9/",
    });
    expect(tracing).not.toBeNull();
    await tracing?.shutdown();
  });
});
