/**
 * What onnxruntime says when a device runs out of memory. The CUDA provider reports
 * `CUDA out of memory` / `cudaErrorMemoryAllocation` / `CUDA_ERROR_OUT_OF_MEMORY`, its
 * arena `BFCArena::AllocateRawInternal … Failed to allocate memory for requested buffer`;
 * the CPU allocator throws `std::bad_alloc`.
 */
const OUT_OF_MEMORY = [
  /out of memory/i,
  /failed to allocate memory/i,
  /BFCArena/,
  /cudaErrorMemoryAllocation/,
  /CUBLAS_STATUS_ALLOC_FAILED/,
  /CUDNN_STATUS_ALLOC_FAILED/,
  /bad_alloc/,
];

/** The error code an out-of-memory run fails with; the runner acts on it. */
export const OUT_OF_MEMORY_CODE = "out_of_memory";

/**
 * The code of runs lost because their child was replaced after another run ran out of
 * memory: not their fault, so the runner pool puts them back in line.
 */
export const RUNNER_RECYCLED_CODE = "runner_recycled";

/** True when `error` (or its message) says a device ran out of memory. */
export function isOutOfMemory(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return OUT_OF_MEMORY.some((pattern) => pattern.test(message));
}

/** What onnxruntime's CUDA arena says when it runs out; `noop` throws it on request. */
export const OUT_OF_MEMORY_SAMPLE =
  "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running " +
  "Conv node. Name:'/backbone/conv1/Conv' Status Message: /onnxruntime_src/onnxruntime/core/" +
  "framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, " +
  "onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Failed to allocate memory for " +
  "requested buffer of size 1073741824";

/**
 * The code of runs lost with a crashed child while they waited behind the run on the device:
 * that run is the one blamed (`runner_crashed`); these go back in line, each to run alone.
 */
export const RUNNER_LOST_CODE = "runner_lost";
