import sharp from "sharp";

/**
 * `count` distinct JPEGs of a few sizes and colours, so a runner decodes and resizes each
 * for real (the same bytes every time would measure a cache, not the pipeline).
 */
export function distinctJpegs(count: number): Promise<Uint8Array[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      sharp({
        create: {
          width: 320 + (i % 5) * 16,
          height: 240 + (i % 3) * 16,
          channels: 3,
          background: { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 },
        },
      })
        .jpeg()
        .toBuffer()
        .then((bytes) => new Uint8Array(bytes)),
    ),
  );
}
