/** Short human forms for the tables. */
export const ms = (value: number | null | undefined): string => {
  if (value === null || value === undefined) return "–";
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(1)} s`;
  return `${(value / 60_000).toFixed(1)} min`;
};

export const time = (iso: string | null | undefined): string =>
  iso ? new Date(iso).toLocaleTimeString() : "–";

export const ago = (iso: string | null | undefined, now = Date.now()): string =>
  iso ? `${ms(now - Date.parse(iso))} ago` : "–";

export const percent = (value: number | null | undefined): string =>
  value === null || value === undefined ? "–" : `${Math.round(value * 100)}%`;

/** The q-quantile of `values` (nearest rank), null when there are none. */
export function quantile(values: number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? null;
}

export const errorText = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);
