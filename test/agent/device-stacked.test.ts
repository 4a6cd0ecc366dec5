import * as ort from "onnxruntime-node";
import { afterAll, describe, expect, it } from "vitest";
import { runStacked } from "../../gpu-agent/batching/stack.ts";
import type { ModelSession } from "../../gpu-agent/inference/types.ts";
import { DeviceThread } from "../../gpu-agent/runner/device-thread.ts";
import { sessionFactory } from "../../gpu-agent/runner/providers.ts";
import { denseClassifierModel, modelFolder } from "../helpers/onnx-models.ts";

const SIZE = 16;
const PLANE = 3 * SIZE * SIZE;
const folder = modelFolder();
const modelPath = folder.write(
  "dense.onnx",
  denseClassifierModel({ size: SIZE, classes: 10, hidden: 32 }),
);
const thread = new DeviceThread();
afterAll(async () => {
  await thread.stop();
  folder.cleanup();
});

/** One image's input, its values from `seed`, in shared memory as the prepare threads make it. */
function image(seed: number, shared = true): { input: ort.Tensor } {
  const data = shared
    ? new Float32Array(new SharedArrayBuffer(PLANE * 4))
    : new Float32Array(PLANE);
  for (let i = 0; i < PLANE; i++) data[i] = ((i * 31 + seed * 17) % 101) / 101 - 0.5;
  return { input: new ort.Tensor("float32", data, [1, 3, SIZE, SIZE]) };
}

const values = (tensors: Record<string, ort.Tensor>[]) =>
  tensors.map((outputs) =>
    Object.values(outputs).map((tensor) => [...tensor.dims, ...(tensor.data as Float32Array)]),
  );

/** Each image run alone on a session on this thread: what a batch must give back. */
async function alone(local: ModelSession, feeds: { input: ort.Tensor }[]) {
  const inputName = local.inputNames[0]!;
  return values(
    await Promise.all(
      feeds.map(({ input }) =>
        local.run({
          [inputName]: new ort.Tensor("float32", (input.data as Float32Array).slice(), input.dims),
        }),
      ),
    ),
  );
}

describe("batches stacked on the device thread", () => {
  it("give each image the outputs it has alone, batch after batch of varying sizes", async () => {
    const local = await sessionFactory("cpu", 1)(modelPath);
    const device = await thread.sessionFactory("cpu", 1)(modelPath);
    expect(device.runStacked).toBeDefined();
    const name = device.inputNames[0]!;
    // The arena keeps a buffer per batch size: a later batch of a size seen before must not
    // read what the earlier one left there.
    for (const seeds of [
      [1, 2, 3],
      [4, 5],
      [6, 7, 8],
      [9, 9, 1],
    ]) {
      const feeds = seeds.map((seed) => image(seed));
      const batched = await runStacked(
        device,
        feeds.map(({ input }) => ({ [name]: input })),
      );
      expect(values(batched)).toEqual(await alone(local, feeds));
      // The parts stay the caller's and unchanged: a failed batch runs its requests again.
      for (const [i, { input }] of feeds.entries()) {
        expect(input.data).toEqual(image(seeds[i]!).input.data);
      }
    }
    await Promise.all([local.release(), device.release()]);
  });

  it("concatenates inputs not in shared memory on the caller's side, with the same results", async () => {
    const local = await sessionFactory("cpu", 1)(modelPath);
    const device = await thread.sessionFactory("cpu", 1)(modelPath);
    const name = device.inputNames[0]!;
    const shared = [image(1), image(2)];
    const plain = [image(1, false), image(2, false)];
    const expected = await alone(local, shared);
    const fromPlain = await runStacked(
      device,
      plain.map(({ input }) => ({ [name]: input })),
    );
    expect(values(fromPlain)).toEqual(expected);
    // A single image in shared memory runs as it is (onnxruntime reads shared memory).
    const [single] = await runStacked(device, [{ [name]: shared[0]!.input }]);
    expect(values([single!])).toEqual([expected[0]]);
    const [here] = await runStacked(local, [{ [name]: shared[1]!.input }]);
    expect(values([here!])).toEqual([expected[1]]);
    await Promise.all([local.release(), device.release()]);
  });
});

describe("an input in shared memory", () => {
  it("runs through a plain run on the device thread (copied there: onnxruntime refuses it)", async () => {
    const local = await sessionFactory("cpu", 1)(modelPath);
    const device = await thread.sessionFactory("cpu", 1)(modelPath);
    const feed = image(3);
    const out = await device.run({ [device.inputNames[0]!]: feed.input });
    expect(values([out])).toEqual(await alone(local, [feed]));
    await Promise.all([local.release(), device.release()]);
  });
});
