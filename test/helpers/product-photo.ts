import sharp from "sharp";
import { mulberry32 } from "./seeded-random.ts";

/**
 * A generated "product photo": a bottle (a rounded body, a cap and a label) whose left edge
 * is hard and right edge soft (feathered over about 10 px), on a cluttered background
 * (overlapping tiles of muted colours and stripes, out of focus, with grain). `truth` is the object's coverage per pixel (0..255), so
 * a mask can be scored against it; pixels at or above 128 are the foreground.
 */
export interface ProductPhoto {
  width: number;
  height: number;
  /** The composed photo as interleaved RGB. */
  rgb: Buffer;
  /** The object's alpha, one byte per pixel. */
  truth: Buffer;
  png: Buffer;
}

export async function productPhoto(width = 640, height = 480): Promise<ProductPhoto> {
  const object =
    Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
  <defs>
    <linearGradient id="body" x1="0" x2="1" y1="0" y2="0">
      <stop offset="0" stop-color="#0b3d91"/><stop offset="0.45" stop-color="#3f7fe0"/>
      <stop offset="1" stop-color="#08285e"/>
    </linearGradient>
  </defs>
  <rect x="250" y="150" width="140" height="280" rx="28" fill="url(#body)"/>
  <rect x="290" y="95" width="60" height="62" rx="6" fill="#8c1c13"/>
  <rect x="272" y="230" width="96" height="90" rx="4" fill="#f4f1e8"/>
</svg>`);
  // Hard on the left; on the right the edge is feathered (out of focus, as a product's far
  // side often is): the same drawing blurred, its half-coverage line where the hard edge is.
  const hard = await sharp(object).ensureAlpha().raw().toBuffer();
  const soft = await sharp(object).ensureAlpha().blur(4).raw().toBuffer();
  const layer = Buffer.alloc(hard.length);
  for (let i = 0; i < width * height; i++) {
    const source = i % width < width / 2 ? hard : soft;
    source.copy(layer, i * 4, i * 4, i * 4 + 4);
  }
  // A shelf behind the product, out of focus as in a studio shot, with the sensor's grain.
  const blurred = await sharp(clutter(width, height, 20260), {
    raw: { width, height, channels: 3 },
  })
    .blur(5)
    .raw()
    .toBuffer();
  const grain = mulberry32(7);
  const background = blurred.map((v) =>
    Math.max(0, Math.min(255, v + Math.round((grain() - 0.5) * 16))),
  );
  const rgb = Buffer.alloc(width * height * 3);
  const truth = Buffer.alloc(width * height);
  for (let i = 0; i < width * height; i++) {
    const a = layer[i * 4 + 3]! / 255;
    truth[i] = layer[i * 4 + 3]!;
    for (let c = 0; c < 3; c++) {
      rgb[i * 3 + c] = Math.round(layer[i * 4 + c]! * a + background[i * 3 + c]! * (1 - a));
    }
  }
  const png = await sharp(rgb, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
  return { width, height, rgb, truth, png };
}

/** Overlapping tiles of seeded random colours with stripes and pixel noise: a busy shelf. */
function clutter(width: number, height: number, seed: number): Buffer {
  const random = mulberry32(seed);
  const pixels = Buffer.alloc(width * height * 3);
  for (let i = 0; i < pixels.length; i++) pixels[i] = 130 + Math.floor(random() * 30);
  for (let tile = 0; tile < 70; tile++) {
    const w = 20 + Math.floor(random() * 120);
    const h = 20 + Math.floor(random() * 90);
    const left = Math.floor(random() * (width - w));
    const top = Math.floor(random() * (height - h));
    // Muted colours: a busy but unremarkable background, not a second product.
    const colour = [random(), random(), random()].map((v) => Math.floor(110 + v * 90));
    const striped = random() < 0.4;
    for (let y = top; y < top + h; y++) {
      for (let x = left; x < left + w; x++) {
        const shade = striped && Math.floor(x / 6) % 2 === 0 ? 0.6 : 1;
        for (let c = 0; c < 3; c++) {
          const noise = (random() - 0.5) * 20;
          const value = colour[c]! * shade + noise;
          pixels[(y * width + x) * 3 + c] = Math.max(0, Math.min(255, Math.round(value)));
        }
      }
    }
  }
  return pixels;
}

/** Intersection over union of two masks thresholded at half. */
export function maskIoU(a: Uint8Array, b: Uint8Array): number {
  let both = 0;
  let either = 0;
  for (let i = 0; i < a.length; i++) {
    const inA = a[i]! >= 128;
    const inB = b[i]! >= 128;
    if (inA && inB) both++;
    if (inA || inB) either++;
  }
  return either === 0 ? 1 : both / either;
}
