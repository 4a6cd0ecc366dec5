import { UserError } from "../errors.ts";

/**
 * The broker answered and refused what the queue URL gave it (a user or password, a vhost,
 * a database number): unlike a broker that does not answer (QueueUnreachableError), waiting
 * cannot fix it, so a start fails at once with this one line and the agent does not retry.
 * The message names the user, never the password.
 */
export class QueueRefusedError extends UserError {
  override readonly name: string = "QueueRefusedError";
}
