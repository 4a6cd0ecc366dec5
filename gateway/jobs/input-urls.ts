import { HttpProblem } from "../../shared/errors.ts";
import { allowListOf } from "../../shared/net/allow-list.ts";
import { checkInputUrl } from "../../shared/net/destination-policy.ts";
import type { JobInput } from "../../shared/protocol/index.ts";
import type { GatewayConfig } from "../config.ts";

/**
 * Input URLs are fetched by an agent, inside the operator's network: a tenant must not make
 * it reach loopback, private or cloud-metadata addresses (SSRF). What the URL alone gives
 * away (literal addresses in any spelling, loopback and internal names) is refused here with
 * a 422; names that resolve inside are refused by the agent at connect time, on every
 * redirect hop (gpu-agent/transfer/input-url.ts). Upload ids are the gateway's own blobs.
 */
export function assertInputUrlsAllowed(input: JobInput, config: GatewayConfig): void {
  const image = input.image;
  if (typeof image !== "string" || image.startsWith("upl_")) return;
  const check = checkInputUrl(image, allowListOf(config.inputUrlAllow));
  if (check.ok) return;
  throw new HttpProblem(
    422,
    "input_url_not_allowed",
    "Input URL not allowed",
    `input.image ${check.reason}: input URLs must be public https URLs.`,
    { errors: [{ path: "input.image", message: check.reason }] },
  );
}
