// The renderer lives with the CLI, which uses it for the example image `gantry start` writes.
export { type RenderTextOptions, renderTextPng } from "../../cli/render-text.ts";
