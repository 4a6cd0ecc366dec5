import { UserError } from "../../shared/errors.ts";
import { fsReason, makeFolderSync } from "../../shared/folders.ts";

/** A file system refusal of what the CLI writes, as one line the user can act on. */
export function cannotWrite(what: string, path: string, error: unknown): UserError {
  return new UserError(`cannot write ${what} ${path}: ${fsReason(error)}`);
}

/** Makes the folder `path` (and those above it), or says in one line why it cannot. */
export function makeFolder(path: string, what = "the folder"): void {
  try {
    makeFolderSync(path);
  } catch (error) {
    throw cannotWrite(what, path, error);
  }
}
