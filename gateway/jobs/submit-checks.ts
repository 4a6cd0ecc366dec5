import type { BlobHead } from "../../shared/blob/port.ts";
import { HttpProblem } from "../../shared/errors.ts";
import type { JobRequest } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { clientMessages } from "../http/client-messages.ts";
import type { ModelSpec } from "../models.ts";
import type { Tenant } from "../store/tenants.ts";
import { type UploadRow, uploadBlobKey } from "../store/uploads.ts";
import { type JobTimeout, jobTimeout } from "./timeout.ts";

/**
 * A submit's checks of its request against the model (known, its input schema, an image
 * where it needs one) and its upload (the tenant's, of a type the model takes, received),
 * apart from submit.ts so that a batch checks every item before it makes anything.
 */

/** A job request whose model, inputs and timeout were checked: what a submit needs of them. */
export interface CheckedJob {
  spec: ModelSpec;
  timeout: JobTimeout;
}

/** Where a check reads an upload named by the input, and its blob's size. */
export interface UploadReader {
  upload(id: string): Promise<UploadRow | undefined>;
  head(id: string): Promise<BlobHead | null>;
}

const eachAlone = (gateway: Gateway, tenant: Tenant): UploadReader => ({
  upload: (id) => gateway.stores.uploads.forTenant(tenant.id, id),
  head: (id) => gateway.blobs.head(uploadBlobKey(id)),
});

/**
 * The uploads a batch's items name, read in one statement, and each blob's size once
 * however many items name it: item by item, a 1 000-item batch of uploads made 2 000 D1
 * queries, twice what a Worker invocation may make.
 */
export async function batchUploadReader(
  gateway: Gateway,
  tenant: Tenant,
  requests: readonly JobRequest[],
): Promise<UploadReader> {
  const named = requests.map((request) => request.input.image).filter(isUploadId);
  const uploads = await gateway.stores.uploads.forTenantMany(tenant.id, [...new Set(named)]);
  const heads = new Map<string, Promise<BlobHead | null>>();
  return {
    upload: async (id) => uploads.get(id),
    head(id) {
      const head = heads.get(id) ?? gateway.blobs.head(uploadBlobKey(id));
      heads.set(id, head);
      return head;
    },
  };
}

const isUploadId = (image: string | undefined): image is string =>
  Boolean(image?.startsWith("upl_"));

export async function checkModelAndInputs(
  gateway: Gateway,
  tenant: Tenant,
  request: JobRequest,
  read: UploadReader = eachAlone(gateway, tenant),
): Promise<CheckedJob> {
  const spec = gateway.models.get(request.model);
  if (!spec) {
    const known = [...gateway.models.keys()].join(", ");
    throw new HttpProblem(
      422,
      "unknown_model",
      "Unknown model",
      `No model "${request.model}". Models: ${known}.`,
    );
  }
  const image = request.input.image;
  if (!image && spec.requiresImage) {
    throw new HttpProblem(
      422,
      "input_missing",
      "Input missing",
      `Model "${spec.id}" needs input.image.`,
    );
  }
  checkModelInput(spec, request.input);
  const timeout = jobTimeout(spec, tenant, request.timeout_seconds);
  if (!image?.startsWith("upl_")) return { spec, timeout };
  const upload = await read.upload(image);
  if (!upload) {
    throw new HttpProblem(422, "unknown_upload", "Unknown upload", `No upload ${image}.`);
  }
  if (!spec.contentTypes.includes(upload.content_type)) {
    throw new HttpProblem(
      422,
      "unsupported_input_type",
      "Unsupported input type",
      `Model "${spec.id}" accepts ${spec.contentTypes.join(", ")}, not ${upload.content_type}.`,
    );
  }
  const head = await read.head(upload.id);
  if (!head || head.sizeBytes !== upload.size_bytes) {
    // Past its URL's expiry the file can no longer be sent: "PUT it first" would be a dead end.
    const expiredAt = new Date(upload.expires_at).toISOString();
    const detail =
      upload.expires_at <= gateway.now()
        ? `Upload ${image} was never received and its upload URL expired at ${expiredAt}: make a new upload (POST /v1/uploads).`
        : `Upload ${image} has not been received yet: PUT the file to its upload URL first.`;
    throw new HttpProblem(409, "upload_incomplete", "Upload not completed", detail);
  }
  return { spec, timeout };
}

/** The model's own schema for `input`: a 422 that lists every problem, by path. */
function checkModelInput(spec: ModelSpec, input: JobRequest["input"]): void {
  const result = spec.input.safeParse(input, { error: clientMessages });
  if (result.success) return;
  const errors = result.error.issues.slice(0, 20).map((issue) => ({
    path: ["input", ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
  const summary = errors.map((error) => `${error.path}: ${error.message}`).join("; ");
  throw new HttpProblem(
    422,
    "invalid_input",
    "Invalid model input",
    `Model "${spec.id}" refused its input: ${summary}.`,
    { errors },
  );
}
