import fc from "fast-check";

/**
 * Random and malformed requests for the gateway, aimed well enough to get past the first
 * check most of the time: each picks a real route with a plausible body more often than
 * not, then spoils something (auth, content type, body, id, query, headers).
 */
export interface FuzzRequest {
  method: string;
  path: string;
  query: string;
  authorization: string | null;
  contentType: string | undefined;
  body: string | undefined;
  headers: Record<string, string>;
}

export interface FuzzContext {
  /** Bearer values that authenticate (or did: a revoked key), by how often to use them. */
  keys: { admin: string; reader: string; other: string; revoked: string };
  /** Ids that exist (a job, an upload, tenants, a key, models). */
  ids: () => readonly string[];
}

const printable = fc.string({ maxLength: 40 });

/** What a header value may hold (bytes 0x20-0xFF but DEL); anything else fails in fetch. */
const headerValue = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((code) => code !== 0x7f)
    .map((code) => String.fromCharCode(code)),
  minLength: 1,
  maxLength: 300,
});

function idArb(ctx: FuzzContext) {
  return fc.oneof(
    { weight: 4, arbitrary: fc.nat().map((n) => ctx.ids()[n % ctx.ids().length]!) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("job_00000000000000000000000000", "..", "%2e%2e", "%", "%zz"),
    },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 20 }).map(encodeURIComponent) },
    { weight: 1, arbitrary: fc.nat({ max: 5000 }).map((n) => "x".repeat(n)) },
  );
}

/** A job request that should be accepted, bar the tenant's state (ids, keys reused). */
const validJobBody = fc.record(
  {
    model: fc.constant("noop"),
    input: fc.record(
      { delay_ms: fc.integer({ min: 0, max: 60_000 }), note: fc.jsonValue({ maxDepth: 2 }) },
      { requiredKeys: [] },
    ),
    priority: fc.integer({ min: 0, max: 9 }),
    ttl_seconds: fc.integer({ min: 10, max: 7 * 24 * 3600 }),
    webhook: fc.record({ url: fc.webUrl({ validSchemes: ["https"] }) }),
  },
  { requiredKeys: ["model", "input"] },
);

const wildJobBody = (ctx: FuzzContext) =>
  fc.record(
    {
      model: fc.oneof(
        { weight: 5, arbitrary: fc.constantFrom("noop", "ocr") },
        { weight: 1, arbitrary: fc.oneof(fc.constantFrom("OCR", "", "../x"), printable) },
      ),
      input: fc.oneof(
        {
          weight: 4,
          arbitrary: fc.record(
            {
              image: fc.oneof(
                fc.nat().map((n) => ctx.ids()[n % ctx.ids().length]!),
                fc.constantFrom("https://example.com/a.png", "http://127.0.0.1/", "upl_x"),
                fc.jsonValue(),
              ),
              delay_ms: fc.oneof(fc.integer({ min: -5, max: 70_000 }), fc.double(), printable),
              fail: fc.oneof(
                fc.constantFrom("permanent", "transient", "sometimes"),
                fc.jsonValue(),
              ),
              lang: fc.oneof(fc.constantFrom("en", "fr"), fc.jsonValue()),
              pad: fc.nat({ max: 4 }).map((n) => "p".repeat(n ** 8)),
            },
            { requiredKeys: [] },
          ),
        },
        { weight: 1, arbitrary: fc.jsonValue() },
      ),
      priority: fc.oneof(fc.integer({ min: -2, max: 12 }), fc.double(), printable),
      ttl_seconds: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.constant(null)),
      webhook: fc.oneof(
        fc.record({ url: fc.oneof(fc.webUrl(), printable), events: fc.jsonValue() }),
        fc.record({ url: fc.webUrl() }),
        fc.jsonValue(),
      ),
      extra: fc.jsonValue(),
    },
    { requiredKeys: ["model", "input"] },
  );

const jobBody = (ctx: FuzzContext) =>
  fc.oneof({ weight: 2, arbitrary: validJobBody }, { weight: 3, arbitrary: wildJobBody(ctx) });

const wildAdminBody = fc.record(
  {
    id: fc.oneof(
      fc.constantFrom("ten_fuzz", "ten_new"),
      printable.map((s) => `ten_${s}`),
    ),
    name: fc.oneof(printable, fc.integer()),
    plan: fc.oneof(fc.constantFrom("free", "pro", "enterprise", "gold"), fc.jsonValue()),
    limits: fc.oneof(
      fc.record(
        {
          burst: fc.oneof(fc.integer(), fc.double()),
          priority_default: fc.integer({ min: -1, max: 10 }),
          max_queued_jobs: fc.integer(),
        },
        { requiredKeys: [] },
      ),
      fc.constant(null),
      fc.jsonValue(),
    ),
    scopes: fc.oneof(
      fc.array(fc.constantFrom("jobs:read", "jobs:write", "admin", "root"), { maxLength: 4 }),
      fc.jsonValue(),
    ),
  },
  { requiredKeys: [] },
);

const wildUploadBody = fc.record(
  {
    content_type: fc.oneof(fc.constantFrom("image/png", "application/pdf", "IMAGE/PNG"), printable),
    size_bytes: fc.oneof(fc.integer(), fc.double(), fc.constant(1e300), printable),
  },
  { requiredKeys: [] },
);

const uploadBody = fc.oneof(
  wildUploadBody,
  fc.record({
    content_type: fc.constantFrom("image/png", "image/jpeg", "image/webp"),
    size_bytes: fc.integer({ min: 1, max: 10_000_000 }),
  }),
);

/** Tenants and keys the admin API should make. */
const validAdminBody = fc.record(
  {
    name: fc.string({ minLength: 1, maxLength: 30 }).filter((name) => name.trim() !== ""),
    plan: fc.constantFrom("free", "pro", "enterprise"),
    scopes: fc.subarray(["jobs:read", "jobs:write", "admin"], { minLength: 1 }),
  },
  { requiredKeys: ["name"] },
);

const adminBody = fc.oneof(wildAdminBody, validAdminBody);

const json = (arb: fc.Arbitrary<unknown>) => arb.map((value) => JSON.stringify(value));

/** Bodies that are not what any route wants. */
const junkBody = fc.oneof(
  fc.json(),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.constantFrom("{", "[1,2", '{"model":', "null", "\u0000", ""),
  fc.nat({ max: 3 }).map((n) => `"${"x".repeat(30_000 * n)}"`),
  fc.constant(undefined),
);

/** Each route with the body it expects, so most requests reach its validation. */
function routes(ctx: FuzzContext) {
  const anyId = idArb(ctx);
  const route = (method: string, template: string, body?: fc.Arbitrary<string>) =>
    fc.tuple(anyId, anyId, body ?? fc.constant(undefined)).map(([a, b, payload]) => ({
      method,
      path: template.replace("{id}", a).replace("{id}", b),
      body: payload,
    }));
  return fc.oneof(
    { weight: 10, arbitrary: route("POST", "/v1/jobs", json(jobBody(ctx))) },
    { weight: 2, arbitrary: route("GET", "/v1/jobs") },
    { weight: 2, arbitrary: route("GET", "/v1/jobs/{id}") },
    { weight: 2, arbitrary: route("POST", "/v1/jobs/{id}/cancel") },
    { weight: 1, arbitrary: route("GET", "/v1/jobs/{id}/events") },
    { weight: 1, arbitrary: route("GET", "/v1/jobs/{id}/webhooks") },
    { weight: 1, arbitrary: route("POST", "/v1/jobs/{id}/webhooks/{id}/redeliver") },
    { weight: 3, arbitrary: route("POST", "/v1/uploads", json(uploadBody)) },
    { weight: 1, arbitrary: route("GET", "/v1/models") },
    { weight: 1, arbitrary: route("GET", "/v1/models/{id}") },
    { weight: 1, arbitrary: route("GET", "/v1/webhooks/secret") },
    { weight: 1, arbitrary: route("POST", "/v1/webhooks/secret/rotate", json(fc.jsonValue())) },
    { weight: 3, arbitrary: route("POST", "/v1/admin/tenants", json(adminBody)) },
    { weight: 1, arbitrary: route("GET", "/v1/admin/tenants") },
    { weight: 1, arbitrary: route("GET", "/v1/admin/tenants/{id}") },
    { weight: 2, arbitrary: route("PATCH", "/v1/admin/tenants/{id}", json(adminBody)) },
    { weight: 2, arbitrary: route("POST", "/v1/admin/tenants/{id}/keys", json(adminBody)) },
    { weight: 1, arbitrary: route("GET", "/v1/admin/tenants/{id}/keys") },
    { weight: 1, arbitrary: route("POST", "/v1/admin/keys/{id}/revoke") },
    { weight: 1, arbitrary: route("GET", "/v1/admin/agents") },
    { weight: 1, arbitrary: route("POST", "/v1/admin/agents", json(fc.jsonValue())) },
    { weight: 1, arbitrary: route("POST", "/v1/admin/agents/{id}/revoke") },
    { weight: 1, arbitrary: route("PUT", "/v1/blobs/inputs/{id}", junkBody.map(String)) },
    { weight: 1, arbitrary: route("GET", "/v1/blobs/{id}") },
    { weight: 1, arbitrary: route("POST", "/internal/v1/jobs/{id}/claim", json(fc.jsonValue())) },
    { weight: 1, arbitrary: route("POST", "/internal/v1/jobs/{id}/events", json(fc.jsonValue())) },
    {
      weight: 1,
      arbitrary: route("POST", "/internal/v1/jobs/{id}/heartbeat", json(fc.jsonValue())),
    },
    { weight: 1, arbitrary: route("POST", "/internal/v1/agents/register", json(fc.jsonValue())) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom("/healthz", "/readyz", "/openapi.json", "/docs")
        .chain((path) => route("GET", path)),
    },
    { weight: 1, arbitrary: route("GET", "/v1/{id}") },
    { weight: 1, arbitrary: route("GET", "/{id}") },
  );
}

const queryArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant("") },
  {
    weight: 2,
    arbitrary: fc
      .dictionary(
        fc.oneof(fc.constantFrom("limit", "cursor", "status", "sig", "exp"), printable),
        fc.oneof(
          fc.constantFrom("0", "-1", "1e9", "20", "queued", "nope", "job_1", ""),
          printable,
          fc.integer().map(String),
        ),
        { maxKeys: 4 },
      )
      .map((entries) => `?${new URLSearchParams(entries)}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom("?limit=%", "?&&==&", "?status=%E0%A4%A", "?limit=1&limit=2"),
  },
);

function authArb(ctx: FuzzContext) {
  return fc.oneof(
    { weight: 8, arbitrary: fc.constant(`Bearer ${ctx.keys.admin}`) },
    {
      weight: 3,
      arbitrary: fc
        .constantFrom(ctx.keys.reader, ctx.keys.other, ctx.keys.revoked)
        .map((key) => `Bearer ${key}`),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom("", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "bearer gk_live_x"),
    },
    { weight: 1, arbitrary: headerValue.map((value) => `Bearer ${value}`) },
    { weight: 1, arbitrary: headerValue },
    { weight: 1, arbitrary: fc.constant(null) },
  );
}

const contentTypeArb = fc.oneof(
  { weight: 8, arbitrary: fc.constant("application/json") },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "application/json; charset=utf-8",
      "application/problem+json",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "image/png",
    ),
  },
  { weight: 1, arbitrary: headerValue },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

const headersArb = fc.record(
  {
    // Mostly fresh keys, some reused (replays, reuse with another body), some malformed.
    "idempotency-key": fc.oneof(
      { weight: 3, arbitrary: fc.uuid() },
      { weight: 1, arbitrary: fc.constantFrom("k1", "k2", "k3") },
      { weight: 1, arbitrary: headerValue },
    ),
    traceparent: fc.oneof(
      headerValue,
      fc.constant("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ),
    "last-event-id": fc.oneof(fc.integer().map(String), headerValue),
    accept: fc.constantFrom("*/*", "text/event-stream", "application/xml"),
    "x-forwarded-for": headerValue,
  },
  { requiredKeys: [] },
);

const ANY_METHOD = fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS");

export function fuzzRequests(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      target: routes(ctx),
      // One request in five uses another method on the same path.
      otherMethod: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, ANY_METHOD),
      // One in five sends a body no route wants.
      junk: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, junkBody),
      query: queryArb,
      authorization: authArb(ctx),
      contentType: contentTypeArb,
      headers: headersArb,
    })
    .map(({ target, otherMethod, junk, ...rest }) => {
      const method = otherMethod ?? target.method;
      const body = method === "GET" || method === "HEAD" ? undefined : (junk ?? target.body);
      return { ...rest, method, path: target.path, body };
    });
}
