import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { type Delivery, type JobQueue, LeaseLostError } from "../../shared/queue/port.ts";
import { harnessPerTest } from "../helpers/agent-harness.ts";
import { createFakeRunner } from "../helpers/fake-runner.ts";

const start = harnessPerTest();

interface LogLine {
  level: number;
  msg: string;
}

/** A logger whose lines the test reads. */
function recordingLogger() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: pino({ level: "debug" }, stream) };
}

/**
 * The queue acks for real, then answers as a queue whose message was already settled (the
 * gateway's `acked: false` for a resent report): nothing of it will be delivered again.
 */
function ackAlreadySettled(queue: JobQueue): JobQueue {
  return {
    ...queue,
    consume: (handler, options) =>
      queue.consume(
        (delivery) =>
          handler({
            ...delivery,
            async ack() {
              await delivery.ack();
              throw new LeaseLostError(delivery.message.id);
            },
          } satisfies Delivery),
        options,
      ),
  };
}

describe("gpu-agent settling a message already settled", () => {
  it("says so at warn, not that the message will be redelivered", async () => {
    const { lines, logger } = recordingLogger();
    const h = await start({ runners: [createFakeRunner()], logger, wrapQueue: ackAlreadySettled });
    const id = h.gateway.addJob({ input: { n: 1 } }).job.id;

    await h.queue.publish(h.gateway.message(id));
    expect((await h.settled(id)).outcome).toBe("succeeded");

    expect(lines.filter((line) => line.level >= 50)).toEqual([]);
    expect(lines.filter((line) => /redelivered/.test(line.msg))).toEqual([]);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 40, msg: expect.stringMatching(/already settled/) }),
    );
  });
});
