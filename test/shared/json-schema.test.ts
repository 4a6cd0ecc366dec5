import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { newId } from "../../shared/ids.ts";
import { wireJsonSchemas } from "../../shared/protocol/json-schema.ts";

const dir = join(import.meta.dirname, "../../shared/protocol/json-schema");
const load = (name: string) => JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8"));

describe("JSON Schema export", () => {
  it("is generated from the zod schemas and checked in up to date", () => {
    for (const [file, text] of Object.entries(wireJsonSchemas())) {
      expect(
        readFileSync(join(dir, file), "utf8"),
        `${file} is stale: npm run generate:schemas`,
      ).toBe(text);
    }
  });

  it("lets a non-zod consumer validate queue messages and agent events", () => {
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    const queueMessage = ajv.compile(load("QueueMessage"));
    const good = {
      v: 1,
      id: newId("job"),
      model: "ocr",
      priority: 5,
      attempt: 0,
      deadline: "2026-12-01T00:00:00.000Z",
    };
    expect(queueMessage(good)).toBe(true);
    expect(queueMessage({ ...good, v: 2 })).toBe(false);
    expect(queueMessage({ ...good, id: "nope" })).toBe(false);
    const agentEvent = ajv.compile(load("AgentEvent"));
    const failed = {
      v: 1,
      type: "failed",
      agent_id: "gpu-1",
      attempt: 1,
      error: { type: "permanent", code: "invalid_image", message: "not an image" },
      will_retry: false,
    };
    expect(agentEvent(failed)).toBe(true);
    expect(agentEvent({ ...failed, type: "exploded" })).toBe(false);
  });
});
