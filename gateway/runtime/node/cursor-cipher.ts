import { createCipheriv, createDecipheriv } from "node:crypto";
import { pooledRandomBytes } from "../../../shared/random-pool.ts";
import { type CursorCipher, NONCE_BYTES, TAG_BYTES } from "../../feed/cursor-token.ts";

/** The cursor ids' AES-256-GCM on node:crypto: synchronous, one call per id. */
export const nodeCursorCipher: CursorCipher = async (raw) => {
  const key = Buffer.from(raw);
  return {
    seal(aad, plain) {
      const iv = pooledRandomBytes(NONCE_BYTES);
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
