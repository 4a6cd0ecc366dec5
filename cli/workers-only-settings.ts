/**
 * Settings only the Workers gateway reads. Their names are known (one environment may carry
 * both gateways' settings), so they get no "not a Gantry setting" line; but an operator
 * moving from Workers to `gantry gateway` who kept GANTRY_BOOTSTRAP_API_KEY got no word that
 * it was ignored, and every request with that key was refused 401. Each gets a line saying
 * what `gantry start` and `gantry gateway` take instead.
 */
const INSTEAD: Readonly<Record<string, string>> = {
  GANTRY_BOOTSTRAP_API_KEY: "the default tenant's key comes from GANTRY_API_KEY",
  GANTRY_WEBHOOK_SECRET: "the default tenant's webhook secret is kept in secrets.json",
  GANTRY_BLOB_SECRET: "blob URLs are signed with a secret kept in secrets.json",
  GANTRY_ALLOW_INSECURE_WEBHOOKS:
    "gantry start delivers to any receiver, and gantry gateway to http:// ones GANTRY_WEBHOOK_ALLOW lists",
};

/** One line per Workers-only setting set in `env`. */
export function workersOnlySettingLines(env: Readonly<Record<string, unknown>>): string[] {
  return Object.entries(INSTEAD)
    .filter(([name]) => env[name] !== undefined && env[name] !== "")
    .map(
      ([name, instead]) =>
        `${name} is read by the Workers gateway only, and ignored here: ${instead}`,
    );
}
