import { describe, expect, it } from "vitest";
import {
  type AgentCrypto,
  agentSignature,
  sha256Hex,
  signAgentRequest,
  verifyAgentSignature,
  webAgentCrypto,
} from "../../shared/agent-signing.ts";
import { nodeAgentCrypto } from "../../shared/agent-signing-node.ts";

/**
 * The two implementations of the signing primitives (Web Crypto for Workers, node:crypto for
 * the agent and the Node gateway) must agree byte for byte: an agent signs with one and a
 * gateway on the other runtime checks with the other.
 */
const SECRET = "gas_a-secret-of-the-right-length";
const parts = {
  method: "post",
  path: "/internal/v1/jobs/job_x/claim",
  timestamp: 1_700_000_000,
  nonce: "0123456789abcdef0123456789abcdef",
  bodySha256: "",
};
const impls: [string, AgentCrypto][] = [
  ["web", webAgentCrypto],
  ["node", nodeAgentCrypto],
];

describe("agent signing primitives", () => {
  it("hash and sign alike on Web Crypto and node:crypto", async () => {
    for (const body of ["", '{"v":1}', new Uint8Array([0, 255, 1, 128])]) {
      expect(await sha256Hex(body, nodeAgentCrypto)).toBe(await sha256Hex(body, webAgentCrypto));
    }
    expect(await sha256Hex("")).toBe(
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
    const web = await agentSignature(SECRET, parts, webAgentCrypto);
    expect(await agentSignature(SECRET, parts, nodeAgentCrypto)).toBe(web);
    expect(web).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    // Keys are cached per secret: another secret signs differently.
    expect(await agentSignature("gas_another-secret-entirely", parts, webAgentCrypto)).not.toBe(
      web,
    );
  });

  it.each(impls)("verifies across implementations (%s checking)", async (_name, checker) => {
    for (const [, signer] of impls) {
      const signature = await agentSignature(SECRET, parts, signer);
      expect(await verifyAgentSignature(SECRET, parts, signature, checker)).toBe(true);
      expect(await verifyAgentSignature("gas_wrong-secret", parts, signature, checker)).toBe(false);
      const other = { ...parts, nonce: "fedcba9876543210fedcba9876543210" };
      expect(await verifyAgentSignature(SECRET, other, signature, checker)).toBe(false);
    }
  });

  it.each(impls)(
    "accepts any base64 spelling of the MAC, and nothing else (%s)",
    async (_, impl) => {
      const signature = await agentSignature(SECRET, parts, impl);
      expect(await verifyAgentSignature(SECRET, parts, signature.replace(/=$/, ""), impl)).toBe(
        true,
      );
      for (const wrong of ["", "not base64!", signature.slice(0, 40), `${signature}AAAA`]) {
        expect(await verifyAgentSignature(SECRET, parts, wrong, impl)).toBe(false);
      }
    },
  );

  it.each(impls)("makes fresh 32-hex-digit nonces (%s)", (_name, impl) => {
    // More than one pool page's worth, so the node implementation refills in between.
    const nonces = Array.from({ length: 600 }, () => impl.nonce());
    for (const nonce of nonces) expect(nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(nonces).size).toBe(nonces.length);
  });

  it("signs a request the same way whichever primitives sign it", async () => {
    const request = {
      agentId: "agt_1",
      secret: SECRET,
      method: "POST",
      url: "http://gateway.test/internal/v1/jobs/job_x/claim?ignored=1",
      body: '{"v":1}',
      now: 1_700_000_000_500,
      nonce: parts.nonce,
    };
    const web = await signAgentRequest(request);
    expect(await signAgentRequest({ ...request, crypto: nodeAgentCrypto })).toEqual(web);
    expect(web).toMatchObject({ "gantry-timestamp": "1700000000", "gantry-nonce": parts.nonce });
  });
});
