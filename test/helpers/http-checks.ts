/**
 * Checks on HTTP answers that hold on every runtime: a problem+json body with its status
 * and code, and a request body that streams in pieces with no Content-Length.
 */
import { expect } from "vitest";

/** What both Miniflare's and the global Response offer. */
export interface ProblemResponse {
  status: number;
  headers: { get(name: string): string | null };
  json(): Promise<unknown>;
}

export interface Problem {
  status: number;
  code: string;
  title: string;
  detail?: string;
  setting?: string;
}

export async function expectProblem(response: ProblemResponse, status: number, code?: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toContain("application/problem+json");
  const body = (await response.json()) as Problem;
  expect(body.status).toBe(status);
  if (code) expect(body.code).toBe(code);
  return body;
}

/** A body with no Content-Length: the route must count the bytes as they stream. */
export function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.byteLength; i += 100) controller.enqueue(bytes.slice(i, i + 100));
      controller.close();
    },
  });
}
