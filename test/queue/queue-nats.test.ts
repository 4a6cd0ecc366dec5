import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it, onTestFinished } from "vitest";
import { createNatsQueue } from "../../shared/queue/nats/index.ts";
import { NatsNames } from "../../shared/queue/nats/names.ts";
import { pullNow } from "../../shared/queue/nats/topology.ts";
import type { QueueLimits } from "../../shared/queue/port.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import { describeJobQueueConformance, freshModel, queueMessage } from "../conformance/job-queue.ts";
import { itHasLanesAndDeadLetters } from "../conformance/lanes-and-dead-letters.ts";
import { describeRefill } from "../conformance/refill.ts";
import { prefixedQueueFixture } from "../helpers/prefixed-queue-fixture.ts";

/** The machine's NATS with JetStream (GANTRY_TEST_NATS_SERVER overrides it); each test its own prefix. */
const SERVER = process.env.GANTRY_TEST_NATS_SERVER ?? "127.0.0.1:4222";
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 500 };

function natsFixture(onError?: (error: unknown) => void) {
  return prefixedQueueFixture(
    LIMITS,
    (prefix) =>
      createNatsQueue({ connection: { servers: SERVER }, prefix, limits: LIMITS, onError }),
    (queue) => queue.deleteAll(),
  );
}

describeJobQueueConformance("nats jetstream", natsFixture);
describeRefill("nats jetstream", natsFixture);
describeFairRelease("nats jetstream", () => natsFixture());

describe("nats queue: beyond the port", () => {
  const setUp = async () => {
    const fixture = await natsFixture();
    onTestFinished(() => fixture.cleanup());
    return { ...fixture, names: new NatsNames(fixture.prefix), model: freshModel() };
  };

  itHasLanesAndDeadLetters(setUp, LIMITS, 10_000);

  it("stores a retried publish once (Nats-Msg-Id), and again once its message is gone", async () => {
    const { queue, model, names, prefix } = await setUp();
    const message = queueMessage(model);
    await queue.publish(message);
    await queue.publish(message);
    expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    expect(await queue.absent([message])).toEqual([]);
    // Behind Gantry's back: the message vanishes (a crash, an operator's purge).
    const raw = await connect({ servers: SERVER });
    onTestFinished(() => raw.close());
    const jsm = await jetstreamManager(raw);
    await jsm.streams.purge(names.stream, { filter: names.subject(model, "normal", message.id) });
    expect(await queue.absent([message])).toEqual([message.id]);
    await queue.publish(message); // the outbox republishes it: a duplicate id, but no message
    expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    expect(prefix).toContain("gantry-test-");
  });

  it("dead-letters a message whose last delivery's holder died (MAX_DELIVERIES advisory)", async () => {
    const { queue, model, names } = await setUp();
    const doomed = queueMessage(model);
    await queue.publish(doomed);
    // Any consumer of this queue listens for the advisory.
    const idle = await queue.consume(() => {}, { prefetch: 1, models: [freshModel()] });
    const raw = await connect({ servers: SERVER });
    onTestFinished(() => raw.close());
    // Consumers that take the message and die: the server counts each delivery.
    for (let i = 0; i < LIMITS.maxAttempts + 1; i++) {
      await expect
        .poll(() => pullNow(raw, names.stream, names.consumer(model, "normal"), 1), {
          timeout: 5_000,
          interval: 50,
        })
        .toHaveLength(1);
    }
    // The server gives up on the message when a pull asks for it next (the advisory then).
    await expect
      .poll(
        async () => {
          expect(await pullNow(raw, names.stream, names.consumer(model, "normal"), 1)).toEqual([]);
          return queue.depth(model);
        },
        { timeout: 10_000, interval: 100 },
      )
      .toMatchObject({ ready: 0, inFlight: 0, dead: 1 });
    expect(await queue.deadLetters(model)).toMatchObject([
      { message: doomed, error: { code: "max_attempts_exceeded" } },
    ]);
    expect(await queue.absent([doomed])).toEqual([doomed.id]);
    await idle.stop();
  });
});
