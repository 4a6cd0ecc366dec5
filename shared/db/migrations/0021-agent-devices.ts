import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * What an agent's heartbeats say of its GPUs and models (issue 27): `devices`, a JSON array
 * of each GPU's index, name, memory total and used, utilisation and loaded models;
 * `loaded_models`, a JSON array of the models loaded on any of its runners now. JSON text,
 * as `models` is: read whole for the admin listing, never queried into.
 */
export const agentDevices: Migration = {
  name: "0021_agent_devices",
  async up(db, dialect) {
    await addColumn(db, dialect, "agents", "devices", sql`text`);
    await addColumn(db, dialect, "agents", "loaded_models", sql`text`);
  },
};
