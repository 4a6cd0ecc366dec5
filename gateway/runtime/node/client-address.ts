import type { IncomingMessage } from "node:http";
import { BlockList, isIP } from "node:net";
import { UserError } from "../../../shared/errors.ts";
import type { AddressOf } from "../../limits/address-limit.ts";

/** Addresses whose trust is remembered at once (clients behind a load balancer: a few). */
const MAX_VERDICTS = 10_000;

/**
 * The client's address on Node: the socket's peer, unless that peer is one of the trusted
 * proxies (GANTRY_TRUSTED_PROXIES: addresses or CIDR ranges), in which case the rightmost
 * address in X-Forwarded-For that is not itself a trusted proxy. Never the leftmost: a
 * client can write anything there, and only what trusted proxies appended is true.
 */
export function nodeAddressOf(trustedProxies: readonly string[]): AddressOf {
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [address, bits] = entry.split("/");
    const family = isIP(address ?? "");
    if (!address || family === 0) {
      throw new UserError(`GANTRY_TRUSTED_PROXIES: "${entry}" is not an address or CIDR range.`);
    }
    const type = family === 6 ? "ipv6" : "ipv4";
    if (bits === undefined) trusted.addAddress(address, type);
    else trusted.addSubnet(address, Number(bits), type);
  }
  // BlockList.check builds a SocketAddress per call, on every request; peers repeat, so
  // each verdict is kept (a bounded table, emptied when full), and with no trusted proxy
  // (the default) nothing is checked at all.
  const verdicts = new Map<string, boolean>();
  const isTrusted = (address: string) => {
    if (trustedProxies.length === 0) return false;
    const known = verdicts.get(address);
    if (known !== undefined) return known;
    const bare = address.replace(/^::ffff:/, "");
    const family = isIP(bare);
    const verdict = family !== 0 && trusted.check(bare, family === 6 ? "ipv6" : "ipv4");
    if (verdicts.size >= MAX_VERDICTS) verdicts.clear();
    verdicts.set(address, verdict);
    return verdict;
  };
  return (c) => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const peer = incoming?.socket.remoteAddress?.replace(/^::ffff:/, "");
    if (!peer) return null;
    if (!isTrusted(peer)) return peer;
    const hops = (c.req.raw.headers.get("x-forwarded-for") ?? "")
      .split(",")
      .map((hop) => hop.trim())
      .filter((hop) => hop !== "");
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i] ?? "";
      if (!isTrusted(hop)) return isIP(hop.replace(/^::ffff:/, "")) ? hop : peer;
    }
    return peer;
  };
}
