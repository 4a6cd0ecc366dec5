import type { Channel, ChannelModel } from "amqplib";

/** An AMQP error with the reply code the broker closed the channel with (404, 406, ...). */
export function replyCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

/**
 * Opens a channel that never throws an unhandled `error` event: the broker closes a
 * channel on any protocol error (a 404 on a missing queue, a 406 on a mismatched
 * declaration, an unknown delivery tag), and the operation that caused it already
 * rejects with that error; `onError` only hears about it.
 */
export async function openChannel(
  model: ChannelModel,
  onError: (error: Error) => void = () => {},
): Promise<Channel> {
  const channel = await model.createChannel();
  channel.on("error", onError);
  return channel;
}

/**
 * A channel that is reopened on next use after the broker closed it, for one-off RPCs
 * (declarations, queue counts). Deliveries never travel on it, so losing it loses nothing.
 */
export class ReopeningChannel {
  private channel: Promise<Channel> | undefined;

  constructor(private readonly model: ChannelModel) {}

  async use<T>(operation: (channel: Channel) => Promise<T>): Promise<T> {
    this.channel ??= this.open();
    const channel = this.channel;
    return operation(await channel);
  }

  async close(): Promise<void> {
    const channel = this.channel;
    this.channel = undefined;
    const open = await channel?.catch(() => undefined);
    await open?.close().catch(() => undefined);
  }

  private open(): Promise<Channel> {
    const opening = openChannel(this.model).then((channel) => {
      channel.once("close", () => {
        if (this.channel === opening) this.channel = undefined;
      });
      return channel;
    });
    opening.catch(() => {
      if (this.channel === opening) this.channel = undefined;
    });
    return opening;
  }
}

/**
 * Runs one-off tasks over `width` channels at once. Each declaration is a synchronous
 * round trip that waits on the broker's metadata store, so a model's dozen queues and
 * bindings go several times faster side by side than one after another.
 *
 * After a failure no further task starts, and the channels are closed only once every
 * task under way has settled: closing a channel under a pending RPC, or letting a worker
 * reopen one after the close, leaves channels behind that nobody closes.
 */
export async function inParallel(
  model: ChannelModel,
  width: number,
  tasks: ReadonlyArray<(channel: ReopeningChannel) => Promise<void>>,
): Promise<void> {
  const queue = [...tasks];
  const channels = Array.from(
    { length: Math.min(width, queue.length) },
    () => new ReopeningChannel(model),
  );
  const failures: unknown[] = [];
  try {
    await Promise.all(
      channels.map(async (channel) => {
        for (let task = queue.shift(); task && failures.length === 0; task = queue.shift()) {
          try {
            await task(channel);
          } catch (error) {
            failures.push(error);
          }
        }
      }),
    );
  } finally {
    await Promise.all(channels.map((channel) => channel.close()));
  }
  if (failures.length > 0) throw failures[0];
}
