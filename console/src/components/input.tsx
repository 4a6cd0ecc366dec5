import { useEffect, useState } from "preact/hooks";
import { APIError } from "../../../client/errors.ts";
import type { ConsoleApi, Job } from "../api.ts";
import { errorText } from "../format.ts";
import { previewOf } from "./output.tsx";

export interface InputImage {
  /** An object URL of the image, or the same tab's own upload. */
  src: string | undefined;
  /** Why there is no image to show, when there is none. */
  note: string | null;
}

const UPLOAD_ID = /^upl_[0-9a-z]{26}$/;

/**
 * The job's input image, for any job: the file this tab uploaded when it has it, else the
 * stored upload through `GET /v1/jobs/{id}/inputs/image` (the SDK's `jobs.input`). An input
 * given as an https URL is not loaded: the console asks nothing of any host but the gateway.
 */
export function useInputImage(api: ConsoleApi, job: Job | null): InputImage {
  const own = job ? previewOf(job) : undefined;
  const image = job ? (job.input as { image?: unknown }).image : undefined;
  const expired = job?.input_expired === true;
  const [fetched, setFetched] = useState<InputImage>({ src: undefined, note: null });
  const id = job?.id;
  useEffect(() => {
    setFetched({ src: undefined, note: null });
    if (!id || own || typeof image !== "string") return;
    if (!UPLOAD_ID.test(image)) {
      setFetched({ src: undefined, note: `Given as a URL: ${image}` });
      return;
    }
    if (expired) {
      setFetched({ src: undefined, note: "The input was deleted by its retention." });
      return;
    }
    const controller = new AbortController();
    let made: string | undefined;
    api.sdk.jobs.input(id, "image", { signal: controller.signal }).then(
      (blob) => {
        made = URL.createObjectURL(blob);
        setFetched({ src: made, note: null });
      },
      (error: unknown) => {
        if (controller.signal.aborted) return;
        const gone = error instanceof APIError && error.status === 410;
        setFetched({
          src: undefined,
          note: gone ? "The input was deleted by its retention." : errorText(error),
        });
      },
    );
    return () => {
      controller.abort();
      if (made) URL.revokeObjectURL(made);
    };
  }, [api, id, own, image, expired]);
  return own ? { src: own, note: null } : fetched;
}
