import { UserError } from "../../shared/errors.ts";
import { ModelConfigError } from "../pipelines/model-config.ts";
import { UNKNOWN_MODEL_HINT } from "../registry/index.ts";
import { RunnerStartError } from "./child-process.ts";

/**
 * A runner start's failure that is a setting to fix, as the operator's UserError (one line
 * naming the setting, exit 2); any other failure as it was.
 */
export function startRefusal(error: unknown): unknown {
  if (!(error instanceof RunnerStartError)) return error;
  // A model no pipeline or models.yaml entry knows (checkModels refuses most before enrolling).
  if (error.jobError.code === "unknown_model") {
    return new UserError(`${error.message}: ${UNKNOWN_MODEL_HINT}`);
  }
  // A models.yaml entry or file that no provider can load: the operator's to fix.
  if (error.jobError.code === ModelConfigError.code) {
    return new UserError(
      `${error.message} (GANTRY_MODELS_FILE; \`gantry-agent doctor\` loads every model and says what each needs)`,
    );
  }
  return error;
}
