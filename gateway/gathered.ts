import { pause } from "../shared/pause.ts";
import type { Gateway } from "./context.ts";

/**
 * Background work asked for often and needed once in a while (a release pass after each
 * claim and end, a budget check after each billed run): each key's work starts `delayMs`
 * after the first ask, and every ask until it starts is answered by that one run. An ask
 * made once it has started schedules the next, so none goes unanswered.
 *
 * Per gateway, keyed by its notifier (which every per-request copy of a gateway shares). On
 * Workers, where one request's background work cannot wait on another's, each ask runs at
 * once.
 */
export function gathered(delayMs: number) {
  const scheduled = new WeakMap<object, Set<string>>();
  return (
    gateway: Pick<Gateway, "background" | "notifier" | "isolatedRequests">,
    key: string,
    work: () => Promise<unknown>,
  ): void => {
    if (gateway.isolatedRequests) {
      gateway.background(work());
      return;
    }
    const waiting = scheduled.get(gateway.notifier) ?? new Set<string>();
    scheduled.set(gateway.notifier, waiting);
    if (waiting.has(key)) return;
    waiting.add(key);
    gateway.background(
      pause(delayMs).then(() => {
        waiting.delete(key);
        return work();
      }),
    );
  };
}
