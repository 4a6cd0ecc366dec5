import { access } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** Where onnxruntime-node keeps its CUDA provider library on this platform. */
export function cudaLibraryPath(): string {
  const require = createRequire(import.meta.url);
  const packageDir = dirname(require.resolve("onnxruntime-node/package.json"));
  return join(
    packageDir,
    "bin",
    "napi-v6",
    process.platform,
    process.arch,
    "libonnxruntime_providers_cuda.so",
  );
}

/** How the operator fetches it: npm's install never does (package.json's allowScripts). */
export const CUDA_LIBRARY_INSTALL =
  "`ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install` (needs CUDA 12 and cuDNN 9)";

/** Whether the file is there (not whether CUDA works: the driver and a GPU are the probe's). */
export async function cudaLibraryPresent(path = cudaLibraryPath()): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
