import type { Transport } from "./http.ts";

/** A served model as `GET /v1/models` shows it, with the limits that apply to the caller. */
export interface ModelInfo {
  id: string;
  object: "model";
  description?: string;
  /** JSON Schema of the job's `input`: `image` and the model's parameters. */
  input_schema: {
    properties?: Record<string, { type?: string; description?: string; enum?: unknown[] }>;
    required?: string[];
  } & Record<string, unknown>;
  content_types: string[];
  limits: Record<string, unknown>;
}

/** `models.list` / `models.get`: what the gateway serves. */
export class Models {
  constructor(private readonly transport: Transport) {}

  async list(options: { signal?: AbortSignal } = {}): Promise<ModelInfo[]> {
    const page = await this.transport.json<{ data: ModelInfo[] }>({
      path: "/v1/models",
      signal: options.signal,
    });
    return page.data;
  }

  get(id: string, options: { signal?: AbortSignal } = {}): Promise<ModelInfo> {
    return this.transport.json<ModelInfo>({
      path: `/v1/models/${encodeURIComponent(id)}`,
      signal: options.signal,
    });
  }
}
