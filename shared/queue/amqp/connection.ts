import { type ChannelModel, connect, type RecoveringChannelModel } from "amqplib";
import type { QueueRefusedError } from "../refused.ts";
import { type AmqpSettings, describeUrl } from "./options.ts";
import { amqpRefusal } from "./refusal.ts";

/** The broker did not come back within the time an operation was willing to wait. */
export class BrokerUnavailableError extends Error {
  override readonly name = "BrokerUnavailableError";
}

type ConnectListener = (model: ChannelModel, generation: number) => void;
type DisconnectListener = (error: Error) => void;

/**
 * One AMQP connection that comes back by itself. amqplib's recovery reconnects with
 * exponential backoff (full jitter here, so a fleet of agents losing the broker at once
 * does not reconnect in lockstep); this class tells the rest of the adapter which
 * connection is current, so channels are always opened on a live one and every channel
 * belongs to exactly one connection (its delivery tags die with it).
 */
export class AmqpConnection {
  readonly description: string;
  private readonly recovering: Promise<RecoveringChannelModel>;
  private current: ChannelModel | undefined;
  private generationCount = 0;
  private closed = false;
  /** Why the last connect failed, for the error of a wait that gives up. */
  private lastFailure: Error | undefined;
  /** RabbitMQ refused the URL before it ever connected: no wait can end well. */
  private refusal: QueueRefusedError | undefined;
  private readonly waiters = new Set<{ resolve: ConnectListener; reject: (e: Error) => void }>();
  private readonly connectListeners = new Set<ConnectListener>();
  private readonly disconnectListeners = new Set<DisconnectListener>();

  constructor(private readonly settings: AmqpSettings) {
    this.description = describeUrl(settings.url);
    const { initialDelayMs, maxDelayMs } = settings.reconnect;
    this.recovering = connect(withHeartbeat(settings.url, settings.heartbeatSeconds), {
      clientProperties: { connection_name: settings.connectionName },
      // Small frames (publishes, acks) go out at once instead of waiting on Nagle.
      noDelay: true,
      recovery: {
        waitForConnect: false,
        calculateDelay: (attempt) =>
          Math.random() * Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30)),
      },
    });
    this.recovering.then((model) => this.listen(model)).catch((error) => settings.onError(error));
  }

  /** Increments on every (re)connection. */
  get generation(): number {
    return this.generationCount;
  }

  get connected(): boolean {
    return this.current !== undefined;
  }

  /** The live connection; waits up to `timeoutMs` for one (forever when omitted). */
  model(timeoutMs?: number): Promise<ChannelModel> {
    if (this.closed) return Promise.reject(new Error("the amqp queue is closed"));
    if (this.current) return Promise.resolve(this.current);
    if (this.refusal) return Promise.reject(this.refusal);
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: (model: ChannelModel) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(model);
        },
        reject: (error: Error) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          reject(error);
        },
      };
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(
              () =>
                waiter.reject(
                  new BrokerUnavailableError(
                    `RabbitMQ at ${this.description} is not reachable (waited ${timeoutMs} ms)${
                      this.lastFailure ? `: ${this.lastFailure.message}` : ""
                    }`,
                  ),
                ),
              timeoutMs,
            );
      this.waiters.add(waiter);
    });
  }

  /** Called on every connection, including the first; returns an unsubscribe function. */
  onConnect(listener: ConnectListener): () => void {
    this.connectListeners.add(listener);
    return () => this.connectListeners.delete(listener);
  }

  onDisconnect(listener: DisconnectListener): () => void {
    this.disconnectListeners.add(listener);
    return () => this.disconnectListeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.current = undefined;
    for (const waiter of [...this.waiters]) waiter.reject(new Error("the amqp queue is closed"));
    this.connectListeners.clear();
    this.disconnectListeners.clear();
    const recovering = await this.recovering.catch(() => undefined);
    await recovering?.close().catch(() => undefined);
  }

  private listen(recovering: RecoveringChannelModel): void {
    const log = this.settings.logger;
    recovering.on("connect", (model: ChannelModel) => {
      if (this.closed) return;
      this.current = model;
      this.generationCount += 1;
      const version = String(model.connection.serverProperties.version ?? "unknown version");
      log?.info({ broker: this.description, version }, "connected to RabbitMQ");
      for (const waiter of [...this.waiters]) waiter.resolve(model, this.generationCount);
      for (const listener of [...this.connectListeners]) this.notify(listener, model);
    });
    recovering.on("disconnect", (error: Error) => {
      this.current = undefined;
      if (this.closed) return;
      log?.warn({ broker: this.description, err: error }, "lost the RabbitMQ connection");
      for (const listener of [...this.disconnectListeners]) {
        try {
          listener(error);
        } catch (cause) {
          this.settings.onError(cause);
        }
      }
    });
    recovering.on("connect-failed", (error: Error) => this.failed(error));
    recovering.on(
      "reconnect-scheduled",
      (info: { attempt: number; delay: number; error: Error }) => {
        log?.warn(
          {
            broker: this.description,
            attempt: info.attempt,
            delayMs: Math.round(info.delay),
            err: info.error,
          },
          "RabbitMQ unreachable; reconnecting",
        );
      },
    );
    // A connection-level error is followed by `disconnect`; listening keeps it from throwing.
    recovering.on("error", (error: Error) =>
      log?.warn({ err: error }, "RabbitMQ connection error"),
    );
    recovering.on("blocked", (reason: string) =>
      log?.warn({ reason }, "RabbitMQ blocked publishing (memory or disk alarm)"),
    );
    recovering.on("unblocked", () => log?.info({}, "RabbitMQ accepts publishes again"));
  }

  /**
   * A connect failed. Before the first connection, a refusal of the URL ends every wait at
   * once (a start then fails with it instead of retrying a wrong password for ever); once
   * connected, the recovery keeps trying, since a broker's users can be fixed under it.
   */
  private failed(error: Error): void {
    this.lastFailure = error;
    if (this.generationCount > 0 || this.closed) return;
    const refusal = amqpRefusal(error, this.settings.url, this.description);
    if (!refusal) return;
    this.refusal = refusal;
    for (const waiter of [...this.waiters]) waiter.reject(refusal);
  }

  private notify(listener: ConnectListener, model: ChannelModel): void {
    try {
      listener(model, this.generationCount);
    } catch (error) {
      this.settings.onError(error);
    }
  }
}

/** amqplib reads the heartbeat from the URL; keep one the operator set. */
function withHeartbeat(url: string, seconds: number): string {
  try {
    const parsed = new URL(url);
    if (!parsed.searchParams.has("heartbeat"))
      parsed.searchParams.set("heartbeat", String(seconds));
    return parsed.toString();
  } catch {
    return url;
  }
}
