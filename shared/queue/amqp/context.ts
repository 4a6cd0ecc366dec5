import type { Channel, Message, Options } from "amqplib";
import type { AmqpConnection } from "./connection.ts";
import { deadLetterHeaders, INVALID_MESSAGE } from "./message.ts";
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

/**
 * A message whose body is not a queue message: nothing could ever process it, so it goes
 * to the dead-letter queue of the lane it came from, for a person to look at, and is acked
 * (or nacked back when that publish fails). Its channel may have died meanwhile.
 */
export async function deadLetterUnreadable(
  ctx: AmqpContext,
  source: { readonly channel: Channel; readonly alive: boolean },
  where: { model: string; lane: Lane; raw: Message },
): Promise<void> {
  const { model, lane, raw } = where;
  const answer = (ack: boolean) => {
    if (!source.alive) return;
    try {
      if (ack) source.channel.ack(raw);
      else source.channel.nack(raw, false, true);
    } catch {
      // The channel closed under us; the broker has the message back.
    }
  };
  const headers = deadLetterHeaders(INVALID_MESSAGE(raw.content), 0);
  const properties = { persistent: true, headers };
  try {
    await sendToDead(ctx, { model, lane, content: raw.content, properties });
    answer(true);
  } catch (error) {
    ctx.settings.onError(error);
    answer(false);
  }
}
