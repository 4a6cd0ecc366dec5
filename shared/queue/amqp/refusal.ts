import { QueueRefusedError } from "../refused.ts";

/**
 * What a failed connect says about the URL, when RabbitMQ refused it rather than could not
 * be reached: a login refused (403 ACCESS-REFUSED at the handshake) or a vhost refused
 * (the broker closes the connection at `connection.open`, which amqplib reports without
 * RabbitMQ's reason: the vhost does not exist, the user has no permission on it, or its
 * connection limit is reached). Undefined for anything else (a network error, a broker
 * still booting), which is worth waiting for.
 */
export function amqpRefusal(
  error: Error,
  url: string,
  where: string,
): QueueRefusedError | undefined {
  const { user, vhost } = credentialsOf(url);
  if (/ACCESS[-_]REFUSED/.test(error.message)) {
    return new QueueRefusedError(
      `RabbitMQ at ${where} refused the login of user "${user}": check the user and password in the queue URL`,
    );
  }
  if (/^Expected ConnectionOpenOk; got <ConnectionClose/.test(error.message)) {
    return new QueueRefusedError(
      `RabbitMQ at ${where} refused vhost "${vhost}": it does not exist, user "${user}" has no permission on it, or its connection limit is reached (the vhost is the queue URL's path; "/" is %2F)`,
    );
  }
  return undefined;
}

/** The user and vhost amqplib takes from the URL (guest and "/" when it names none). */
function credentialsOf(url: string): { user: string; vhost: string } {
  try {
    const parsed = new URL(url);
    const path = parsed.pathname.slice(1);
    return {
      user: parsed.username ? decodeURIComponent(parsed.username) : "guest",
      vhost: path ? decodeURIComponent(path) : "/",
    };
  } catch {
    return { user: "guest", vhost: "/" };
  }
}
