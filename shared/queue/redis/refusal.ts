import { ErrorReply } from "redis";
import { QueueRefusedError } from "../refused.ts";

/** Replies that say "not yet" (a server loading its data, a replica without its primary). */
const TRANSIENT_REPLY = /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)\b/;

/**
 * What a failed connect says about the URL, when Redis answered the handshake with an error
 * (WRONGPASS or NOAUTH for the user and password, ERR for a database number out of range)
 * rather than could not be reached: the handshake is the URL's own commands (HELLO, AUTH,
 * SELECT), so such a reply is the URL's to fix. Undefined for a network error or a reply
 * that waiting fixes.
 */
export function redisRefusal(error: unknown, where: string): QueueRefusedError | undefined {
  if (!(error instanceof ErrorReply) || TRANSIENT_REPLY.test(error.message)) return undefined;
  return new QueueRefusedError(
    `Redis at ${where} refused the connection: ${error.message} (check the user, password and database number in the queue URL)`,
  );
}
