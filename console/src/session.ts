import type { ConsoleApi } from "./api.ts";
import type { LiveFeed } from "./live.ts";

/** A signed-in console: the API for this key, its live feed, and whether it is the operator's. */
export interface Session {
  api: ConsoleApi;
  feed: LiveFeed;
  admin: boolean;
}
