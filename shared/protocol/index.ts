export * from "./agent.ts";
export * from "./agent-batch.ts";
export * from "./error.ts";
export * from "./feed.ts";
export * from "./job.ts";
export * from "./queue-message.ts";
export * from "./upload.ts";
export * from "./webhook.ts";
