import { z } from "zod";
import { defineTask, IMAGE_TYPES } from "./task.ts";

export const noopTask = defineTask({
  id: "noop",
  description: "Echoes its input after `delay_ms`; measures queue overhead apart from inference.",
  image: "optional",
  contentTypes: IMAGE_TYPES,
  // Loose: noop echoes the keys it does not know. `crash`, `block_ms` and `oom_if_batch_over`
  // let tests and operators drive the runner-crash, timeout and out-of-memory paths without a GPU.
  params: z.looseObject({
    delay_ms: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .optional()
      .describe("Wait this long before answering."),
    progress_every_ms: z
      .number()
      .int()
      .min(10)
      .max(60_000)
      .optional()
      .describe(
        "While waiting `delay_ms`, report progress (stage `sleeping`) this often, to exercise progress.",
      ),
    block_ms: z
      .number()
      .int()
      .min(0)
      .max(600_000)
      .optional()
      .describe(
        "Block the runner's event loop this long (as a stuck device call would), past any timeout.",
      ),
    fail: z
      .enum(["permanent", "transient"])
      .optional()
      .describe("Fail the job this way instead (to exercise retries and dead-lettering)."),
    crash: z
      .boolean()
      .optional()
      .describe("Kill the runner process mid-run, as a CUDA fault would."),
    oom_if_batch_over: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Fail as out of memory when the batch holds more jobs than this."),
  }),
  artifacts: [],
  output: z.record(z.string(), z.unknown()).describe("The job's parameters, echoed."),
  decodesImage: false,
  builtin: true,
  defaultTimeoutSeconds: 120,
});
