import type { AddressOf } from "../../limits/address-limit.ts";

/**
 * The client's address on Workers: CF-Connecting-IP, which Cloudflare's edge sets on every
 * request it hands a Worker, overwriting whatever the client sent, so it is trusted as
 * it stands (unlike X-Forwarded-For, which a client writes to). Anything that does not look
 * like an IPv4 or IPv6 address counts as no address: such a request is not limited here.
 */
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const IPV6 = /^[0-9a-f:.]{2,45}$/i;

export const workerAddressOf: AddressOf = (c) => {
  const address = c.req.raw.headers.get("cf-connecting-ip")?.trim() ?? "";
  if (IPV4.test(address) || (address.includes(":") && IPV6.test(address))) {
    return address.toLowerCase();
  }
  return null;
};
