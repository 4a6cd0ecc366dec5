import pino, { type Logger } from "pino";
import pretty from "pino-pretty";

/**
 * The command lines' logger. JSON lines (pino's own) are what log shippers want, and stay
 * the default wherever the output is not a terminal. In a terminal, a newcomer reading
 * `npm start` wants sentences: there the lines are pretty-printed, synchronously on the same
 * stdout as the banner, so each line and the banner come out whole and in order.
 * `GANTRY_LOG_FORMAT=pretty|json` decides either way. Node-only.
 */
export type LogFormat = "pretty" | "json";

export const LOG_FORMATS: readonly LogFormat[] = ["pretty", "json"];

/** The format in force: the setting when given, else pretty exactly when stdout is a TTY. */
export function logFormatFor(setting: LogFormat | null | undefined, isTty: boolean): LogFormat {
  return setting ?? (isTty ? "pretty" : "json");
}

export function createCliLogger(options: {
  name: string;
  level: string;
  format: LogFormat;
  /** Where lines go; stdout (fd 1) by default. Tests pass a stream. */
  destination?: NodeJS.WritableStream;
  /** Colours in pretty lines: on for a terminal. */
  colorize?: boolean;
}): Logger {
  const base = { name: options.name, level: options.level };
  if (options.format === "json") {
    return options.destination ? pino(base, options.destination) : pino(base);
  }
  const stream = pretty({
    colorize: options.colorize ?? false,
    sync: true,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname",
    // One line per entry: a multi-line object per log would bury the banner again.
    singleLine: true,
    ...(options.destination ? { destination: options.destination } : { destination: 1 }),
  });
  return pino(base, stream);
}
