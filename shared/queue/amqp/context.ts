import type { Options } from "amqplib";
import type { AmqpConnection } from "./connection.ts";
import type { Lane } from "./names.ts";
import { type AmqpSettings, delayStepFor } from "./options.ts";
import type { Publisher } from "./publisher.ts";
import type { Topology } from "./topology.ts";

/** What the adapter, its consumers and their deliveries share. */
export interface AmqpContext {
  settings: AmqpSettings;
  conn: AmqpConnection;
  topology: Topology;
  publisher: Publisher;
}

export interface Outgoing {
  model: string;
  lane: Lane;
  content: Buffer;
  properties: Options.Publish;
}

/**
 * Publishes a job message to its lane, through the delay queue whose step covers
 * `delayMs` when there is one. The model's queues are declared first on this connection,
 * and again if the broker finds no queue bound for the message.
 */
export function sendToLane(ctx: AmqpContext, outgoing: Outgoing, delayMs = 0): Promise<void> {
  const { names } = ctx.topology;
  const step = delayStepFor(ctx.settings.delaySteps, delayMs);
  return ctx.publisher.publish({
    exchange: step === undefined ? names.jobsExchange : names.delayExchange(step),
    routingKey: names.laneKey(outgoing.model, outgoing.lane),
    content: outgoing.content,
    properties: outgoing.properties,
    prepare: (timeoutMs) => ctx.topology.ensureModel(outgoing.model, timeoutMs),
    repair: (timeoutMs) => ctx.topology.repair(outgoing.model, timeoutMs),
  });
}

/** Publishes to the model's dead-letter queue. */
export function sendToDead(ctx: AmqpContext, outgoing: Outgoing): Promise<void> {
  const { names } = ctx.topology;
  return ctx.publisher.publish({
    exchange: names.deadExchange,
    routingKey: names.laneKey(outgoing.model, outgoing.lane),
    content: outgoing.content,
    properties: outgoing.properties,
    prepare: (timeoutMs) => ctx.topology.ensureModel(outgoing.model, timeoutMs),
    repair: (timeoutMs) => ctx.topology.repair(outgoing.model, timeoutMs),
  });
}
