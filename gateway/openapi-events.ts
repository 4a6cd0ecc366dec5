import { problems, ref } from "./openapi-parts.ts";

/** `GET /v1/events`: the stream of every change of the caller's jobs. */
export function eventPaths() {
  const list = (name: string, description: string) => ({
    name,
    in: "query",
    required: false,
    description,
    schema: { type: "string" },
  });
  return {
    "/v1/events": {
      get: {
        summary: "Follow every change of your jobs (server-sent events)",
        description: [
          "One `status` event per state change of any of your jobs, in commit order, from every gateway.",
          "Beside them, `progress` events (JobProgressEvent, with `model`) carry a running job's latest progress as its model reports it: latest only, without an `id`, so they neither move the cursor nor are replayed on a resume (read `GET /v1/jobs/{id}` for the latest). `batch` and `metadata` filters keep the progress of jobs whose status events this stream kept; a `status` filter keeps progress only if it keeps `running`.",
          "A stream opened without `Last-Event-ID` starts with `event: ready` (`data: {}`) whose `id` is its starting cursor. Each event's `id` is a cursor: reconnect with `Last-Event-ID` (or `?last_event_id=`) to resume with nothing missed and nothing repeated, on any gateway, up to `eventsResumeWindowSeconds` (1 h) back; older answers `410 resume_window_exceeded`.",
          "Filters apply to each event and leave the cursor exact: a resume from a filtered stream's last `id` gets the next matching event, none repeated. A `: keep-alive` comment every 15 s keeps proxies from closing an idle stream; streams end after 15 min (resume). A client that stops reading with more than 1 000 events waiting (`eventsStreamBuffer`) for 1 s, or falls 10 000 behind, gets an `error` event (`stream_overflow`) and the stream closes (cut 5 s later if it still reads nothing): resume.",
          "At most 100 streams per tenant per gateway (`429 too_many_streams`).",
        ].join(" "),
        parameters: [
          list("model", "Only these models (comma-separated or repeated)."),
          list("status", "Only these statuses (comma-separated or repeated)."),
          list("batch", "Only the jobs of these batches (`bat_…`, comma-separated or repeated)."),
          {
            name: "metadata.KEY",
            in: "query",
            required: false,
            description:
              "Only jobs whose metadata has KEY equal to this value (`?metadata.customer=acme`); up to 4, all must match. As on `GET /v1/jobs`.",
            schema: { type: "string" },
          },
          {
            name: "Last-Event-ID",
            in: "header",
            required: false,
            description: "The `id` of the last event received: resume after it.",
            schema: { type: "string" },
          },
        ],
        responses: {
          "200": {
            description:
              "An event stream of FeedEvent (`status`) and JobProgressEvent (`progress`)",
            content: {
              "text/event-stream": {
                schema: { oneOf: [ref("FeedEvent"), ref("JobProgressEvent")] },
                example:
                  'event: progress\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","attempt":1,"fraction":0.6,"stage":"recognition","message":"3 of 6 lines","updated_at":"2026-12-01T22:01:58.100Z","model":"ocr"}\n\nid: 1796162518532.r42\nevent: status\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","seq":3,"status":"succeeded","at":"2026-12-01T22:01:58.532Z","attempt":1,"error":null,"model":"ocr"}\n\n',
              },
            },
          },
          ...problems(400, 401, 403, 410, 422, 429),
        },
      },
    },
  };
}
