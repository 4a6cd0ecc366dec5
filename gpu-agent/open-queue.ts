/** Moved to `shared/queue/open.ts`, which the gateway uses too; kept for existing importers. */
export {
  type OpenedQueue,
  type OpenQueueOptions,
  openQueue,
} from "../shared/queue/open.ts";
