import { useEffect, useState } from "preact/hooks";
import type { ConsoleApi, Job } from "../api.ts";
import { percent } from "../format.ts";

/**
 * Images this tab uploaded, by upload id: shown at once, without asking the gateway for
 * them again (`GET /v1/jobs/{id}/inputs/image` serves any other job's, see input.tsx).
 */
export const previews = new Map<string, string>();

export const previewOf = (job: Job): string | undefined => {
  const image = (job.input as { image?: unknown }).image;
  return typeof image === "string" ? previews.get(image) : undefined;
};

type Point = [number, number];
interface OcrLine {
  text: string;
  score: number;
  box: Point[];
}
interface Detection {
  label: string;
  score: number;
  box: [number, number, number, number];
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null;

/** The image with shapes drawn over it in its own pixel space (an SVG over the img). */
function Overlay(props: {
  src: string | undefined;
  width: number;
  height: number;
  label: string;
  children: preact.ComponentChildren;
}) {
  const [size, setSize] = useState<[number, number] | null>(null);
  const [w, h] = size ?? [props.width, props.height];
  return (
    <figure class="overlay">
      {props.src && (
        <img
          src={props.src}
          alt="Input"
          onLoad={(e) => setSize([e.currentTarget.naturalWidth, e.currentTarget.naturalHeight])}
        />
      )}
      <svg
        viewBox={`0 0 ${Math.max(1, w)} ${Math.max(1, h)}`}
        role="img"
        aria-label={props.label}
        class={props.src ? "over" : "alone"}
      >
        {props.children}
      </svg>
    </figure>
  );
}

function OcrOutput(props: { lines: OcrLine[]; text: string; src: string | undefined }) {
  const points = props.lines.flatMap((line) => line.box);
  const width = Math.max(1, ...points.map(([x]) => x));
  const height = Math.max(1, ...points.map(([, y]) => y));
  return (
    <div class="ocr">
      <Overlay src={props.src} width={width} height={height} label="OCR boxes">
        {props.lines.map((line, i) => (
          <polygon key={i} points={line.box.map(([x, y]) => `${x},${y}`).join(" ")}>
            <title>{`${line.text} (${percent(line.score)})`}</title>
          </polygon>
        ))}
      </Overlay>
      <section aria-label="OCR text">
        <pre class="ocr-text">{props.text}</pre>
      </section>
    </div>
  );
}

function DetectionOutput(props: { detections: Detection[]; src: string | undefined }) {
  const width = Math.max(1, ...props.detections.map((d) => d.box[2]));
  const height = Math.max(1, ...props.detections.map((d) => d.box[3]));
  return (
    <Overlay src={props.src} width={width} height={height} label="Detections">
      {props.detections.map((d, i) => (
        <g key={i}>
          <rect
            x={d.box[0]}
            y={d.box[1]}
            width={d.box[2] - d.box[0]}
            height={d.box[3] - d.box[1]}
          />
          <text x={d.box[0]} y={d.box[1]}>{`${d.label} ${percent(d.score)}`}</text>
        </g>
      ))}
    </Overlay>
  );
}

function ClassBars(props: { predictions: { label: string; score: number }[] }) {
  return (
    <ul class="bars" aria-label="Classes">
      {props.predictions.map((p) => (
        <li key={p.label}>
          <span>{p.label}</span>
          <meter min={0} max={1} value={p.score} />
          <span>{percent(p.score)}</span>
        </li>
      ))}
    </ul>
  );
}

/** An image artifact (a cut-out) fetched through the SDK, on a checkerboard. */
function ArtifactImage(props: { api: ConsoleApi; job: Job; name: string }) {
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    let made: string | null = null;
    void props.api.sdk.artifacts.download(props.job.id, props.name).then((blob) => {
      made = URL.createObjectURL(blob);
      setUrl(made);
    });
    return () => {
      if (made) URL.revokeObjectURL(made);
    };
  }, [props.api, props.job.id, props.name]);
  return url ? <img class="checkerboard" src={url} alt={`Artifact ${props.name}`} /> : null;
}

/**
 * The job's output rendered for its task, raw JSON for the rest (and beside it). `src` is
 * the input image to draw over (default: this tab's own upload of it).
 */
export function JobOutput(props: { api: ConsoleApi; job: Job; src?: string | undefined }) {
  const { job } = props;
  const output = job.output;
  const src = props.src ?? previewOf(job);
  let rendered: preact.ComponentChildren = null;
  if (isObject(output)) {
    if (Array.isArray(output.lines) && typeof output.text === "string")
      rendered = <OcrOutput lines={output.lines as OcrLine[]} text={output.text} src={src} />;
    else if (Array.isArray(output.detections))
      rendered = <DetectionOutput detections={output.detections as Detection[]} src={src} />;
    else if (Array.isArray(output.predictions))
      rendered = (
        <ClassBars predictions={output.predictions as { label: string; score: number }[]} />
      );
    else if (isObject(output.image) || isObject(output.mask))
      rendered = (
        <div class="artifacts">
          {src && <img class="original" src={src} alt="Original" />}
          {["image", "mask"]
            .filter((name) => isObject(output[name]))
            .map((name) => (
              <ArtifactImage key={name} api={props.api} job={job} name={name} />
            ))}
        </div>
      );
  }
  if (output === null || output === undefined) {
    const why = job.output_expired
      ? "Deleted by its retention."
      : job.status === "queued" || job.status === "running"
        ? "Not yet: the job has not finished."
        : `None: the job ${job.status}.`;
    return <p class="hint">{why}</p>;
  }
  return (
    <div class="output">
      {rendered}
      <details open={rendered === null}>
        <summary>Output JSON</summary>
        <pre>{JSON.stringify(output, null, 2)}</pre>
      </details>
    </div>
  );
}
