/**
 * Parses every `.tf` file under infra/terraform with @cdktf/hcl2json (no terraform binary
 * needed) and checks the invariants the issue asks for: a private, encrypted bucket with
 * CORS and lifecycle expiry; a dead-letter queue behind every job queue; least-privilege
 * IAM (agents get nothing on S3); described variables, sensitive secrets.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { PLANS } from "../../gateway/plans.ts";
import { JobRequest } from "../../shared/protocol/job.ts";
import { DEAD_SUFFIX, HIGH_SUFFIX } from "../../shared/queue/sqs/queues.ts";
import {
  Block,
  checkVariables,
  loadModule,
  type Module,
  ofType,
  providerVersion,
  ROOT,
  referencesOf,
  resource,
  stringsIn,
  TERRAFORM,
  tf,
  Variable,
  withLocals,
} from "../helpers/terraform.ts";

/** The longest `ttl_seconds` POST /v1/jobs accepts. */
const MAX_TTL_SECONDS = JobRequest.shape.ttl_seconds.unwrap().maxValue ?? Number.NaN;

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
    // shared/queue/sqs/queues.ts: <prefix><model>, <prefix><model>-high, <prefix><model>-dlq.
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
