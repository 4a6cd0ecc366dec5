import type { IncomingMessage } from "node:http";
import { bodyTooLarge } from "../../http/json-body.ts";

/**
 * The Node entry's `readRawBody`: the body of the IncomingMessage that @hono/node-server
 * passes in `env.incoming`, read into one buffer. Null once something else has started
 * reading it (the core then reads the Web Request as usual).
 */
export function readIncomingBody(env: unknown, maxBytes: number): Promise<Uint8Array> | null {
  const incoming = (env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (!incoming || incoming.readableDidRead || incoming.readableEnded) return null;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    incoming.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        incoming.destroy();
        reject(bodyTooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    });
    incoming.once("end", () =>
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
    );
    incoming.once("error", reject);
    incoming.once("aborted", () => reject(new Error("the client went away mid-body")));
  });
}
