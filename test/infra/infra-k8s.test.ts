/**
 * Loads every YAML document under infra/k8s and validates it against what its consumers
 * read: Kubernetes (kinds, selectors, GPU requests), KEDA (ScaledObject targets, trigger
 * metadata per scaler, authentication) and the agent itself (the ConfigMap and Secret go
 * through the agent's own settings parser). Secrets must hold placeholders only.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { lanesOf, TopologyNames } from "../../shared/queue/amqp/names.ts";
import { NatsNames } from "../../shared/queue/nats/names.ts";
import { RedisKeys } from "../../shared/queue/redis/client.ts";
import { queueNameOf, sqsQueueNames } from "../../shared/queue/sqs/queues.ts";
import { envOf, last, parseDockerfile } from "../helpers/dockerfile.ts";
import {
  API_VERSIONS,
  agent,
  configMap,
  deployment,
  manifests,
  NAMESPACE,
  ofKind,
  one,
  podSpec,
  ROOT,
  ScaledObject,
  Secret,
  secretData,
  TriggerAuthentication,
} from "../helpers/k8s-manifests.ts";
import { isWithin, modelCacheDirOf } from "../helpers/model-cache-dir.ts";

// ------------------------------------------------------------------ tests
describe("infra/k8s manifests", () => {
  it("uses the apiVersion each kind is served under, all in one namespace", () => {
    expect(manifests.length).toBeGreaterThan(5);
    for (const m of manifests) {
      expect(API_VERSIONS[m.kind], `${m.file}: known kind ${m.kind}`).toBeDefined();
      expect(m.apiVersion, `${m.file}: ${m.kind}`).toBe(API_VERSIONS[m.kind]);
      if (m.kind === "Namespace") expect(m.metadata.name).toBe(NAMESPACE);
      else expect(m.metadata.namespace, `${m.file}: ${m.kind} ${m.metadata.name}`).toBe(NAMESPACE);
    }
  });

  it("selects the Deployment's own pods", () => {
    const labels = deployment.spec.spec.template.metadata.labels;
    for (const [key, value] of Object.entries(deployment.spec.spec.selector.matchLabels)) {
      expect(labels[key], `template label ${key}`).toBe(value);
    }
  });

  it("asks for one NVIDIA GPU per pod and runs on GPU nodes", () => {
    expect(Number(agent.resources.limits["nvidia.com/gpu"])).toBe(1);
    const requested = agent.resources.requests?.["nvidia.com/gpu"];
    // Extended resources cannot be overcommitted: a request must equal the limit.
    if (requested !== undefined) expect(Number(requested)).toBe(1);
    expect(podSpec.nodeSelector ?? {}).toHaveProperty(["nvidia.com/gpu.present"]);
    expect(podSpec.tolerations?.some((t) => t.key === "nvidia.com/gpu")).toBe(true);
    // No probe until the agent serves an endpoint (see infra/k8s/README.md).
    expect(agent.livenessProbe).toBeUndefined();
    expect(agent.readinessProbe).toBeUndefined();
  });

  it("reads its settings from the ConfigMap and Secret that exist", () => {
    const refs = agent.envFrom ?? [];
    const names = (kind: string) => new Set(ofKind(kind).map((m) => m.metadata.name));
    for (const ref of refs) {
      if ("configMapRef" in ref) expect(names("ConfigMap")).toContain(ref.configMapRef.name);
      else expect(names("Secret")).toContain(ref.secretRef.name);
    }
    expect(refs.map((r) => Object.keys(r)[0]).sort()).toEqual(["configMapRef", "secretRef"]);
    if (podSpec.serviceAccountName)
      expect(names("ServiceAccount")).toContain(podSpec.serviceAccountName);
  });

  it("gives the agent settings its own parser accepts", () => {
    const env = {
      ...configMap.spec.data,
      ...secretData("gantry-agent"),
      GANTRY_AGENT_ID: "gantry-agent-7c9f8d6b5-x2x4q", // a pod name, from the downward API
    };
    for (const name of [
      "GANTRY_GATEWAY_URL",
      "GANTRY_QUEUE_URL",
      "GANTRY_AGENT_TOKEN",
      "GANTRY_MODELS",
      "GANTRY_SLOTS",
    ]) {
      expect(env, name).toHaveProperty([name]);
    }
    // A misspelt key would be ignored silently: every key must be a setting the agent reads.
    const known = new Set(
      ["gpu-agent/config.ts", "gpu-agent/cli.ts"].flatMap(
        (file) => readFileSync(join(ROOT, file), "utf8").match(/GANTRY_[A-Z_]+/g) ?? [],
      ),
    );
    for (const key of Object.keys(env)) expect(known, `${key} is an agent setting`).toContain(key);
    const config = parseAgentConfig(env);
    expect(config.slots).toBeGreaterThanOrEqual(1);
    expect(agent.env?.find((e) => e.name === "GANTRY_AGENT_ID")).toBeDefined();
  });

  it("lets in-flight jobs drain before the kubelet kills the pod", () => {
    const drainSeconds =
      parseAgentConfig({
        ...configMap.spec.data,
        ...secretData("gantry-agent"),
      }).drainTimeoutMs / 1000;
    expect(configMap.spec.data.GANTRY_DRAIN_TIMEOUT_SECONDS).toBeDefined();
    // Some margin for the last result report and the process exit.
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(drainSeconds + 10);
  });

  it("commits placeholders only, never real secret values", () => {
    expect(ofKind("Secret").length).toBeGreaterThan(0);
    for (const m of ofKind("Secret")) {
      const values = Object.entries(Secret.parse(m.raw).stringData);
      expect(values.length, `${m.file}: stringData`).toBeGreaterThan(0);
      for (const [key, value] of values) {
        expect(value, `${m.file}: ${key} is a placeholder`).toContain("REPLACE_ME");
      }
    }
  });

  it("scales the agent Deployment from zero with KEDA", () => {
    const scaled = ofKind("ScaledObject");
    expect(scaled.map((m) => m.file).sort()).toEqual([
      "infra/k8s/keda/gateway.yaml",
      "infra/k8s/keda/nats.yaml",
      "infra/k8s/keda/rabbitmq.yaml",
      "infra/k8s/keda/redis.yaml",
      "infra/k8s/keda/sqs.yaml",
    ]);
    for (const m of scaled) {
      const { spec } = ScaledObject.parse(m.raw);
      expect(spec.scaleTargetRef.name, m.file).toBe(deployment.manifest.metadata.name);
      expect(spec.maxReplicaCount).toBeGreaterThan(spec.minReplicaCount);
      // KEDA refuses two ScaledObjects on one target: each file is the whole choice.
      expect(manifests.filter((o) => o.file === m.file && o.kind === "ScaledObject")).toHaveLength(
        1,
      );
    }
  });

  it("authenticates every trigger with a TriggerAuthentication that resolves", () => {
    const auths = new Map(
      ofKind("TriggerAuthentication").map((m) => [
        m.metadata.name,
        TriggerAuthentication.parse(m.raw).spec,
      ]),
    );
    for (const m of ofKind("ScaledObject")) {
      for (const trigger of ScaledObject.parse(m.raw).spec.triggers) {
        if (trigger.type === "nats-jetstream" && !trigger.authenticationRef) continue;
        const ref = trigger.authenticationRef!;
        const auth = auths.get(ref.name);
        expect(auth, `${m.file}: ${ref.name}`).toBeDefined();
        if (trigger.type === "redis-streams") {
          const password = auth && "secretTargetRef" in auth ? auth.secretTargetRef : [];
          const ref = password.find((r) => r.parameter === "password");
          expect(ref, "the redis password comes from a Secret").toBeDefined();
          expect(secretData(ref!.name)).toHaveProperty([ref!.key]);
        } else if (trigger.type === "metrics-api") {
          const refs = auth && "secretTargetRef" in auth ? auth.secretTargetRef : [];
          const key = refs.find((r) => r.parameter === "apiKey");
          expect(key, "the API key comes from a Secret").toBeDefined();
          expect(secretData(key!.name)[key!.key]).toMatch(/^Bearer /);
        } else if (trigger.type === "rabbitmq") {
          expect(auth && "secretTargetRef" in auth).toBe(true);
          if (!auth || !("secretTargetRef" in auth)) continue;
          const host = auth.secretTargetRef.find((ref) => ref.parameter === "host");
          expect(host, "the rabbitmq host comes from a Secret").toBeDefined();
          expect(secretData(host!.name)).toHaveProperty([host!.key]);
          expect(secretData(host!.name)[host!.key]).toMatch(/^https?:\/\//);
        } else {
          expect(auth && "podIdentity" in auth && auth.podIdentity.provider).toBe("aws");
        }
      }
    }
  });

  it("watches the queues of every model the agent serves, as the adapters name them", () => {
    const models = configMap.spec.data.GANTRY_MODELS!.split(",");
    const sqs = one("ScaledObject", ScaledObject, "gantry-agent-sqs").spec.spec.triggers;
    const sqsQueues = sqs.map((t) =>
      t.type === "aws-sqs-queue" ? queueNameOf(t.metadata.queueURL) : "",
    );
    const rabbit = one("ScaledObject", ScaledObject, "gantry-agent-rabbitmq").spec.spec.triggers;
    const rabbitQueues = rabbit.map((t) => (t.type === "rabbitmq" ? t.metadata.queueName : ""));
    const topology = new TopologyNames("gantry"); // the amqp adapter's default prefix
    for (const model of models) {
      // Both live queues: a job in either one needs a pod; the dead-letter queue does not.
      const names = sqsQueueNames("gantry-", model); // the sqs adapter's default prefix
      expect(sqsQueues.sort()).toEqual([names.normal, names.high].sort());
      // Quorum (the default) has a high lane too; classic queues use the normal one only.
      for (const lane of lanesOf("quorum")) {
        expect(rabbitQueues).toContain(topology.laneQueue(model, lane));
      }
    }
    const redis = one("ScaledObject", ScaledObject, "gantry-agent-redis").spec.spec.triggers;
    const streams = redis.map((t) => (t.type === "redis-streams" ? t.metadata.stream : ""));
    const nats = one("ScaledObject", ScaledObject, "gantry-agent-nats").spec.spec.triggers;
    const consumers = nats.map((t) =>
      t.type === "nats-jetstream" ? `${t.metadata.stream}/${t.metadata.consumer}` : "",
    );
    const keys = new RedisKeys("gantry"); // the redis adapter's default prefix
    const subjects = new NatsNames("gantry"); // the nats adapter's default prefix
    for (const model of models) {
      // Both lanes, not the delayed set or the dead-letter stream.
      expect(streams.sort()).toEqual([keys.lane(model, "high"), keys.lane(model, "normal")].sort());
      expect(consumers.sort()).toEqual(
        (["high", "normal"] as const)
          .map((lane) => `${subjects.stream}/${subjects.consumer(model, lane)}`)
          .sort(),
      );
    }
    for (const trigger of sqs) {
      if (trigger.type !== "aws-sqs-queue") continue;
      expect(trigger.metadata.queueURL).toContain(`sqs.${trigger.metadata.awsRegion}.`);
    }
  });

  it("keeps the model cache on a volume, since the root filesystem is read-only", () => {
    const image = parseDockerfile("infra/docker/agent.Dockerfile").at(-1)!;
    const env = {
      ...envOf(image),
      ...configMap.spec.data,
      ...Object.fromEntries((agent.env ?? []).map((e) => [e.name, e.value])),
    };
    const cache = modelCacheDirOf(env, last(image, "WORKDIR") ?? "/");
    const Mounts = z.object({ volumeMounts: z.array(z.object({ mountPath: z.string() })) });
    const raw = z
      .object({
        spec: z.object({ template: z.object({ spec: z.object({ containers: z.array(Mounts) }) }) }),
      })
      .parse(deployment.manifest.raw);
    const mounts = raw.spec.template.spec.containers[0]!.volumeMounts.map((m) => m.mountPath);
    expect(
      mounts.some((dir) => isWithin(cache, dir)),
      `${cache} in ${mounts.join(", ")}`,
    ).toBe(true);
  });

  it("runs as the image's non-root user", () => {
    const dockerfile = readFileSync(join(ROOT, "infra/docker/agent.Dockerfile"), "utf8");
    const user = /^USER\s+(\d+)/m.exec(dockerfile)?.[1];
    expect(podSpec.securityContext.runAsUser).toBe(Number(user));
  });
});
