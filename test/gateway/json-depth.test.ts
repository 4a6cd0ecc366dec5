import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../gateway/http/json-shape.ts";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";

/**
 * A JSON body nested deeper than the API keeps is refused 422, naming the bound. Before, a
 * 30 KB body nesting a model parameter 5 000 levels deep (noop takes any extra key) passed
 * every check and overflowed the stack where the job row is written: 500 internal_error;
 * 3 000 levels was accepted and stored, for every later read and webhook to serialize again.
 */
let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway();
  key = await gw.addTenant({ id: "ten_depth" });
});
afterAll(() => gw.close());

const objects = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
const arrays = (depth: number) => `${"[".repeat(depth)}1${"]".repeat(depth)}`;

const post = (path: string, body: string) =>
  gw.request(path, { method: "POST", key, headers: { "content-type": "application/json" }, body });

describe("JSON bodies nested too deep", () => {
  it("refuses a job whose parameter nests past the bound, objects or arrays", async () => {
    for (const deep of [objects(5_000), arrays(5_000), objects(MAX_JSON_DEPTH + 1)]) {
      const response = await post("/v1/jobs", `{"model":"noop","input":{"deep":${deep}}}`);
      expect(response.status).toBe(422);
      const problem = await problemOf(response);
      expect(problem.code).toBe("validation_failed");
      expect(problem.detail).toContain(`${MAX_JSON_DEPTH} levels`);
    }
  });

  it("refuses a batch holding such an item", async () => {
    const items = `[{"input":{}},{"input":{"deep":${arrays(5_000)}}}]`;
    const response = await post("/v1/batches", `{"model":"noop","items":${items}}`);
    expect(response.status).toBe(422);
  });

  it("takes a body nested within the bound", async () => {
    // The body itself and `input` are two levels: the parameter may take the rest.
    const response = await post(
      "/v1/jobs",
      `{"model":"noop","input":{"deep":${objects(MAX_JSON_DEPTH - 3)}}}`,
    );
    expect(response.status).toBe(202);
  });
});
