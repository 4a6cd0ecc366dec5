/**
 * Every YAML document under infra/k8s, loaded and checked against zod schemas of what its
 * consumers read: Kubernetes (kinds, selectors, GPU requests), KEDA (ScaledObject targets,
 * trigger metadata per scaler, authentication); and the ConfigMap, Secrets and agent
 * Deployment the manifest tests look into.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { expect } from "vitest";
import { parseAllDocuments } from "yaml";
import { z } from "zod";

export const ROOT = join(import.meta.dirname, "../..");
const K8S = join(ROOT, "infra/k8s");
export const NAMESPACE = "gantry";

// ------------------------------------------------------------------ schemas
const Name = z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, "a DNS-1123 name");
const Labels = z.record(z.string(), z.string());
const Metadata = z.object({
  name: Name,
  namespace: Name.optional(),
  labels: Labels.optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});
const Manifest = z.object({ apiVersion: z.string(), kind: z.string(), metadata: Metadata });
type Manifest = z.infer<typeof Manifest> & { file: string; raw: unknown };

/** The apiVersion each kind must be served under. */
export const API_VERSIONS: Record<string, string> = {
  Namespace: "v1",
  ConfigMap: "v1",
  Secret: "v1",
  ServiceAccount: "v1",
  Deployment: "apps/v1",
  ScaledObject: "keda.sh/v1alpha1",
  TriggerAuthentication: "keda.sh/v1alpha1",
};

// Kubernetes stores ConfigMap data as strings: an unquoted 120 in YAML is refused.
const ConfigMap = z.object({ data: z.record(z.string(), z.string()) });
export const Secret = Manifest.extend({
  type: z.literal("Opaque").optional(),
  stringData: z.record(z.string(), z.string()),
}).strict(); // no base64 `data`: it would hide what is committed

const Quantity = z.union([z.number(), z.string()]);
const Container = z.object({
  name: Name,
  image: z.string().min(1),
  envFrom: z
    .array(
      z.union([
        z.object({ configMapRef: z.object({ name: Name }) }),
        z.object({ secretRef: z.object({ name: Name }) }),
      ]),
    )
    .optional(),
  env: z
    .array(z.object({ name: z.string(), value: z.string().optional(), valueFrom: z.unknown() }))
    .optional(),
  resources: z.object({
    requests: z.record(z.string(), Quantity).optional(),
    limits: z.record(z.string(), Quantity),
  }),
  livenessProbe: z.unknown().optional(),
  readinessProbe: z.unknown().optional(),
});
const Deployment = z.object({
  spec: z.object({
    replicas: z.number().int().optional(),
    selector: z.object({ matchLabels: Labels }),
    template: z.object({
      metadata: z.object({ labels: Labels }),
      spec: z.object({
        serviceAccountName: Name.optional(),
        terminationGracePeriodSeconds: z.number().int().positive(),
        nodeSelector: Labels.optional(),
        tolerations: z
          .array(
            z.object({
              key: z.string(),
              operator: z.enum(["Exists", "Equal"]),
              effect: z.string(),
            }),
          )
          .optional(),
        securityContext: z.object({ runAsNonRoot: z.literal(true), runAsUser: z.number().int() }),
        containers: z.array(Container).min(1),
      }),
    }),
  }),
});

// KEDA reads trigger metadata as map[string]string; each scaler needs its own keys.
const RabbitMQTrigger = z.object({
  type: z.literal("rabbitmq"),
  metadata: z
    .object({
      // http: the management API, which counts ready + unacknowledged messages.
      protocol: z.literal("http"),
      mode: z.literal("QueueLength"),
      value: z.string().regex(/^\d+$/),
      queueName: z.string().min(1),
      vhostName: z.string().optional(),
      // Set to "true" it would stop counting jobs being run.
      excludeUnacknowledged: z.literal("false").optional(),
    })
    .strict(),
  // The host (with its password) comes from a TriggerAuthentication, never inline.
  authenticationRef: z.object({ name: Name }),
});
const SqsTrigger = z.object({
  type: z.literal("aws-sqs-queue"),
  metadata: z
    .object({
      queueURL: z.string().regex(/^https:\/\/sqs\.[a-z0-9-]+\.amazonaws\.com\/\d{12}\/[\w-]+$/),
      queueLength: z.string().regex(/^\d+$/),
      awsRegion: z.string().regex(/^[a-z]{2}-[a-z]+-\d$/),
      scaleOnInFlight: z.literal("true").optional(),
    })
    .strict(),
  authenticationRef: z.object({ name: Name }),
});
const RedisStreamsTrigger = z.object({
  type: z.literal("redis-streams"),
  metadata: z
    .object({
      address: z.string().regex(/^[a-z0-9.-]+:\d+$/),
      stream: z.string().min(1),
      // XLEN mode: no consumerGroup, or the scaler would count only running jobs (XPENDING).
      streamLength: z.string().regex(/^\d+$/),
      enableTLS: z.enum(["true", "false"]).optional(),
    })
    .strict(),
  // The password comes from a TriggerAuthentication, never inline.
  authenticationRef: z.object({ name: Name }),
});
const NatsJetStreamTrigger = z.object({
  type: z.literal("nats-jetstream"),
  metadata: z
    .object({
      natsServerMonitoringEndpoint: z.string().regex(/^[a-z0-9.-]+:\d+$/),
      account: z.string().min(1),
      stream: z.string().min(1),
      consumer: z.string().min(1),
      lagThreshold: z.string().regex(/^\d+$/),
      activationLagThreshold: z.string().regex(/^\d+$/).optional(),
      useHttps: z.enum(["true", "false"]).optional(),
    })
    .strict(),
  // The monitoring endpoint has no credentials to carry.
  authenticationRef: z.object({ name: Name }).optional(),
});
const MetricsApiTrigger = z.object({
  type: z.literal("metrics-api"),
  metadata: z
    .object({
      // The gateway's own count of a model's jobs: GET /v1/models/{id}.
      url: z.string().regex(/^https?:\/\/[^/]+\/v1\/models\/[a-z0-9._-]+$/),
      valueLocation: z.enum(["state.queued", "state.running"]),
      targetValue: z.string().regex(/^\d+$/),
      // The key from a TriggerAuthentication, in the header the API reads.
      authMode: z.literal("apiKey"),
      method: z.literal("header"),
      keyParamName: z.literal("Authorization"),
    })
    .strict(),
  authenticationRef: z.object({ name: Name }),
});
const Trigger = z.discriminatedUnion("type", [
  RabbitMQTrigger,
  SqsTrigger,
  RedisStreamsTrigger,
  NatsJetStreamTrigger,
  MetricsApiTrigger,
]);
export const ScaledObject = z.object({
  spec: z.object({
    scaleTargetRef: z.object({
      apiVersion: z.literal("apps/v1").optional(),
      kind: z.literal("Deployment").optional(),
      name: Name,
    }),
    pollingInterval: z.number().int().positive().optional(),
    cooldownPeriod: z.number().int().positive(),
    minReplicaCount: z.literal(0),
    maxReplicaCount: z.number().int().positive(),
    triggers: z.array(Trigger).min(1),
  }),
});
export const TriggerAuthentication = z.object({
  spec: z.union([
    z.object({
      secretTargetRef: z
        .array(z.object({ parameter: z.string(), name: Name, key: z.string() }))
        .min(1),
    }),
    z.object({
      podIdentity: z.object({
        provider: z.literal("aws"),
        identityOwner: z.enum(["keda", "workload"]).optional(),
      }),
    }),
  ]),
});

// ------------------------------------------------------------------ loading
function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

export const manifests: Manifest[] = yamlFiles(K8S).flatMap((path) => {
  const file = relative(ROOT, path);
  return parseAllDocuments(readFileSync(path, "utf8")).map((doc) => {
    expect(doc.errors, `${file} parses`).toEqual([]);
    const raw: unknown = doc.toJS();
    return { ...Manifest.parse(raw), file, raw };
  });
});

export const ofKind = (kind: string) => manifests.filter((m) => m.kind === kind);
export function one<T extends z.ZodType>(kind: string, schema: T, name?: string) {
  const found = ofKind(kind).filter((m) => name === undefined || m.metadata.name === name);
  expect(found, `one ${kind}${name ? ` ${name}` : ""}`).toHaveLength(1);
  return { manifest: found[0]!, spec: schema.parse(found[0]!.raw) as z.infer<T> };
}

export const configMap = one("ConfigMap", ConfigMap, "gantry-agent");
export const secretData = (name: string) => {
  const secret = one("Secret", z.object({ stringData: z.record(z.string(), z.string()) }), name);
  return secret.spec.stringData;
};
export const deployment = one("Deployment", Deployment);
export const podSpec = deployment.spec.spec.template.spec;
export const agent = podSpec.containers[0]!;
