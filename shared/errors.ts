/**
 * The user's mistake (a bad setting, a bad flag), shown plainly without a stack trace.
 * Everything else is an internal error and is logged in full.
 */
export class UserError extends Error {
  override readonly name = "UserError";
}

/** An HTTP API error, rendered as RFC 9457 problem+json. */
export class HttpProblem extends Error {
  override readonly name = "HttpProblem";
  constructor(
    readonly status: number,
    /** A stable, machine-readable code, also the last segment of `type`. */
    readonly code: string,
    readonly title: string,
    readonly detail?: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail ?? title);
  }
}

export const notFound = (what: string, id: string) =>
  new HttpProblem(404, "not_found", `${what} not found`, `No ${what.toLowerCase()} ${id}.`);
