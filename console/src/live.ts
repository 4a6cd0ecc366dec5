import { useEffect, useState } from "preact/hooks";
import type { ConsoleApi, FeedEvent, ProgressEvent } from "./api.ts";

type Listener = (event: FeedEvent) => void;
type ProgressListener = (event: ProgressEvent) => void;

/**
 * One `GET /v1/events` stream for the whole console, shared by the views that show live
 * data: each subscribes while it is on screen, to state changes, to progress, or both.
 */
export class LiveFeed {
  private readonly listeners = new Set<Listener>();
  private readonly progressListeners = new Set<ProgressListener>();
  private readonly controller = new AbortController();
  connected = false;

  constructor(api: ConsoleApi) {
    void this.run(api);
  }

  private async run(api: ConsoleApi) {
    try {
      for await (const live of api.feed(this.controller.signal)) {
        this.connected = true;
        if (live.kind === "status") for (const listener of this.listeners) listener(live.event);
        else for (const listener of this.progressListeners) listener(live.event);
      }
    } catch (error) {
      console.warn("live updates stopped", error);
    }
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  subscribeProgress(listener: ProgressListener): () => void {
    this.progressListeners.add(listener);
    return () => this.progressListeners.delete(listener);
  }

  close() {
    this.controller.abort();
  }
}

/** Calls `listener` for every change of the tenant's jobs while the component is mounted. */
export function useFeed(feed: LiveFeed, listener: Listener) {
  useEffect(() => feed.subscribe(listener), [feed, listener]);
}

/** Calls `listener` for every progress report of the tenant's running jobs. */
export function useProgressFeed(feed: LiveFeed, listener: ProgressListener) {
  useEffect(() => feed.subscribeProgress(listener), [feed, listener]);
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
