import { describe, expect, it } from "vitest";
import { cursorTokens, webCursorCipher } from "../../gateway/feed/cursor-token.ts";
import { nodeCursorCipher } from "../../gateway/runtime/node/cursor-cipher.ts";

const SECRET = "a secret every gateway of the deployment shares";
const CURSOR = "1800000000000.x123456_3_job_01j9zq7c7v4d0m3y7p7c2n2x3e";

const ciphers = { node: nodeCursorCipher, web: webCursorCipher };

/** An id as the gateway sealed them before the cipher was the runtime's (Web Crypto's deriveKey). */
async function sealedTheOldWay(tenantId: string, cursor: string): Promise<string> {
  const encoder = new TextEncoder();
  const base = await crypto.subtle.importKey("raw", encoder.encode(SECRET), "HKDF", false, [
    "deriveKey",
  ]);
  const key = await crypto.subtle.deriveKey(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: encoder.encode("gantry"),
      info: encoder.encode("gantry/v1/events-cursor"),
    },
    base,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt"],
  );
  const nonce = crypto.getRandomValues(new Uint8Array(12));
  const box = await crypto.subtle.encrypt(
    {
      name: "AES-GCM",
      iv: nonce,
      additionalData: encoder.encode(`gantry events cursor\u0000${tenantId}`),
    },
    key,
    encoder.encode(cursor),
  );
  const bytes = Buffer.concat([nonce, new Uint8Array(box)]);
  return `e1.${bytes.toString("base64url")}`;
}

describe("event ids sealed on node:crypto and on Web Crypto", () => {
  for (const [sealer, sealWith] of Object.entries(ciphers)) {
    for (const [opener, openWith] of Object.entries(ciphers)) {
      it(`an id sealed on ${sealer} opens on ${opener}, for its tenant only`, async () => {
        const sealing = cursorTokens(async () => SECRET, sealWith);
        const opening = cursorTokens(async () => SECRET, openWith);
        const id = await sealing.seal("ten_a", CURSOR);
        expect(id).toMatch(/^e1\.[A-Za-z0-9_-]+$/);
        expect(await opening.open("ten_a", id)).toBe(CURSOR);
        expect(await opening.open("ten_b", id)).toBeNull();
        // One character changed anywhere in the box: GCM's tag no longer matches.
        const body = id.slice(3);
        const at = Math.floor(body.length / 2);
        const altered = `e1.${body.slice(0, at)}${body[at] === "A" ? "B" : "A"}${body.slice(at + 1)}`;
        expect(await opening.open("ten_a", altered)).toBeNull();
        // Another deployment's secret opens nothing.
        expect(await cursorTokens(async () => "another", openWith).open("ten_a", id)).toBeNull();
      });
    }
    it(`ids sealed before the cipher was the runtime's still open on ${sealer}`, async () => {
      const tokens = cursorTokens(async () => SECRET, sealWith);
      expect(await tokens.open("ten_a", await sealedTheOldWay("ten_a", CURSOR))).toBe(CURSOR);
    });
  }

  it("never seals one cursor twice alike", async () => {
    const tokens = cursorTokens(async () => SECRET, nodeCursorCipher);
    const ids = new Set(
      await Promise.all(Array.from({ length: 500 }, () => tokens.seal("ten_a", CURSOR))),
    );
    expect(ids.size).toBe(500);
  });
});
