import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** A GPU as the stub lists it. */
export interface StubGpu {
  name: string;
  totalMiB: number;
  usedMiB: number;
  utilization: number;
  temperature: number;
}

/** Four 24 GB cards in various states: what a rented 4-GPU box shows. */
export const FOUR_GPUS: StubGpu[] = [0, 1, 2, 3].map((index) => ({
  name: "NVIDIA L4",
  totalMiB: 23034,
  usedMiB: 300 + index * 100,
  utilization: index * 10,
  temperature: 40 + index,
}));

/**
 * An `nvidia-smi` on PATH (a shell script in a temp folder, put first on this process's
 * PATH, which runner children inherit) answering the agent's GPU query and its memory query
 * (used and total of every GPU, as the heartbeat asks) with `gpus`, and the per-process
 * memory query with nothing. `restore` puts PATH back and deletes it.
 */
export function installStubNvidiaSmi(gpus: readonly StubGpu[] = FOUR_GPUS): { restore(): void } {
  const dir = mkdtempSync(join(tmpdir(), "gantry-nvidia-smi-"));
  const lines = gpus
    .map(
      (gpu, index) =>
        `${index}, ${gpu.name}, 550.54.15, ${gpu.usedMiB}, ${gpu.totalMiB - gpu.usedMiB}, ${gpu.totalMiB}, ${gpu.utilization}, ${gpu.temperature}, GPU-0000000${index}-aaaa-bbbb-cccc-dddddddddddd`,
    )
    .join("\n");
  const memory = gpus.map((gpu) => `${gpu.usedMiB}, ${gpu.totalMiB}`).join("\n");
  const script = `#!/bin/sh
case "$1" in
  --query-gpu=memory.used,memory.total) cat <<'MEMORY'
${memory}
MEMORY
  ;;
  --query-gpu=*) cat <<'GPUS'
${lines}
GPUS
  ;;
  --query-compute-apps=*) ;;
  *) echo "stub nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
`;
  const path = join(dir, "nvidia-smi");
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  const before = process.env.PATH;
  process.env.PATH = `${dir}${delimiter}${before ?? ""}`;
  return {
    restore() {
      process.env.PATH = before;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
