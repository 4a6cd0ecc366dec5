import { describe, expect, it } from "vitest";
import { describeUpdate } from "../../cli/client/run-command.ts";

describe("gantry run's progress line", () => {
  it("gives the gateway's reason for a wait as a sentence of its own", () => {
    const line = describeUpdate({
      job_id: "job_1",
      status: "queued",
      attempt: 0,
      queue_position: 3,
      waiting_detail: "It is next; every slot of the 1 agent serving ocr is busy.",
    });
    expect(line).toBe(
      "job_1: queued, position 3. It is next; every slot of the 1 agent serving ocr is busy.",
    );
  });

  it("names the stage, progress and attempt of a running job", () => {
    const line = describeUpdate({
      job_id: "job_1",
      status: "running",
      attempt: 2,
      progress: 0.5,
      stage: "detection",
    });
    expect(line).toBe("job_1: running, detection 50%, attempt 2");
  });
});
