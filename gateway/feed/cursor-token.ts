import { type FeedCursor, parseCursor, type TenantEventRow } from "../store/tenant-events.ts";

/**
 * The ids `GET /v1/events` sends (and takes back as `Last-Event-ID`): a cursor sealed for
 * one tenant. Inside is the store's cursor (tenant-events.ts: the event's time and its
 * position, a row id or a Postgres transaction id, both counting every tenant's work); the
 * client sees neither. AES-256-GCM with a fresh random nonce per id, the tenant id as
 * associated data:
 *
 * - opaque: two ids never look alike, so a tenant cannot watch the global position move
 *   (its `ready` id used to change whenever another tenant's jobs did);
 * - authenticated and bound to the tenant: an id that was altered, made up, or sent to
 *   another tenant does not open (GCM's tag covers the tenant), so it cannot name a
 *   position, and the time checked against the resume window is the row's own, as the
 *   gateway wrote it, never the client's;
 * - the same on every gateway: the key is derived (HKDF-SHA-256) from a secret that all the
 *   gateways on the database share (`stores.sharedSecret`, made on first use), so a stream
 *   cut on one gateway resumes exactly on another. Web Crypto only: Node and Workers alike.
 *
 * An id is `e1.` and the base64url of nonce ‖ ciphertext ‖ tag (about 100 characters).
 */
export interface CursorTokens {
  /** The id to send for `cursor` to `tenantId`. */
  seal(tenantId: string, cursor: FeedCursor): Promise<string>;
  /** The id of a row, sealed once however many of the tenant's streams send it. */
  idOf(tenantId: string, row: TenantEventRow): Promise<string>;
  /** The cursor inside an id, or null when it is not one this deployment sealed for `tenantId`. */
  open(tenantId: string, token: string): Promise<FeedCursor | null>;
}

/** The `gateway_secrets` row the key is derived from. */
export const CURSOR_SECRET_NAME = "events_cursor";

const PREFIX = "e1.";
export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
/** Far above any real id: a longer header is refused before any work. */
const MAX_TOKEN_CHARS = 512;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** AES-256-GCM under the cursor key. */
export interface KeyedCipher {
  /** nonce ‖ ciphertext ‖ tag, under a fresh random nonce of `NONCE_BYTES`. */
  seal(
    aad: Uint8Array<ArrayBuffer>,
    plain: Uint8Array<ArrayBuffer>,
  ): Uint8Array | Promise<Uint8Array>;
  /** What `seal` sealed with the same `aad`, or null when `sealed` does not open. */
  open(
    aad: Uint8Array<ArrayBuffer>,
    sealed: Uint8Array<ArrayBuffer>,
  ): Uint8Array | null | Promise<Uint8Array | null>;
}

/**
 * The runtime's AES-256-GCM for a raw 32-byte key: Web Crypto by default (Node and Workers
 * alike); the Node gateway passes node:crypto's (runtime/node/cursor-cipher.ts), synchronous:
 * a stream following a busy tenant seals an id per event, and each Web Crypto call is a
 * round trip through the thread pool.
 */
export type CursorCipher = (key: Uint8Array<ArrayBuffer>) => Promise<KeyedCipher>;

export const webCursorCipher: CursorCipher = async (raw) => {
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return {
    async seal(aad, plain) {
      const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
      const box = await crypto.subtle.encrypt(
        { name: "AES-GCM", iv: nonce, additionalData: aad },
        key,
        plain,
      );
      const bytes = new Uint8Array(NONCE_BYTES + box.byteLength);
      bytes.set(nonce);
      bytes.set(new Uint8Array(box), NONCE_BYTES);
      return bytes;
    },
    async open(aad, sealed) {
      try {
        const plain = await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: sealed.subarray(0, NONCE_BYTES), additionalData: aad },
          key,
          sealed.subarray(NONCE_BYTES),
        );
        return new Uint8Array(plain);
      } catch {
        return null;
      }
    },
  };
};

export function cursorTokens(
  secret: () => Promise<string>,
  cipher: CursorCipher = webCursorCipher,
): CursorTokens {
  // Only the cipher itself is kept, never a promise: on Workers a promise begun in one
  // request cannot be awaited by another. Two requests that find none yet both derive it.
  let keyed: KeyedCipher | null = null;
  const keyNow = async () => {
    if (keyed) return keyed;
    const derived = await cipher(await deriveKey(await secret()));
    keyed ??= derived;
    return keyed;
  };
  const sealed = new WeakMap<TenantEventRow, Promise<string>>();

  const seal = async (tenantId: string, cursor: FeedCursor) => {
    const bytes = await (await keyNow()).seal(associatedData(tenantId), encoder.encode(cursor));
    return PREFIX + toBase64Url(bytes);
  };

  return {
    seal,
    idOf(tenantId, row) {
      let id = sealed.get(row);
      if (!id) {
        id = seal(tenantId, row.cursor);
        sealed.set(row, id);
      }
      return id;
    },
    async open(tenantId, token) {
      if (token.length > MAX_TOKEN_CHARS || !token.startsWith(PREFIX)) return null;
      const bytes = fromBase64Url(token.slice(PREFIX.length));
      if (!bytes || bytes.length <= NONCE_BYTES + TAG_BYTES) return null;
      // Altered, made up, sealed for another tenant or by another deployment: null.
      const plain = await (await keyNow()).open(associatedData(tenantId), bytes);
      if (!plain) return null;
      let cursor: string;
      try {
        cursor = decoder.decode(plain);
      } catch {
        return null;
      }
      return parseCursor(cursor) ? cursor : null;
    },
  };
}

/**
 * The key's 32 bytes, HKDF-SHA-256 of the shared secret: the bytes Web Crypto's `deriveKey`
 * to AES-256-GCM makes, so ids sealed before this took raw bytes still open.
 */
async function deriveKey(secret: string): Promise<Uint8Array<ArrayBuffer>> {
  const base = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, [
    "deriveBits",
  ]);
  const bits = await crypto.subtle.deriveBits(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: encoder.encode("gantry"),
      // A key of its own: nothing else derived from the secret can open or forge an id.
      info: encoder.encode("gantry/v1/events-cursor"),
    },
    base,
    256,
  );
  return new Uint8Array(bits);
}

function associatedData(tenantId: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`gantry events cursor\u0000${tenantId}`);
}

function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text) || text.length % 4 === 1) return null;
  try {
    const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    return null;
  }
}
