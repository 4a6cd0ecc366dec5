/**
 * `GANTRY_MAX_QUEUE_DEPTH_BY_MODEL=ocr=500,noop=100000`: the backpressure bound of single
 * models (`maxQueueDepth` from `GANTRY_MAX_QUEUE_DEPTH` holds for the others). Shared by
 * the Node settings and the Workers settings, which report the message under the name.
 * Runtime-free.
 */
export function parseQueueBounds(
  text: string | undefined,
  models: readonly string[],
): Record<string, number> {
  const bounds: Record<string, number> = {};
  for (const part of (text ?? "").split(",")) {
    const entry = part.trim();
    if (!entry) continue;
    const match = /^([a-z0-9][a-z0-9._-]*)=(\d{1,12})$/.exec(entry);
    const bound = Number(match?.[2]);
    if (!match?.[1] || !(bound >= 1)) {
      throw new Error(
        `"${entry}" is not model=bound, such as ocr=500 (a whole number, at least 1)`,
      );
    }
    if (!models.includes(match[1])) {
      throw new Error(`"${match[1]}" is not a served model (GANTRY_MODELS: ${models.join(", ")})`);
    }
    bounds[match[1]] = bound;
  }
  return bounds;
}
