import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  countInputFiles,
  inputFiles,
  sha256File,
  submitKey,
} from "../../cli/client/submit-files.ts";
import { retryAfterMs } from "../../client/http.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gantry-files-"));
  mkdirSync(join(dir, "a", "b"), { recursive: true });
  writeFileSync(join(dir, "a", "one.png"), "1");
  writeFileSync(join(dir, "a", "b", "two.JPG"), "2");
  writeFileSync(join(dir, "a", "notes.txt"), "not an image");
  writeFileSync(join(dir, "a", ".hidden.png"), "hidden");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const collect = async (args: string[]) => {
  const names: string[] = [];
  for await (const file of inputFiles(args)) names.push(file.name);
  return names.sort();
};

describe("gantry submit's inputs", () => {
  it("streams a folder's images under their relative names, skipping others", async () => {
    expect(await collect([join(dir, "a")])).toEqual(["b/two.JPG", "one.png"]);
    expect(await countInputFiles([join(dir, "a")])).toBe(2);
  });

  it("follows links to image files (as datasets kept by DVC or git-annex are), never to folders", async () => {
    const linked = join(dir, "linked");
    mkdirSync(linked);
    symlinkSync(join(dir, "a", "one.png"), join(linked, "first.png"));
    symlinkSync(join(dir, "a", "notes.txt"), join(linked, "notes.png")); // the name decides
    symlinkSync(join(dir, "nowhere.png"), join(linked, "dangling.png"));
    symlinkSync(linked, join(linked, "loop")); // a folder link would walk forever
    symlinkSync(join(dir, "a"), join(linked, "a"));
    expect(await collect([linked])).toEqual(["first.png", "notes.png"]);
  });

  it("never takes the results of its out folder as inputs", async () => {
    const out = join(dir, "a", "results");
    mkdirSync(join(out, "b"), { recursive: true });
    writeFileSync(join(out, "one.png.json"), "{}");
    writeFileSync(join(out, "b", "two.JPG.image.png"), "3");
    const names = async (args: string[], skip: string) => {
      const found: string[] = [];
      for await (const file of inputFiles(args, skip)) found.push(file.name);
      return found.sort();
    };
    try {
      expect(await names([join(dir, "a")], out)).toEqual(["b/two.JPG", "one.png"]);
      expect(await countInputFiles([join(dir, "a")], out)).toBe(2);
      expect(await names([`${dir}/a/**/*.png`], `${out}/`)).toEqual(["one.png"]);
    } finally {
      rmSync(out, { recursive: true });
    }
  });

  it("takes a named file as it is, and expands globs", async () => {
    expect(await collect([join(dir, "a", "notes.txt")])).toEqual(["notes.txt"]);
    expect(await collect([`${dir}/a/**/*.png`])).toEqual(["one.png"]);
    await expect(collect([`${dir}/nothing-*.png`])).rejects.toThrow(/no such file/);
  });

  it("derives one key from content, model and parameters, whatever their order", async () => {
    const hash = await sha256File(join(dir, "a", "one.png"));
    expect(hash).toBe("6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b");
    const key = submitKey("ocr", { a: 1, b: 2 }, hash, "out-1");
    expect(submitKey("ocr", { b: 2, a: 1 }, hash, "out-1")).toBe(key);
    expect(submitKey("ocr", { a: 1, b: 3 }, hash, "out-1")).not.toBe(key);
    expect(submitKey("noop", { a: 1, b: 2 }, hash, "out-1")).not.toBe(key);
    expect(submitKey("ocr", { a: 1, b: 2 }, hash, "out-2")).not.toBe(key);
    expect(key).toMatch(/^[\x21-\x7e]{1,255}$/);
  });
});

describe("Retry-After", () => {
  it("reads seconds and HTTP dates", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterMs(new Headers({ "retry-after": "3" }), now)).toBe(3000);
    expect(retryAfterMs(new Headers({ "retry-after": "Thu, 01 Jan 2026 00:00:05 GMT" }), now)).toBe(
      5000,
    );
    expect(retryAfterMs(new Headers(), now)).toBeNull();
    expect(retryAfterMs(new Headers({ "retry-after": "soon" }), now)).toBeNull();
  });
});
