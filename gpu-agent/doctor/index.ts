import type { QueueInfo } from "../../shared/protocol/index.ts";
import {
  type OpenedQueue,
  type OpenQueueOptions,
  openQueue,
} from "../../shared/queue/open/index.ts";
import type { ExecutionProvider } from "../inference/types.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import { probeProvider } from "../runner/providers.ts";
import {
  brokerForGatewayCheck,
  gatewayCheck,
  gatewayQueueCheck,
  queueCheck,
} from "./connections.ts";
import {
  cudaLibraryCheck,
  cudaLibraryPath,
  driverCheck,
  gpuRows,
  gpuSelectionCheck,
  type NvidiaSmi,
  providerCheck,
  queryGpus,
  runNvidiaSmi,
  vramCheck,
} from "./gpu.ts";
import { type LoadModelsFn, modelCheck } from "./models.ts";
import { CHECK_TIMEOUT_MS, type CheckResult } from "./report.ts";
import { runningAgentCheck } from "./running-agent.ts";
import { notConfigured, SETTING_HINTS } from "./settings.ts";

export { type CheckResult, type CheckStatus, formatJson, formatReport } from "./report.ts";

export interface DoctorOptions {
  /** Null when not configured: the row says so and what to set, and nothing is contacted. */
  gatewayUrl: string | null;
  queueUrl: string | null;
  models: readonly string[];
  providers: readonly ExecutionProvider[];
  threads: number;
  /** From models.yaml (`toModelConfigs(resolveModels(…))`); built-ins need none. */
  modelConfigs?: Readonly<Record<string, ModelConfig>>;
  /** GANTRY_TENSORRT. */
  tensorrt?: boolean;
  /** Per network check. Default 10 s. */
  timeoutMs?: number;
  /**
   * Asks the gateway (a signed call) whether it serves its queue to agents: with no queue
   * URL, whether the agent needs none; with a broker's, whether that broker is the gateway's.
   * Absent when the doctor cannot sign without enrolling (only a token is set).
   */
  gatewayQueueInfo?: () => Promise<QueueInfo>;
  /** Rows about the settings themselves (credentials), shown before the connections. */
  settingRows?: readonly CheckResult[];
  /** `GANTRY_METRICS_PORT`: an agent already running here is asked whether it holds jobs. */
  agentMetricsPort?: number;
  /** GANTRY_GPUS: the GPUs the agent would use (absent: every visible one). */
  gpus?: readonly number[];
  /** The process's CUDA_VISIBLE_DEVICES. */
  cudaVisibleDevices?: string;
}

/** Seams for tests; each defaults to the real thing. */
export interface DoctorDeps {
  /** One line per step as it starts and ends: a person never stares at a silent terminal. */
  progress?: (line: string) => void;
  nvidiaSmi?: NvidiaSmi;
  cudaLibraryPath?: string;
  probe?: (provider: ExecutionProvider) => Promise<void>;
  openQueue?: (url: string, options: OpenQueueOptions) => Promise<OpenedQueue>;
  fetch?: typeof fetch;
  loadModels?: LoadModelsFn;
}

export interface DoctorReport {
  /** False when any check failed: the agent would not start or not get jobs. */
  ok: boolean;
  results: CheckResult[];
}

/**
 * Checks that this host can run the agent: the GPU stack, the queue, the gateway and every
 * configured model, each loaded and warmed as a runner would. Checks never throw: each
 * becomes a row, so one broken piece does not hide the state of the others.
 */
export async function runDoctor(
  options: DoctorOptions,
  deps: DoctorDeps = {},
): Promise<DoctorReport> {
  const progress = deps.progress ?? (() => {});
  const timeoutMs = options.timeoutMs ?? CHECK_TIMEOUT_MS;
  const probe = deps.probe ?? probeProvider;
  const { providers } = options;
  const results: CheckResult[] = [];
  const record = (result: CheckResult) => {
    results.push(result);
    progress(`${result.status.toUpperCase()} ${result.name}: ${result.detail}`);
    return result;
  };

  if (providers.includes("cuda")) {
    progress("checking the NVIDIA driver (nvidia-smi)…");
    const gpus = await queryGpus(deps.nvidiaSmi ?? runNvidiaSmi);
    record(driverCheck(gpus, providers));
    record(vramCheck(gpus));
    const selection = { cudaVisibleDevices: options.cudaVisibleDevices, chosen: options.gpus };
    for (const row of gpuRows(gpus, selection)) record(row);
    if (options.gpus?.length) {
      record(await gpuSelectionCheck({ ...options, gpus: options.gpus }, deps.nvidiaSmi));
    }
    progress("checking the CUDA provider libraries…");
    const libraries = record(
      await cudaLibraryCheck(deps.cudaLibraryPath ?? cudaLibraryPath(), providers),
    );
    if (libraries.status === "pass") {
      record(await providerCheck("cuda", providers, probe));
    } else {
      record({ name: "cuda execution provider", status: "skip", detail: "libraries missing" });
    }
  } else {
    record({ name: "NVIDIA driver", status: "skip", detail: "cuda is not in the providers" });
  }
  if (providers.includes("cpu")) {
    progress("checking the CPU execution provider…");
    record(await providerCheck("cpu", providers, probe));
  }

  for (const row of options.settingRows ?? []) record(row);
  if (options.queueUrl === null && options.gatewayUrl !== null) {
    // The usual case with the sql queue: none to set, when the gateway serves its own.
    progress("asking the gateway whether it serves its queue to agents…");
    record(await gatewayQueueCheck(options.gatewayQueueInfo, timeoutMs));
  } else if (options.queueUrl === null) {
    record(notConfigured("queue", SETTING_HINTS.queue));
  } else {
    progress("checking the queue…");
    const open = deps.openQueue ?? openQueue;
    const row = await queueCheck(options.queueUrl, options.models, timeoutMs, open);
    const info = options.gatewayQueueInfo;
    record(
      row.status === "pass" && info
        ? await brokerForGatewayCheck(row, options.queueUrl, info, timeoutMs)
        : row,
    );
  }
  if (options.gatewayUrl === null) {
    record(notConfigured("gateway", SETTING_HINTS.gateway));
  } else {
    progress("checking the gateway…");
    for (const path of ["/healthz", "/readyz"] as const) {
      record(await gatewayCheck(options.gatewayUrl, path, timeoutMs, deps.fetch ?? fetch));
    }
  }

  if (options.agentMetricsPort !== undefined) {
    progress("asking the agent running on this host…");
    record(await runningAgentCheck(options.agentMetricsPort, timeoutMs, deps.fetch ?? fetch));
  }

  // Models load on the providers that just worked, as a runner would end up doing, without
  // retrying (and re-logging) a provider already shown broken; none working: try them all,
  // so each model's row names why.
  const working = providers.filter((provider) =>
    results.some(
      (result) => result.name === `${provider} execution provider` && result.status === "pass",
    ),
  );
  for (const model of options.models) {
    progress(`loading and warming model ${model}…`);
    record(
      await modelCheck(model, {
        providers: working.length > 0 ? working : providers,
        threads: options.threads,
        ...(options.tensorrt ? { tensorrt: options.tensorrt } : {}),
        ...(options.modelConfigs ? { configs: options.modelConfigs } : {}),
        ...(deps.loadModels ? { load: deps.loadModels } : {}),
      }),
    );
  }

  return { ok: results.every((result) => result.status !== "fail"), results };
}
