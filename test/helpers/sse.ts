/** Reads a server-sent event stream until it ends, handing each event's data to `onEvent`. */
export async function readSse(
  response: Response,
  onEvent: (event: { event: string; id: string; data: string }) => void,
) {
  if (!response.body) throw new Error("no body");
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields: Record<string, string> = { event: "message", id: "", data: "" };
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue;
        const name = line.slice(0, colon);
        fields[name] =
          (fields[name] && name === "data" ? `${fields[name]}\n` : "") +
          line.slice(colon + 1).trimStart();
      }
      onEvent({ event: fields.event ?? "message", id: fields.id ?? "", data: fields.data ?? "" });
      end = buffer.indexOf("\n\n");
    }
  }
}

/** Follows `/v1/jobs/{id}/events` to the end; returns the statuses seen, in order. */
export async function followJob(
  api: (path: string) => Promise<Response>,
  jobId: string,
  onStatus?: (status: string) => void,
): Promise<{ statuses: string[]; seqs: number[] }> {
  const response = await api(`/v1/jobs/${jobId}/events`);
  if (response.status !== 200)
    throw new Error(`events: ${response.status} ${await response.text()}`);
  const statuses: string[] = [];
  const seqs: number[] = [];
  await readSse(response, ({ event: name, data }) => {
    // `progress` events travel beside the status events.
    if (name !== "status") return;
    const event = JSON.parse(data) as { status: string; seq: number };
    statuses.push(event.status);
    seqs.push(event.seq);
    onStatus?.(event.status);
  });
  return { statuses, seqs };
}
