import type { ProgressReport } from "../../shared/protocol/index.ts";
import type { RunRequest } from "../inference/types.ts";
import type { ProgressMessage, RunMessage } from "./child-protocol.ts";

/** Jobs whose listeners one child remembers: far more than it ever runs at once. */
const MAX_ROUTES = 1_024;

/**
 * Where a child's progress messages go: each request's `progress` listener, by job. A
 * listener cannot cross the IPC channel (structured clone refuses functions), so requests
 * go to the child without it and its reports come back as messages, routed here. A run's
 * routes go when its result comes back (`ended`): the child sends every report of a run
 * before its result, on the same channel, and each listener holds its job's whole record
 * (delivery, pacer, logger), which kept the last 1 024 jobs of each runner alive (an agent
 * of two slots: heap after a full GC 31 -> 42 MB over its first 2 000 jobs). Beyond that
 * they are forgotten oldest first; a report for a job no longer routed is dropped.
 */
export class ProgressRoutes {
  private readonly routes = new Map<
    string,
    { run: number; listener: (report: ProgressReport) => void }
  >();

  /** The message that runs `requests` in the child, their listeners kept here. */
  runMessage(id: number, requests: readonly RunRequest[]): RunMessage {
    return { v: 1, type: "run", id, requests: this.outbound(id, requests) };
  }

  /** Run `id`'s result came back: its jobs report no more. */
  ended(id: number): void {
    for (const [jobId, route] of this.routes) if (route.run === id) this.routes.delete(jobId);
  }

  private outbound(id: number, requests: readonly RunRequest[]): Omit<RunRequest, "progress">[] {
    return requests.map(({ progress, ...request }) => {
      if (progress) {
        this.routes.delete(request.jobId);
        this.routes.set(request.jobId, { run: id, listener: progress });
        if (this.routes.size > MAX_ROUTES) {
          const oldest = this.routes.keys().next();
          if (!oldest.done) this.routes.delete(oldest.value);
        }
      }
      return request;
    });
  }

  deliver(message: ProgressMessage): void {
    this.routes.get(message.jobId)?.listener(message.report);
  }
}
