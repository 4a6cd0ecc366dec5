import sharp from "sharp";

export interface RenderTextOptions {
  /** Font size in pixels (default 40). */
  fontSize?: number;
  /** White margin around the text in pixels (default 24). */
  padding?: number;
  /** Distance between baselines as a multiple of the font size (default 1.6). */
  lineHeight?: number;
  /** Font family known to fontconfig (default DejaVu Sans, installed with the fonts package). */
  fontFamily?: string;
}

/**
 * Renders black text on white into a PNG through an SVG, so tests can make OCR inputs without
 * fixture files. The canvas is sized from a generous per-character width estimate.
 */
export async function renderTextPng(
  lines: string[],
  options: RenderTextOptions = {},
): Promise<Buffer> {
  const fontSize = options.fontSize ?? 40;
  const padding = options.padding ?? 24;
  const lineHeight = (options.lineHeight ?? 1.6) * fontSize;
  const fontFamily = options.fontFamily ?? "DejaVu Sans";
  const longest = Math.max(1, ...lines.map((line) => line.length));
  // DejaVu Sans averages about 0.6 em per character; 0.65 leaves room for wide glyphs.
  const width = Math.ceil(longest * fontSize * 0.65 + 2 * padding);
  const height = Math.ceil(Math.max(1, lines.length) * lineHeight + 2 * padding);
  const texts = lines
    .map((line, i) => {
      const baseline = padding + i * lineHeight + fontSize;
      return `<text x="${padding}" y="${baseline}">${escapeXml(line)}</text>`;
    })
    .join("");
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
    `<rect width="100%" height="100%" fill="#ffffff"/>` +
    `<g font-family="${escapeXml(fontFamily)}" font-size="${fontSize}" fill="#000000" xml:space="preserve">${texts}</g>` +
    `</svg>`;
  return sharp(Buffer.from(svg)).flatten({ background: "#ffffff" }).png().toBuffer();
}

function escapeXml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}
