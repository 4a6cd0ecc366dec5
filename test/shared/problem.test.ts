import { describe, expect, it } from "vitest";
import { answerResponse, PROBLEM_BASE, problemFor } from "../../gateway/http/problem.ts";
import { RetryLaterProblem } from "../../gateway/limits/backpressure.ts";
import { openApiDocument } from "../../gateway/openapi/index.ts";
import { ConfigurationError, HttpProblem, UserError } from "../../shared/errors.ts";
import { Problem } from "../../shared/protocol/index.ts";

describe("errors as problem+json, in one place", () => {
  it("answers an HttpProblem as it says, with its code and extras", () => {
    const error = new HttpProblem(409, "job_not_cancelable", "Job not cancelable", "It is done.", {
      status_now: "succeeded",
    });
    const answer = problemFor(error, "/v1/jobs/job_1/cancel");
    expect(answer).toEqual({
      status: 409,
      internal: false,
      headers: {},
      body: {
        type: `${PROBLEM_BASE}job_not_cancelable`,
        title: "Job not cancelable",
        status: 409,
        code: "job_not_cancelable",
        detail: "It is done.",
        instance: "/v1/jobs/job_1/cancel",
        status_now: "succeeded",
      },
    });
    expect(Problem.safeParse(answer.body).success).toBe(true);
  });

  it("carries Retry-After on a 429 or 503", () => {
    const error = new RetryLaterProblem(503, "queue_full", "Queue full", "Try later.", 5);
    const answer = problemFor(error, "/v1/jobs");
    expect(answer.headers).toEqual({ "retry-after": "5" });
    expect(answer.body).toMatchObject({ code: "queue_full", retry_after: 5 });
  });

  it("answers a ConfigurationError, a UserError, as misconfigured, naming the setting", () => {
    const error = new ConfigurationError("DB", 'The D1 binding "DB" is missing.');
    expect(error).toBeInstanceOf(UserError);
    const answer = problemFor(error, "/v1/jobs");
    expect(answer.internal).toBe(false);
    expect(answer.body).toMatchObject({
      status: 500,
      code: "misconfigured",
      detail: 'The D1 binding "DB" is missing.',
      setting: "DB",
    });
  });

  it("says nothing of an internal error but that it is one", async () => {
    const answer = problemFor(new Error("password=hunter2 at db.internal"), "/v1/jobs");
    expect(answer.internal).toBe(true);
    expect(answer.body).toMatchObject({ status: 500, code: "internal_error" });
    const response = answerResponse(answer);
    expect(response.status).toBe(500);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.text()).not.toContain("hunter2");
  });

  it("documents `code` in the OpenAPI Problem schema", () => {
    const problem = openApiDocument("https://gantry.example").components.schemas.Problem as {
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(problem.properties.code).toMatchObject({ type: "string" });
    expect(problem.required).toContain("code");
  });

  it("lists 429 on every operation and 403 on every one that needs a scope", () => {
    const paths = openApiDocument("https://gantry.example").paths as Record<
      string,
      Record<string, { responses: Record<string, unknown> }>
    >;
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const codes = Object.keys(operation.responses);
        expect(codes, `${method} ${path}`).toContain("429");
        if (!path.startsWith("/v1/models")) expect(codes, `${method} ${path}`).toContain("403");
      }
    }
    expect(Object.keys(paths["/v1/jobs/{id}/artifacts/{name}"]!.get!.responses)).toContain("410");
  });
});
