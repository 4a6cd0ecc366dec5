import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { UserError } from "../../shared/errors.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import { type DownloadProgress, fetchModelFile } from "./fetch-file.ts";
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
  limits?: { max_pixels?: number; max_side?: number };
  labels?: string[];
}

export interface ResolveModelsOptions {
  /** Where downloaded files are kept, keyed by sha256. */
  cacheDir: string;
  onProgress?: (progress: DownloadProgress) => void;
  fetch?: typeof fetch;
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
  if (registryPath === null) return [];
  const absolute = resolve(registryPath);
  const entries = await readRegistry(absolute);
  const resolved: ResolvedModelEntry[] = [];
  for (const entry of entries) {
    const files: Record<string, string> = {};
    for (const file of entry.files) {
      files[file.name] = await fetchModelFile(file, {
        model: entry.id,
        cacheDir: options.cacheDir,
        baseDir: dirname(absolute),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      });
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
      pipeline: model.task,
      ...(file ? { file } : {}),
      ...(model.max_batch ? { max_batch: model.max_batch } : {}),
      ...(model.labels ? { labels: model.labels } : {}),
    };
  }
  return configs;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
