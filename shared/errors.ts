/**
 * The user's mistake (a bad setting, a bad flag), shown plainly without a stack trace.
 * Everything else is an internal error and is logged in full.
 */
export class UserError extends Error {
  override readonly name: string = "UserError";
}

/**
 * A setting or binding is missing or wrong: the operator's fix, not a bug. `setting` names
 * it, so a deploy check can point at the variable without parsing the sentence.
 */
export class ConfigurationError extends UserError {
  override readonly name: string = "ConfigurationError";
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * What a setting names (a database, a folder) cannot be used, said as one line for the
 * operator: `cannot use <what>: <why>; check <setting>`.
 */
export function unusable(setting: string, what: string, why: string): ConfigurationError {
  return new ConfigurationError(setting, `cannot use ${what}: ${why}; check ${setting}`);
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

  /** Headers the answer carries beside the body (`Retry-After` on a 429 or 503). */
  responseHeaders(): Record<string, string> {
    return {};
  }
}

export const notFound = (what: string, id: string) =>
  new HttpProblem(404, "not_found", `${what} not found`, `No ${what.toLowerCase()} ${id}.`);
