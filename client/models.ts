import type { Model } from "../shared/protocol/index.ts";
import type { Transport } from "./http.ts";

/** A served model as `GET /v1/models` shows it, with the limits that apply to the caller. */
export type ModelInfo = Model;

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
