import type { Delivery, JobQueue } from "../../shared/queue/port.ts";

/**
 * Wraps a JobQueue to count deliveries handed out and not yet settled, so a test can
 * check the prefetch bound from the consumer's side of the port.
 */
export interface TrackingQueue extends JobQueue {
  readonly unsettled: number;
  readonly maxUnsettled: number;
  readonly delivered: number;
}

export function trackQueue(queue: JobQueue): TrackingQueue {
  let unsettled = 0;
  let maxUnsettled = 0;
  let delivered = 0;

  const wrap = (delivery: Delivery): Delivery => {
    let open = true;
    const settled = <T>(promise: Promise<T>) => {
      if (open) {
        open = false;
        unsettled -= 1;
      }
      return promise;
    };
    return {
      message: delivery.message,
      attempt: delivery.attempt,
      ack: () => settled(delivery.ack()),
      retry: (delayMs, error) => settled(delivery.retry(delayMs, error)),
      deadLetter: (error) => settled(delivery.deadLetter(error)),
      extendLease: (ms) => delivery.extendLease(ms),
    };
  };

  return {
    get unsettled() {
      return unsettled;
    },
    get maxUnsettled() {
      return maxUnsettled;
    },
    get delivered() {
      return delivered;
    },
    publish: (message, options) => queue.publish(message, options),
    consume: (handler, options) =>
      queue.consume((delivery) => {
        delivered += 1;
        unsettled += 1;
        maxUnsettled = Math.max(maxUnsettled, unsettled);
        return handler(wrap(delivery));
      }, options),
    depth: (model) => queue.depth(model),
    close: () => queue.close(),
  };
}
