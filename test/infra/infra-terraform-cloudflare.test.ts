/**
 * Parses every `.tf` file under infra/terraform/cloudflare with @cdktf/hcl2json and checks
 * a Cloudflare Worker with D1, R2, the sweeper's cron trigger and its secrets, matching
 * wrangler.toml; described variables and sensitive secrets.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { WORKER_SETTINGS } from "../../gateway/runtime/workers/settings.ts";
import { settingsIn } from "../../shared/settings/index.ts";
import {
  checkVariables,
  loadModule,
  type Module,
  providerVersion,
  ROOT,
  referencesOf,
  resource,
  stringsIn,
  TERRAFORM,
  tf,
  Variable,
} from "../helpers/terraform.ts";

// ------------------------------------------------------------------ Cloudflare
const Binding = /\{\s*type\s*=\s*"(\w+)",\s*name\s*=\s*"(\w+)",\s*(\w+)\s*=\s*([^}]+?)\s*\}/g;

describe("infra/terraform/cloudflare", () => {
  let cf: Module;
  const wrangler = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
  const setting = (name: string) =>
    new RegExp(`^${name}\\s*=\\s*"([^"]+)"`, "m").exec(wrangler)?.[1];

  beforeAll(async () => {
    cf = await loadModule(join(TERRAFORM, "cloudflare"));
  });

  it("pins the cloudflare provider and describes every variable", () => {
    expect(providerVersion(cf, "cloudflare")).toMatch(/^~> 5\./);
    checkVariables(cf);
  });

  it("creates a D1 database and an R2 bucket", () => {
    resource(
      cf,
      "cloudflare_d1_database.gantry",
      z.object({ account_id: z.string(), name: z.string() }),
    );
    resource(
      cf,
      "cloudflare_r2_bucket.blobs",
      z.object({ account_id: z.string(), name: z.string() }),
    );
  });

  it("deploys the same Worker as wrangler.toml, with its bindings and secrets", async () => {
    const script = resource(
      cf,
      "cloudflare_workers_script.gateway",
      z.object({
        script_name: z.string(),
        content_file: z.string(),
        content_sha256: z.string(),
        main_module: z.string(),
        compatibility_date: z.string(),
        bindings: z.string(),
      }),
    );
    const variable = (name: string) => Variable.parse(cf.variables.get(name));
    expect(variable("worker_name").default).toBe(setting("name"));
    expect(variable("compatibility_date").default).toBe(setting("compatibility_date"));

    const bindings = new Map<string, { type: string; value: string }>();
    for (const source of [script.bindings, ...[...cf.locals.values()].flatMap(stringsIn)]) {
      for (const [, type, name, , value] of source.matchAll(Binding))
        bindings.set(name!, { type: type!, value: value! });
    }
    expect(bindings.get("DB")).toEqual({ type: "d1", value: "cloudflare_d1_database.gantry.id" });
    expect(bindings.get("BLOBS")?.type).toBe("r2_bucket");
    // Every secret the Worker reads is a secret_text binding from a sensitive variable.
    for (const name of ["GANTRY_AGENT_TOKEN", "GANTRY_BLOB_SECRET"]) {
      const binding = bindings.get(name);
      expect(binding?.type, name).toBe("secret_text");
    }
    for (const [name, binding] of bindings) {
      if (binding.type !== "secret_text") continue;
      const source = /^var\.(\w+)$/.exec(binding.value)?.[1];
      expect(source, `${name} comes from a variable`).toBeDefined();
      expect(variable(source!).sensitive, `var.${source} is sensitive`).toBe(true);
    }
    // SQS and S3 instead of D1's queue and R2, with AWS keys as secrets (gateway/runtime/workers/settings.ts).
    for (const name of ["GANTRY_QUEUE_URL", "GANTRY_S3_BUCKET", "GANTRY_S3_REGION"])
      expect(bindings.get(name)?.type, name).toBe("plain_text");
    for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
      expect(bindings.get(name)?.type, name).toBe("secret_text");
    // Every binding is something the Workers entry reads: a var or secret of its settings
    // table, or one of its bindings (interface WorkerBindings).
    const source = readFileSync(join(ROOT, "gateway/runtime/workers/settings.ts"), "utf8");
    const bindingBody = /interface WorkerBindings\b[^{]*\{([\s\S]*?)\n\}/.exec(source)?.[1] ?? "";
    const fields = new Set([
      ...settingsIn(WORKER_SETTINGS).map(({ info }) => info.env),
      ...[...bindingBody.matchAll(/^\s+(\w+)\?:/gm)].map((m) => m[1]),
    ]);
    for (const name of bindings.keys()) expect(fields, `the Worker reads ${name}`).toContain(name);
  });

  it("runs the sweeper every minute from a cron trigger", async () => {
    const cron = resource(
      cf,
      "cloudflare_workers_cron_trigger.sweeper",
      z.object({ script_name: z.string(), schedules: z.array(z.object({ cron: z.string() })) }),
    );
    expect(await referencesOf(cf, cron.script_name)).toContain("cloudflare_workers_script.gateway");
    expect(cron.schedules[0]?.cron).toBe(tf("var.sweeper_cron"));
    expect(Variable.parse(cf.variables.get("sweeper_cron")).default).toBe("* * * * *");
    expect(wrangler).toMatch(/crons = \["\* \* \* \* \*"\]/);
  });

  it("binds the RATE_LIMITS Durable Object with wrangler.toml's class and migration", () => {
    const script = resource(
      cf,
      "cloudflare_workers_script.gateway",
      z.object({
        migrations: z.object({ new_tag: z.string(), new_sqlite_classes: z.array(z.string()) }),
      }),
    );
    const bound = /name\s*=\s*"RATE_LIMITS",\s*class_name\s*=\s*"(\w+)"/.exec(
      stringsIn(cf.locals.get("rate_limit_bindings")).join("\n"),
    );
    const wranglerClass = /name = "RATE_LIMITS"\s*\nclass_name = "(\w+)"/.exec(wrangler)?.[1];
    expect(bound?.[1]).toBe(wranglerClass);
    expect(script.migrations.new_sqlite_classes).toEqual([wranglerClass]);
    expect(wrangler).toMatch(
      new RegExp(
        `tag = "${script.migrations.new_tag}"\\s*\\nnew_sqlite_classes = \\["${wranglerClass}"\\]`,
      ),
    );
    expect(Variable.parse(cf.variables.get("shared_rate_limits")).default).toBe(true);
  });
});
