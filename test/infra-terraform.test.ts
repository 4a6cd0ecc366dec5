/**
 * Parses every `.tf` file under infra/terraform with @cdktf/hcl2json (no terraform binary
 * needed) and checks the invariants the issue asks for: a private, encrypted bucket with
 * CORS and lifecycle expiry; a dead-letter queue behind every job queue; least-privilege
 * IAM (agents get nothing on S3); described variables, sensitive secrets; and a Cloudflare
 * Worker with D1, R2, the sweeper's cron trigger and its secrets, matching wrangler.toml.
 */

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { getReferencesInExpression, parse } from "@cdktf/hcl2json";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { PLANS } from "../gateway/plans.ts";
import { JobRequest } from "../shared/protocol/job.ts";
import { DEAD_SUFFIX, HIGH_SUFFIX } from "../shared/queue/sqs-queues.ts";

const ROOT = join(import.meta.dirname, "..");
/** The longest `ttl_seconds` POST /v1/jobs accepts. */
const MAX_TTL_SECONDS = JobRequest.shape.ttl_seconds.unwrap().maxValue ?? Number.NaN;
const TERRAFORM = join(ROOT, "infra/terraform");

// ------------------------------------------------------------------ the parsed shape
// hcl2json turns each block into an array of objects; expressions stay strings ("${...}").
const Block = z.record(z.string(), z.unknown());
/** How hcl2json writes the expression `text`: "${text}". */
const tf = (text: string) => `\${${text}}`;
const EXPRESSION_START = tf("").slice(0, 2);
type Block = z.infer<typeof Block>;
const Named = z.record(z.string(), z.array(Block));
const TfFile = z.object({
  resource: z.record(z.string(), Named).optional(),
  data: z.record(z.string(), Named).optional(),
  variable: Named.optional(),
  output: Named.optional(),
  locals: z.array(Block).optional(),
  terraform: z.array(Block).optional(),
  provider: Named.optional(),
});

interface Module {
  dir: string;
  /** "type.name" → the block. */
  resources: Map<string, Block>;
  /** "data.type.name" → the block. */
  data: Map<string, Block>;
  variables: Map<string, Block>;
  outputs: Map<string, Block>;
  locals: Map<string, unknown>;
  terraform: Block[];
}

async function loadModule(dir: string): Promise<Module> {
  const module: Module = {
    dir,
    resources: new Map(),
    data: new Map(),
    variables: new Map(),
    outputs: new Map(),
    locals: new Map(),
    terraform: [],
  };
  const files = readdirSync(dir).filter((name) => name.endsWith(".tf"));
  expect(files.length, `${dir} has .tf files`).toBeGreaterThan(0);
  for (const name of files) {
    const parsed = TfFile.parse(await parse(name, readFileSync(join(dir, name), "utf8")));
    const one = (map: Map<string, Block>, key: string, blocks: Block[]) => {
      expect(map.has(key), `${key} is declared once`).toBe(false);
      expect(blocks).toHaveLength(1);
      map.set(key, blocks[0]!);
    };
    for (const [type, byName] of Object.entries(parsed.resource ?? {}))
      for (const [n, blocks] of Object.entries(byName))
        one(module.resources, `${type}.${n}`, blocks);
    for (const [type, byName] of Object.entries(parsed.data ?? {}))
      for (const [n, blocks] of Object.entries(byName))
        one(module.data, `data.${type}.${n}`, blocks);
    for (const [n, blocks] of Object.entries(parsed.variable ?? {}))
      one(module.variables, n, blocks);
    for (const [n, blocks] of Object.entries(parsed.output ?? {})) one(module.outputs, n, blocks);
    for (const locals of parsed.locals ?? [])
      for (const [n, value] of Object.entries(locals)) module.locals.set(n, value);
    module.terraform.push(...(parsed.terraform ?? []));
  }
  return module;
}

function resource<T extends z.ZodType>(module: Module, key: string, schema: T): z.infer<T> {
  const block = module.resources.get(key) ?? module.data.get(key);
  expect(block, `${key} exists in ${module.dir}`).toBeDefined();
  return schema.parse(block);
}

/** `text` with each `${local.x}` whose value is a plain string written in. */
function withLocals(module: Module, text: string): string {
  return text.replace(/\$\{local\.(\w+)\}/g, (whole, name: string) => {
    const value = module.locals.get(name);
    return typeof value === "string" && !value.includes(EXPRESSION_START) ? value : whole;
  });
}

function ofType(module: Module, type: string): [string, Block][] {
  return [...module.resources].filter(([key]) => key.startsWith(`${type}.`));
}

/** What an expression refers to, through locals: "aws_sqs_queue.jobs", "var.x", "data.a.b". */
async function referencesOf(module: Module, expression: unknown, seen = new Set<string>()) {
  const found = new Set<string>();
  for (const text of stringsIn(expression)) {
    if (!text.includes(EXPRESSION_START)) continue;
    // The parser skips the bodies of `for` expressions; a scan of the text catches those.
    const parsed = (await getReferencesInExpression("x.tf", text)).map((ref) => ref.value);
    const scanned =
      text.match(/\b(?:data\.\w+\.\w+|var\.\w+|local\.\w+|[a-z0-9]+_\w+\.\w+)/g) ?? [];
    for (const value of new Set([...parsed, ...scanned])) {
      const parts = value.split(".");
      const root = parts[0]!;
      if (root === "local" && parts[1] && !seen.has(parts[1])) {
        seen.add(parts[1]);
        for (const ref of await referencesOf(module, module.locals.get(parts[1]), seen))
          found.add(ref);
      } else if (root === "data") found.add(parts.slice(0, 3).join("."));
      else if (root === "var" || module.resources.has(parts.slice(0, 2).join(".")))
        found.add(parts.slice(0, 2).join("."));
    }
  }
  return found;
}

function stringsIn(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value && typeof value === "object") return Object.values(value).flatMap(stringsIn);
  return [];
}

// ------------------------------------------------------------------ block schemas
const Variable = z.object({
  description: z.string().min(15),
  type: z.string().startsWith(EXPRESSION_START),
  default: z.unknown().optional(),
  sensitive: z.boolean().optional(),
  validation: z.array(z.object({ condition: z.string(), error_message: z.string() })).optional(),
});
const Output = z.object({ description: z.string().min(5), value: z.unknown() });

const PublicAccessBlock = z.object({
  bucket: z.string(),
  block_public_acls: z.literal(true),
  block_public_policy: z.literal(true),
  ignore_public_acls: z.literal(true),
  restrict_public_buckets: z.literal(true),
});
const Encryption = z.object({
  bucket: z.string(),
  rule: z.array(
    z.object({
      apply_server_side_encryption_by_default: z
        .array(z.object({ sse_algorithm: z.string(), kms_master_key_id: z.string().optional() }))
        .length(1),
    }),
  ),
});
const Cors = z.object({
  bucket: z.string(),
  cors_rule: z
    .array(
      z.object({
        allowed_methods: z.array(z.string()),
        allowed_origins: z.string(),
        allowed_headers: z.array(z.string()).optional(),
      }),
    )
    .min(1),
});
const Lifecycle = z.object({
  bucket: z.string(),
  rule: z.array(
    z.object({
      id: z.string(),
      status: z.literal("Enabled"),
      filter: z.array(z.object({ prefix: z.string() })).length(1),
      expiration: z.array(z.object({ days: z.string() })).length(1),
    }),
  ),
});
const Queue = z.object({
  for_each: z.string().optional(),
  name: z.string(),
  redrive_policy: z.string().optional(),
  visibility_timeout_seconds: z.string().optional(),
});
const Statement = z.object({
  sid: z.string(),
  effect: z.enum(["Allow", "Deny"]),
  actions: z.array(z.string()).min(1),
  resources: z.union([z.string(), z.array(z.string())]),
  principals: z.array(z.unknown()).optional(),
  condition: z.array(z.unknown()).optional(),
});
type Statement = z.infer<typeof Statement>;
const PolicyDocument = z.object({
  statement: z.array(Statement).optional(),
  dynamic: z
    .object({
      statement: z.array(z.object({ for_each: z.string(), content: z.array(Statement) })),
    })
    .optional(),
});
const IamPolicy = z.object({ name: z.string(), description: z.string(), policy: z.string() });

/**
 * Every statement of the policy document an aws_iam_policy is built from. A `dynamic`
 * statement's resources name its iterator (`statement.value`): `forEach` says what that is.
 */
async function statementsOf(
  module: Module,
  policyKey: string,
): Promise<(Statement & { forEach?: string })[]> {
  const policy = resource(module, policyKey, IamPolicy);
  const docs = [...(await referencesOf(module, policy.policy))].filter((r) =>
    r.startsWith("data.aws_iam_policy_document."),
  );
  expect(docs, `${policyKey} is built from one policy document`).toHaveLength(1);
  const doc = resource(module, docs[0]!, PolicyDocument);
  return [
    ...(doc.statement ?? []),
    ...(doc.dynamic?.statement ?? []).flatMap((dynamic) =>
      dynamic.content.map((statement) => ({ ...statement, forEach: dynamic.for_each })),
    ),
  ];
}

const SENSITIVE_NAME = /token|secret|password|api_key|private_key|access_key/;

function checkVariables(module: Module) {
  for (const [name, block] of module.variables) {
    const variable = Variable.safeParse(block);
    expect(variable.success, `variable ${name}: ${variable.error?.message}`).toBe(true);
    if (SENSITIVE_NAME.test(name)) {
      expect(variable.data?.sensitive, `variable ${name} is marked sensitive`).toBe(true);
    }
  }
  for (const [name, block] of module.outputs) {
    expect(Output.safeParse(block).success, `output ${name} has a description`).toBe(true);
  }
}

function providerVersion(module: Module, provider: string): string {
  const Required = z.object({
    required_version: z.string(),
    required_providers: z.array(
      z.record(z.string(), z.object({ source: z.string(), version: z.string() })),
    ),
  });
  const versions = module.terraform.map((block) => Required.parse(block));
  const pin = versions.flatMap((v) => v.required_providers).find((p) => p[provider])?.[provider];
  expect(pin, `${provider} provider is pinned`).toBeDefined();
  return pin!.version;
}

// ------------------------------------------------------------------ AWS
describe("infra/terraform/aws", () => {
  let aws: Module;
  beforeAll(async () => {
    aws = await loadModule(join(TERRAFORM, "aws"));
  });

  it("pins the aws provider and describes every variable and output", () => {
    expect(providerVersion(aws, "aws")).toMatch(/^~> \d+\.\d+/);
    checkVariables(aws);
    for (const name of ["max_receive_count", "visibility_timeout_seconds", "models"]) {
      expect(Variable.parse(aws.variables.get(name)).validation, name).toBeDefined();
    }
  });

  it("keeps the bucket private and encrypted", async () => {
    const block = resource(aws, "aws_s3_bucket_public_access_block.blobs", PublicAccessBlock);
    expect(await referencesOf(aws, block.bucket)).toContain("aws_s3_bucket.blobs");
    const sse = resource(
      aws,
      "aws_s3_bucket_server_side_encryption_configuration.blobs",
      Encryption,
    );
    const algorithm = sse.rule[0]!.apply_server_side_encryption_by_default[0]!.sse_algorithm;
    expect(algorithm).toMatch(/AES256/);
    expect(algorithm).toMatch(/aws:kms/);
    const ownership = resource(aws, "aws_s3_bucket_ownership_controls.blobs", Block);
    expect(JSON.stringify(ownership)).toContain("BucketOwnerEnforced");
  });

  it("allows browser uploads with CORS from the configured origins", () => {
    const cors = resource(aws, "aws_s3_bucket_cors_configuration.blobs", Cors);
    const rule = cors.cors_rule[0]!;
    expect(rule.allowed_methods).toEqual(expect.arrayContaining(["PUT", "GET"]));
    expect(rule.allowed_origins).toBe(tf("var.cors_allowed_origins"));
  });

  it("expires inputs/ and outputs/ after their configured days", () => {
    const lifecycle = resource(aws, "aws_s3_bucket_lifecycle_configuration.blobs", Lifecycle);
    // After GANTRY_S3_KEY_PREFIX (var.key_prefix), when the gateway uses one.
    const keyPrefix = tf("var.key_prefix");
    const byPrefix = new Map(
      lifecycle.rule.map((r) => [r.filter[0]!.prefix.replace(keyPrefix, ""), r.expiration[0]!]),
    );
    expect(byPrefix.get("inputs/")?.days).toBe(tf("var.input_retention_days"));
    expect(byPrefix.get("outputs/")?.days).toBe(tf("var.output_retention_days"));
    // The gateway writes exactly these prefixes (gateway/store/uploads.ts).
    const uploads = readFileSync(join(ROOT, "gateway/store/uploads.ts"), "utf8");
    expect(uploads).toMatch(/`inputs\//);
    expect(uploads).toMatch(/`outputs\//);
  });

  it("never expires a blob before the gateway's retention would (the rules are a backstop)", () => {
    const days = (name: string) => Number(Variable.parse(aws.variables.get(name)).default);
    const DAY_S = 86_400;
    for (const limits of Object.values(PLANS)) {
      // An output is written when its job ends and kept output_retention_seconds after.
      expect(days("output_retention_days") * DAY_S).toBeGreaterThanOrEqual(
        limits.output_retention_seconds,
      );
      // An upload may wait unused up to upload_retention_seconds before a job names it;
      // the job may stay queued up to the longest ttl_seconds a request may ask for (not
      // only the day's default), run up to the plan's timeout once claimed at its
      // deadline, and its inputs are kept input_retention_seconds after it ended.
      expect(days("input_retention_days") * DAY_S).toBeGreaterThanOrEqual(
        limits.upload_retention_seconds +
          MAX_TTL_SECONDS +
          limits.max_timeout_seconds +
          limits.input_retention_seconds,
      );
    }
  });

  it("gives every job queue a redrive policy to its model's dead-letter queue", async () => {
    const queues = ofType(aws, "aws_sqs_queue").map(([key, block]) => ({
      key,
      queue: Queue.parse(block),
    }));
    const deadLetters = queues.filter((q) => withLocals(aws, q.queue.name).endsWith(DEAD_SUFFIX));
    const jobs = queues.filter((q) => !deadLetters.includes(q));
    expect(jobs.length).toBeGreaterThan(0);
    expect(deadLetters.length).toBeGreaterThan(0);
    for (const { key, queue } of jobs) {
      expect(queue.redrive_policy, `${key} has a redrive policy`).toBeDefined();
      const refs = await referencesOf(aws, queue.redrive_policy);
      const targets = [...refs].filter((r) => r.startsWith("aws_sqs_queue."));
      expect(targets.length, `${key} redrives to one queue`).toBe(1);
      expect(deadLetters.map((d) => d.key)).toContain(targets[0]);
      expect(queue.redrive_policy).toMatch(/deadLetterTargetArn/);
      expect(queue.redrive_policy).toMatch(/maxReceiveCount\s*=\s*var\.max_receive_count/);
      // The sqs adapter pairs each model's live queues with that model's DLQ.
      expect(queue.redrive_policy).toMatch(/dead_letter\[each\.value\.model\]/);
    }
    for (const { key, queue } of deadLetters) {
      expect(queue.redrive_policy, `${key} is not redriven itself`).toBeUndefined();
    }
    expect(Variable.parse(aws.variables.get("max_receive_count")).default).toBe(5);
    expect(ofType(aws, "aws_sqs_queue_redrive_allow_policy").length).toBeGreaterThan(0);
  });

  it("names a normal, a high-priority and a dead-letter queue per model as the adapter does", () => {
    // shared/queue/sqs-queues.ts: <prefix><model>, <prefix><model>-high, <prefix><model>-dlq.
    expect(aws.locals.get("priority_suffixes")).toEqual({ normal: "", high: HIGH_SUFFIX });
    expect(aws.locals.get("dead_letter_suffix")).toBe(DEAD_SUFFIX);
    const jobs = Queue.parse(aws.resources.get("aws_sqs_queue.jobs"));
    expect(jobs.for_each).toBe(tf("local.job_queues"));
    expect(String(aws.locals.get("job_queues"))).toMatch(/setproduct\(var\.models/);
  });

  it("gives the agent only the SQS actions it uses and nothing on S3", async () => {
    const allowed = new Set([
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
      "sqs:SendMessage",
    ]);
    const statements = await statementsOf(aws, "aws_iam_policy.agent");
    for (const statement of statements) {
      const refs = await referencesOf(aws, statement.resources);
      expect(statement.effect).toBe("Allow");
      for (const action of statement.actions) {
        expect(action, "no S3 action for agents").not.toMatch(/^s3:/i);
        expect(allowed.has(action), `agent action ${action} is allowed`).toBe(true);
      }
      expect(
        [...refs].some((r) => r.startsWith("aws_s3_bucket")),
        "no S3 resource",
      ).toBe(false);
      // Consuming happens on the job queues only; never in a dead-letter queue.
      const consumes = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"];
      if (statement.actions.some((action) => consumes.includes(action))) {
        expect([...refs]).toEqual(["aws_sqs_queue.jobs"]);
      }
      // SendMessage: a retry's delayed copy (job queues) and poison jobs (dead-letter queues).
      if (statement.actions.includes("sqs:SendMessage")) {
        for (const ref of refs) {
          expect(["aws_sqs_queue.jobs", "aws_sqs_queue.dead_letter"]).toContain(ref);
        }
      }
    }
    const actions = statements.flatMap((s) => s.actions);
    for (const needed of ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"])
      expect(actions).toContain(needed);
  });

  it("lets the gateway publish and presign, but not consume", async () => {
    const statements = await statementsOf(aws, "aws_iam_policy.gateway");
    const actions = statements.flatMap((s) => s.actions);
    for (const forbidden of [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
    ])
      expect(actions).not.toContain(forbidden);
    for (const needed of ["sqs:SendMessage", "s3:PutObject", "s3:GetObject"])
      expect(actions).toContain(needed);
    for (const statement of statements) {
      const refs = [...(await referencesOf(aws, statement.resources))];
      if (statement.actions.includes("sqs:SendMessage")) {
        expect(refs).toEqual(["aws_sqs_queue.jobs"]);
      }
      if (statement.actions.some((a) => /^s3:(Put|Get|Delete)Object$/.test(a))) {
        // Object actions only under the blob prefixes, never the whole bucket.
        expect(stringsIn(statement.resources).join(" ")).toMatch(/\/\$\{prefix\}\*/);
        const keyPrefix = tf("var.key_prefix");
        expect(aws.locals.get("blob_prefixes")).toEqual([
          `${keyPrefix}inputs/`,
          `${keyPrefix}outputs/`,
        ]);
      }
    }
  });

  it("grants no wildcard action or resource in any IAM policy", async () => {
    for (const key of ["aws_iam_policy.gateway", "aws_iam_policy.agent"]) {
      for (const statement of await statementsOf(aws, key)) {
        expect(statement.effect, `${key}/${statement.sid} only allows`).toBe("Allow");
        for (const action of statement.actions) {
          expect(action, `${key}/${statement.sid}`).not.toMatch(/\*/);
        }
        for (const text of stringsIn(statement.resources)) {
          expect(text, `${key}/${statement.sid}`).not.toBe("*");
          expect(text).not.toMatch(/^arn:aws:[a-z0-9]+:[^$]*\*$/);
        }
        // Each statement names its resources through managed resources or a variable.
        const named = await referencesOf(aws, [statement.resources, statement.forEach ?? ""]);
        expect(named.size, `${key}/${statement.sid} names its resources`).toBeGreaterThan(0);
      }
    }
  });
});

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
    // SQS and S3 instead of D1's queue and R2, with AWS keys as secrets (worker-settings.ts).
    for (const name of ["GANTRY_QUEUE_URL", "GANTRY_S3_BUCKET", "GANTRY_S3_REGION"])
      expect(bindings.get(name)?.type, name).toBe("plain_text");
    for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
      expect(bindings.get(name)?.type, name).toBe("secret_text");
    // Every binding is something the Workers entry reads.
    // WorkerEnv and the interfaces it extends (the Worker's settings come in parts).
    const sources = [
      "gateway/worker.ts",
      "gateway/worker-settings.ts",
      "gateway/worker-admission.ts",
    ]
      .filter((file) => existsSync(join(ROOT, file)))
      .map((file) => readFileSync(join(ROOT, file), "utf8"))
      .join("\n");
    expect(sources, "gateway declares WorkerEnv").toMatch(/interface WorkerEnv\b/);
    const fields = new Set(
      [...sources.matchAll(/interface (?:WorkerEnv|AdmissionEnv)\b[^{]*\{([\s\S]*?)\n\}/g)]
        .flatMap((body) => [...(body[1] ?? "").matchAll(/^\s+(\w+)\?:/gm)])
        .map((m) => m[1]),
    );
    for (const name of bindings.keys()) expect(fields, `WorkerEnv has ${name}`).toContain(name);
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
