import { HIGH_LANE_MIN_PRIORITY, type Lane } from "./amqp/names.ts";

export type { Lane };

/** Priorities from 6 up travel in the high lane, as on the amqp (quorum) and sqs queues. */
export const laneOf = (priority: number): Lane =>
  priority >= HIGH_LANE_MIN_PRIORITY ? "high" : "normal";
