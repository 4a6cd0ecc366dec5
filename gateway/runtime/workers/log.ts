/**
 * The Workers gateway's log: JSON lines on the console, which Workers Logs and
 * `wrangler tail` pick up (pino's Node transports do not run there).
 */
import type { Log } from "../../context.ts";

export const workerLog: Log = {
  info: (fields, message) => console.log(logLine("info", fields, message)),
  warn: (fields, message) => console.warn(logLine("warn", fields, message)),
  error: (fields, message) => console.error(logLine("error", fields, message)),
};

function logLine(level: string, fields: object, message: string): string {
  return JSON.stringify({ level, time: new Date().toISOString(), msg: message, ...fields });
}

/** A catch handler that logs `error` (its stack when it has one) under `message`. */
export function logFailure(message: string): (error: unknown) => void {
  return (error) =>
    workerLog.error({ err: error instanceof Error ? error.stack : String(error) }, message);
}
