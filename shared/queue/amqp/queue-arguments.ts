/**
 * The arguments each RabbitMQ queue of a model is declared with: its type, where its
 * messages dead-letter, and the backstops (delivery limit, overflow). A queue declared
 * again with other arguments is refused by the broker, so these must not change lightly.
 */
import type { TopologyNames } from "./names.ts";
import type { AmqpSettings } from "./options.ts";

export type QueueArguments = Record<string, string | number>;

export interface ModelQueueArguments {
  /** A priority lane's queue, where consumers take jobs. */
  lane(): QueueArguments;
  /** A retry delay step's queue: messages wait out the TTL, then return to their lane. */
  delay(step: number): QueueArguments;
  /** The dead-letter queue. */
  dead(): QueueArguments;
}

export function queueArguments(
  settings: Pick<AmqpSettings, "queueType" | "limits">,
  names: Pick<TopologyNames, "deadExchange" | "jobsExchange">,
): ModelQueueArguments {
  const typed = (args: QueueArguments): QueueArguments => {
    if (settings.queueType === "classic") return { "x-queue-type": "classic", ...args };
    // At-least-once dead-lettering needs reject-publish: a full queue refuses (nacks) new
    // publishes instead of dropping its head.
    return {
      "x-queue-type": "quorum",
      ...args,
      ...(args["x-dead-letter-exchange"]
        ? { "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish" }
        : {}),
    };
  };
  return {
    lane() {
      const dead = { "x-dead-letter-exchange": names.deadExchange };
      if (settings.queueType === "classic") return typed({ ...dead, "x-max-priority": 9 });
      // The broker dead-letters a message returned more than this many times, even when
      // every consumer holding it died before it could count: the poison-message backstop.
      return typed({ ...dead, "x-delivery-limit": settings.limits.maxAttempts });
    },
    delay: (step) => typed({ "x-message-ttl": step, "x-dead-letter-exchange": names.jobsExchange }),
    dead: () => typed({}),
  };
}
