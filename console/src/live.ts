import { useEffect, useState } from "preact/hooks";
import type { ConsoleApi, FeedEvent } from "./api.ts";

type Listener = (event: FeedEvent) => void;

/**
 * One `GET /v1/events` stream for the whole console, shared by the views that show live
 * data: each subscribes while it is on screen.
 */
export class LiveFeed {
  private readonly listeners = new Set<Listener>();
  private readonly controller = new AbortController();
  connected = false;

  constructor(api: ConsoleApi) {
    void this.run(api);
  }

  private async run(api: ConsoleApi) {
    try {
      for await (const event of api.feed(this.controller.signal)) {
        this.connected = true;
        for (const listener of this.listeners) listener(event);
      }
    } catch (error) {
      console.warn("live updates stopped", error);
    }
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close() {
    this.controller.abort();
  }
}

/** Calls `listener` for every change of the tenant's jobs while the component is mounted. */
export function useFeed(feed: LiveFeed, listener: Listener) {
  useEffect(() => feed.subscribe(listener), [feed, listener]);
}

/** Re-renders every `ms` (clocks, relative times, chart sampling). */
export function useTick(ms: number): number {
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((n) => n + 1), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return tick;
}
