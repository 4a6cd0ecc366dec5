import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { type CursorCipher, NONCE_BYTES, TAG_BYTES } from "../../feed/cursor-token.ts";

/**
 * Nonces drawn from the CSPRNG a page at a time, each used once: a `randomBytes` call per
 * event id cost more than the cipher (as the agent signing's nonces, agent-signing-node.ts).
 */
let pool = Buffer.alloc(0);
let offset = 0;

function nonce(): Buffer {
  if (offset + NONCE_BYTES > pool.byteLength) {
    pool = randomBytes(4096);
    offset = 0;
  }
  offset += NONCE_BYTES;
  return pool.subarray(offset - NONCE_BYTES, offset);
}

/** The cursor ids' AES-256-GCM on node:crypto: synchronous, one call per id. */
export const nodeCursorCipher: CursorCipher = async (raw) => {
  const key = Buffer.from(raw);
  return {
    seal(aad, plain) {
      const iv = nonce();
      const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(aad);
      return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    },
    open(aad, sealed) {
      const tagAt = sealed.byteLength - TAG_BYTES;
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(0, NONCE_BYTES))
          .setAAD(aad)
          .setAuthTag(sealed.subarray(tagAt));
        return Buffer.concat([
          decipher.update(sealed.subarray(NONCE_BYTES, tagAt)),
          decipher.final(),
        ]);
      } catch {
        return null;
      }
    },
  };
};
