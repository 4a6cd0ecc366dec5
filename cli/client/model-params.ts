import type { ErrorObject } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ModelInfo } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";

/**
 * Checks `--param` values against the model's input schema (`GET /v1/models/{id}`) before
 * anything is uploaded: a mistyped parameter would otherwise be refused once per file, after
 * each file's upload (a folder of 100 000 images, 100 000 refusals). With a file, `image`
 * is the file's to give, not a parameter's. The gateway still checks each job.
 *
 * ajv, not a hand-written check: the schema is the gateway's full JSON Schema (types, enums,
 * patterns), and ajv is the validator made for it. The schema comes from the gateway the
 * user chose to send files to, the trust it already has.
 */
export function checkParams(
  model: ModelInfo,
  params: Record<string, unknown>,
  options: { file: boolean } = { file: true },
): void {
  if (options.file && Object.keys(params).length === 0) return;
  const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
  const { $schema: _, required = [], ...schema } = model.input_schema;
  // With a file, the file gives `image`; without one, the parameters must give all.
  const needed = options.file ? required.filter((key) => key !== "image") : required;
  const validate = ajv.compile({ ...schema, required: needed });
  if (validate(params)) return;
  const lines = (validate.errors ?? []).map((error) => describe(model, error));
  throw new UserError(lines.join("\n"));
}

function describe(model: ModelInfo, error: ErrorObject): string {
  const key = error.instancePath.slice(1).replaceAll("/", ".");
  const params = error.params as {
    additionalProperty?: string;
    allowedValues?: unknown[];
    missingProperty?: string;
  };
  if (error.keyword === "additionalProperties") {
    const known = Object.keys(model.input_schema.properties ?? {}).filter((k) => k !== "image");
    const takes = known.length > 0 ? `its parameters are ${known.join(", ")}` : "it takes none";
    return `--param ${params.additionalProperty}: model ${model.id} has no such parameter (${takes})`;
  }
  if (error.keyword === "required") {
    const missing = params.missingProperty ?? "";
    return missing === "image"
      ? `model ${model.id} takes a file: gantry run ${model.id} FILE`
      : `--param ${missing}: required by model ${model.id}`;
  }
  if (error.keyword === "enum") {
    return `--param ${key}: must be one of ${(params.allowedValues ?? []).join(", ")}`;
  }
  return `--param ${key}: ${error.message ?? "is not valid"}`;
}
