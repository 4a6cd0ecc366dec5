/**
 * OpenTelemetry for the Node gateway and the agent, on only when the standard variables ask
 * for it: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with
 * `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` `http/protobuf` (the spec's default) or `http/json`,
 * `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (read by the SDK's env detector), and
 * `OTEL_SDK_DISABLED=true` to turn it off again. Off, this module imports nothing: the SDK
 * is loaded by `import()` only once tracing is asked for, so it costs nothing by default.
 */

import { UserError } from "../errors.ts";
import { formatTraceparent, parseTraceparent } from "../trace.ts";
import type { SpanOptions, Tracer, TraceSpan } from "./tracer.ts";

export interface Tracing {
  tracer: Tracer;
  /** Exports the spans still buffered, then stops. */
  shutdown(): Promise<void>;
}

type Env = Record<string, string | undefined>;

const PROTOCOLS = ["http/protobuf", "http/json"] as const;

/** Whether the environment asks for traces to be exported. */
export function tracingWanted(env: Env = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT);
}

/** Starts exporting spans when the environment asks for it; null (and no import) otherwise. */
export async function startTracing(
  defaultServiceName: string,
  env: Env = process.env,
): Promise<Tracing | null> {
  if (!tracingWanted(env)) return null;
  const protocol = (
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ??
    env.OTEL_EXPORTER_OTLP_PROTOCOL ??
    "http/protobuf"
  ).trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new UserError(
      `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use ${PROTOCOLS.join(" or ")}`,
    );
  }
  const url = exportUrl(env);
  const [api, sdk, resources, semconv, exporters] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/semantic-conventions"),
    protocol === "http/json"
      ? import("@opentelemetry/exporter-trace-otlp-http")
      : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  // Later merges win: our default name, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: defaultServiceName }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.BasicTracerProvider({
    resource,
    spanProcessors: [new sdk.BatchSpanProcessor(new exporters.OTLPTraceExporter({ url }))],
  });
  const otel = provider.getTracer("gantry");
  const kinds = {
    internal: api.SpanKind.INTERNAL,
    server: api.SpanKind.SERVER,
    client: api.SpanKind.CLIENT,
    producer: api.SpanKind.PRODUCER,
    consumer: api.SpanKind.CONSUMER,
  };
  type OtelSpan = ReturnType<typeof otel.startSpan>;
  type OtelContext = Parameters<typeof otel.startSpan>[2];

  const wrap = (span: OtelSpan): TraceSpan => {
    const context = span.spanContext();
    return {
      traceparent: formatTraceparent({
        traceId: context.traceId,
        spanId: context.spanId,
        flags: context.traceFlags,
      }),
      child: (name, options) =>
        start(name, options ?? {}, api.trace.setSpan(api.ROOT_CONTEXT, span)),
      setAttributes: (attributes) => void span.setAttributes(attributes),
      addEvent: (name, attributes) => void span.addEvent(name, attributes),
      fail: (message) => void span.setStatus({ code: api.SpanStatusCode.ERROR, message }),
      end: (endTime) => span.end(endTime),
    };
  };
  const start = (name: string, options: SpanOptions, parent: OtelContext): TraceSpan =>
    wrap(
      otel.startSpan(
        name,
        {
          kind: kinds[options.kind ?? "internal"],
          ...(options.attributes ? { attributes: options.attributes } : {}),
          ...(options.startTime === undefined ? {} : { startTime: options.startTime }),
        },
        parent,
      ),
    );
  const remote = (traceparent: string | null | undefined): OtelContext => {
    const parsed = parseTraceparent(traceparent);
    if (!parsed) return api.ROOT_CONTEXT;
    return api.trace.setSpanContext(api.ROOT_CONTEXT, {
      traceId: parsed.traceId,
      spanId: parsed.spanId,
      traceFlags: parsed.flags,
      isRemote: true,
    });
  };
  return {
    tracer: { startSpan: (name, options = {}) => start(name, options, remote(options.parent)) },
    shutdown: () => provider.shutdown(),
  };
}

/**
 * Where spans go: the signal's own endpoint as given, else the general one with the traces
 * path (spec). Checked here, so that a bad value stops the process naming its variable
 * rather than as the exporter's internal error, or (another scheme) exporting nowhere.
 */
function exportUrl(env: Env): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const name = own ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
  const value = own || (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "");
  const url = own || `${value.replace(/\/+$/, "")}/v1/traces`;
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new UserError(`${name}=${value} is not an http(s) URL, such as http://collector:4318`);
  }
  return url;
}
