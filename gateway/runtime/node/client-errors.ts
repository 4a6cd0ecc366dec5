import { maxHeaderSize } from "node:http";
import type { Duplex } from "node:stream";
import { HttpProblem } from "../../../shared/errors.ts";
import { problemFor } from "../../http/problem.ts";

/** What `server.on` needs: the type of `serve()`'s answer varies with its options. */
interface ClientErrorSource {
  on(
    event: "clientError",
    listener: (error: Error & { code?: string }, socket: Duplex) => void,
  ): unknown;
}

/** Node's parser's refusal as ours: the code and sentence the client reads. */
function problemOf(code: string | undefined): HttpProblem {
  if (code === "HPE_HEADER_OVERFLOW") {
    const kib = Math.floor(maxHeaderSize / 1024);
    return new HttpProblem(
      431,
      "headers_too_large",
      "Request headers too large",
      `The request line and headers together may take at most ${kib} KiB; send a shorter URL or fewer headers.`,
    );
  }
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return new HttpProblem(
      408,
      "request_timeout",
      "Request timeout",
      "The request did not arrive in time.",
    );
  }
  return new HttpProblem(400, "bad_request", "Bad request", "The request is not valid HTTP/1.1.");
}

/**
 * Requests Node's HTTP parser refuses never reach the app: Node answered them with a bare
 * status line and an empty body (431 for headers past `maxHeaderSize`, 400 for anything it
 * cannot parse), the only refusals of the API that were not problem+json. Answered here as
 * every other is, then the connection is closed (its stream cannot be trusted to go on).
 */
export function answerClientErrors(server: ClientErrorSource): void {
  server.on("clientError", (error, socket) => {
    // Nothing to answer on a connection the client closed, or one already answering an
    // earlier request (a pipelined one's refusal would land inside that answer), as Node's
    // own handler does.
    const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
      ?.headersSent;
    if (error.code === "ECONNRESET" || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    const answer = problemFor(problemOf(error.code), "/");
    const { instance: _unknown, ...body } = answer.body;
    const json = JSON.stringify(body);
    const head = [
      `HTTP/1.1 ${answer.status} ${answer.body.title}`,
      "Content-Type: application/problem+json",
      `Content-Length: ${Buffer.byteLength(json)}`,
      "Connection: close",
    ];
    socket.end(`${head.join("\r\n")}\r\n\r\n${json}`);
  });
}
