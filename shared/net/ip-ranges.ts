/**
 * Which IP addresses a webhook may never reach: the operator's own network (loopback,
 * private, link-local, unique-local), cloud metadata services, and addresses that are not
 * unicast hosts at all. Runtime-free (the gateway core and the Node connect-time check
 * share it), so no `node:net`: addresses are parsed here.
 *
 * Every input goes through the WHATWG URL host parser first. That parser is what `fetch`
 * itself uses, and it turns every legacy IPv4 spelling (`2130706433`, `0x7f000001`,
 * `0177.0.0.1`, `127.1`) into dotted form and every IPv6 spelling into one compressed form,
 * so the range tables below only ever see canonical addresses.
 */

export interface AddressVerdict {
  /** Why the address is refused, for the delivery log and the 422 detail. */
  reason: string;
  /** Refused even in embedded mode, where loopback and private receivers are allowed. */
  always: boolean;
}

export type ParsedAddress = { version: 4; bytes: number[] } | { version: 6; hextets: number[] };

interface Ipv4Range {
  base: [number, number, number, number];
  prefix: number;
  reason: string;
  always?: boolean;
}

/** First match wins: the exact metadata addresses come before the ranges that hold them. */
const IPV4_RANGES: Ipv4Range[] = [
  { base: [169, 254, 169, 254], prefix: 32, reason: "cloud metadata service", always: true },
  { base: [169, 254, 170, 2], prefix: 32, reason: "cloud metadata service (ECS)", always: true },
  {
    base: [100, 100, 100, 200],
    prefix: 32,
    reason: "cloud metadata service (Alibaba)",
    always: true,
  },
  { base: [0, 0, 0, 0], prefix: 8, reason: '"this network" (0.0.0.0/8)' },
  { base: [10, 0, 0, 0], prefix: 8, reason: "private (10.0.0.0/8)" },
  { base: [100, 64, 0, 0], prefix: 10, reason: "carrier-grade NAT (100.64.0.0/10)" },
  { base: [127, 0, 0, 0], prefix: 8, reason: "loopback (127.0.0.0/8)" },
  { base: [169, 254, 0, 0], prefix: 16, reason: "link-local (169.254.0.0/16)" },
  { base: [172, 16, 0, 0], prefix: 12, reason: "private (172.16.0.0/12)" },
  { base: [192, 0, 0, 0], prefix: 24, reason: "IETF protocol assignments (192.0.0.0/24)" },
  { base: [192, 0, 2, 0], prefix: 24, reason: "documentation (192.0.2.0/24)" },
  { base: [192, 168, 0, 0], prefix: 16, reason: "private (192.168.0.0/16)" },
  { base: [198, 18, 0, 0], prefix: 15, reason: "benchmarking (198.18.0.0/15)" },
  { base: [198, 51, 100, 0], prefix: 24, reason: "documentation (198.51.100.0/24)" },
  { base: [203, 0, 113, 0], prefix: 24, reason: "documentation (203.0.113.0/24)" },
  { base: [224, 0, 0, 0], prefix: 4, reason: "multicast (224.0.0.0/4)" },
  { base: [255, 255, 255, 255], prefix: 32, reason: "broadcast (255.255.255.255)" },
  { base: [240, 0, 0, 0], prefix: 4, reason: "reserved (240.0.0.0/4)" },
];

interface Ipv6Range {
  base: number[];
  prefix: number;
  reason: string;
  always?: boolean;
}

const IPV6_RANGES: Ipv6Range[] = [
  {
    base: [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
    prefix: 128,
    reason: "cloud metadata service",
    always: true,
  },
  { base: [0, 0, 0, 0, 0, 0, 0, 0], prefix: 128, reason: "unspecified (::)" },
  { base: [0, 0, 0, 0, 0, 0, 0, 1], prefix: 128, reason: "loopback (::1)" },
  {
    base: [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
    prefix: 48,
    reason: "local-use NAT64 (64:ff9b:1::/48)",
  },
  { base: [0x100, 0, 0, 0, 0, 0, 0, 0], prefix: 64, reason: "discard-only (100::/64)" },
  { base: [0x2001, 0, 0, 0, 0, 0, 0, 0], prefix: 32, reason: "Teredo tunnel (2001::/32)" },
  { base: [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], prefix: 32, reason: "documentation (2001:db8::/32)" },
  { base: [0xfc00, 0, 0, 0, 0, 0, 0, 0], prefix: 7, reason: "unique-local (fc00::/7)" },
  { base: [0xfe80, 0, 0, 0, 0, 0, 0, 0], prefix: 10, reason: "link-local (fe80::/10)" },
  { base: [0xfec0, 0, 0, 0, 0, 0, 0, 0], prefix: 10, reason: "site-local (fec0::/10)" },
  { base: [0xff00, 0, 0, 0, 0, 0, 0, 0], prefix: 8, reason: "multicast (ff00::/8)" },
];

/**
 * Null for an address a webhook may reach, else why not. `allowPrivate` (embedded mode)
 * lets loopback and private addresses through but never cloud metadata. Anything that is
 * not an IP address (a host name) is null here: names are checked once resolved.
 */
export function forbiddenAddress(
  address: string,
  options: { allowPrivate: boolean },
): AddressVerdict | null {
  const verdict = classifyAddress(address);
  if (!verdict) return null;
  return options.allowPrivate && !verdict.always ? null : verdict;
}

/** True when `host` (a URL host, brackets allowed, or a resolver's answer) is an IP address. */
export function isIpAddress(host: string): boolean {
  return parseAddress(host) !== null;
}

/** Why the address is special, ignoring any mode; null for public unicast and for names. */
export function classifyAddress(address: string): AddressVerdict | null {
  const parsed = parseAddress(address);
  if (!parsed) return null;
  return parsed.version === 4 ? classifyIpv4(parsed.bytes) : classifyIpv6(parsed.hextets);
}

function classifyIpv4(bytes: number[]): AddressVerdict | null {
  for (const range of IPV4_RANGES) {
    if (matchesPrefix(bytes, range.base, range.prefix, 8)) {
      return { reason: range.reason, always: range.always ?? false };
    }
  }
  return null;
}

function classifyIpv6(h: number[]): AddressVerdict | null {
  // IPv4 carried inside IPv6: a socket treats these as the IPv4 address they carry (the
  // mapped form is how a dual-stack socket talks IPv4), so judge the IPv4 address, and
  // refuse the forms no real receiver needs even when that address is public.
  const v4 = [(h[6] ?? 0) >> 8, (h[6] ?? 0) & 0xff, (h[7] ?? 0) >> 8, (h[7] ?? 0) & 0xff];
  const dotted = v4.join(".");
  const zeroTo = (n: number) => h.slice(0, n).every((x) => x === 0);
  const embedded = (form: string, refuseAnyway: boolean): AddressVerdict | null => {
    const inner = classifyIpv4(v4);
    if (inner) return { reason: `${form} of ${dotted}: ${inner.reason}`, always: inner.always };
    return refuseAnyway ? { reason: `${form} of ${dotted}`, always: false } : null;
  };
  if (zeroTo(5) && h[5] === 0xffff) return embedded("IPv4-mapped IPv6 address", true);
  if (zeroTo(4) && h[4] === 0xffff && h[5] === 0) {
    return embedded("IPv4-translated IPv6 address", true);
  }
  if (zeroTo(6) && !(h[6] === 0 && (h[7] === 0 || h[7] === 1))) {
    return embedded("IPv4-compatible IPv6 address", true);
  }
  // NAT64 (64:ff9b::/96) reaches real IPv4 hosts from IPv6-only networks: fine if public.
  if (h[0] === 0x64 && h[1] === 0xff9b && h.slice(2, 6).every((x) => x === 0)) {
    return embedded("NAT64 address", false);
  }
  // 6to4 (2002::/16) carries the IPv4 address in its next 32 bits.
  if (h[0] === 0x2002) {
    const inner = [(h[1] ?? 0) >> 8, (h[1] ?? 0) & 0xff, (h[2] ?? 0) >> 8, (h[2] ?? 0) & 0xff];
    const verdict = classifyIpv4(inner);
    if (verdict)
      return {
        reason: `6to4 address of ${inner.join(".")}: ${verdict.reason}`,
        always: verdict.always,
      };
  }
  for (const range of IPV6_RANGES) {
    if (matchesPrefix(h, range.base, range.prefix, 16)) {
      return { reason: range.reason, always: range.always ?? false };
    }
  }
  return null;
}

export function matchesPrefix(
  parts: number[],
  base: number[],
  prefix: number,
  bitsPerPart: number,
): boolean {
  let remaining = prefix;
  for (let i = 0; remaining > 0; i++, remaining -= bitsPerPart) {
    const bits = Math.min(bitsPerPart, remaining);
    const shift = bitsPerPart - bits;
    if ((parts[i] ?? 0) >> shift !== (base[i] ?? 0) >> shift) return false;
  }
  return true;
}

const DOTTED_QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** An IP address in any spelling the URL host parser accepts; null for names and garbage. */
export function parseAddress(input: string): ParsedAddress | null {
  // Zone ids (`fe80::1%eth0`) come from resolvers; the zone does not change the range.
  let text = input.trim().replace(/%.*$/, "");
  if (text.includes(":") && !text.startsWith("[")) text = `[${text}]`;
  let host: string;
  try {
    host = new URL(`http://${text}/`).hostname;
  } catch {
    return null;
  }
  if (host.startsWith("[")) {
    const hextets = parseCanonicalIpv6(host.slice(1, -1));
    return hextets ? { version: 6, hextets } : null;
  }
  const quad = DOTTED_QUAD.exec(host);
  return quad ? { version: 4, bytes: quad.slice(1).map(Number) } : null;
}

/** The URL serializer's IPv6 form: lowercase hex groups, at most one `::`, no IPv4 tail. */
function parseCanonicalIpv6(text: string): number[] | null {
  const [head = "", tail, ...rest] = text.split("::");
  if (rest.length > 0) return null;
  const groups = (part: string) => (part === "" ? [] : part.split(":"));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return null;
  const all = [...left, ...Array<string>(missing).fill("0"), ...right];
  const hextets = all.map((group) =>
    /^[0-9a-f]{1,4}$/.test(group) ? Number.parseInt(group, 16) : Number.NaN,
  );
  return hextets.some(Number.isNaN) ? null : hextets;
}
