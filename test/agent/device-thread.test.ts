import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import * as ort from "onnxruntime-node";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ModelSession } from "../../gpu-agent/inference/types.ts";
import { DeviceThread } from "../../gpu-agent/runner/device-thread.ts";
import { sessionFactory } from "../../gpu-agent/runner/providers.ts";
import { affineModel, modelFolder } from "../helpers/onnx-models.ts";

const folder = modelFolder();
const modelPath = folder.write("affine.onnx", affineModel());
afterAll(() => folder.cleanup());

const threads: DeviceThread[] = [];
afterEach(async () => {
  await Promise.all(threads.splice(0).map((thread) => thread.stop()));
});

function deviceThread(options?: ConstructorParameters<typeof DeviceThread>[0]): DeviceThread {
  const thread = new DeviceThread(options);
  threads.push(thread);
  return thread;
}

const feeds = (x: Float32Array = Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8)) => ({
  x: new ort.Tensor("float32", x, [2, 4]),
  k: new ort.Tensor("int64", BigInt64Array.of(10n, 20n), [2, 1]),
});

async function outputsOf(session: ModelSession, fetches?: readonly string[]) {
  const outputs = fetches ? await session.run(feeds(), fetches) : await session.run(feeds());
  return Object.fromEntries(
    Object.entries(outputs).map(([name, tensor]) => [
      name,
      {
        type: tensor.type,
        dims: [...tensor.dims],
        data: Array.from(tensor.data as ArrayLike<unknown>),
      },
    ]),
  );
}

describe("sessions on the device thread", () => {
  it("run a model with the same names, metadata and results as a session on this thread", async () => {
    const here = await sessionFactory("cpu", 1)(modelPath);
    const there = await deviceThread().sessionFactory("cpu", 1)(modelPath);

    expect(there.inputNames).toEqual(here.inputNames);
    expect(there.outputNames).toEqual(here.outputNames);
    expect(there.inputMetadata).toEqual(here.inputMetadata);
    expect(await outputsOf(there)).toEqual(await outputsOf(here));
    expect((await outputsOf(there)).next?.data).toEqual([11n, 21n]);
    await Promise.all([here.release(), there.release()]);
  });

  it("return only the outputs fetched", async () => {
    const session = await deviceThread().sessionFactory("cpu", 1)(modelPath);
    expect(Object.keys(await outputsOf(session, ["y"]))).toEqual(["y"]);
  });

  it("send a view into a larger buffer as its own values", async () => {
    const session = await deviceThread().sessionFactory("cpu", 1)(modelPath);
    const whole = Float32Array.of(99, 99, 1, 2, 3, 4, 5, 6, 7, 8, 99);
    const outputs = await session.run(feeds(whole.subarray(2, 10)));
    expect([...(outputs.y!.data as Float32Array)]).toEqual([3, 5, 7, 9, 11, 13, 15, 17]);
  });

  it("take over a large input's buffer instead of copying it, and copy a small one", async () => {
    const session = await deviceThread().sessionFactory("cpu", 1)(modelPath);
    const rows = 16_384; // 256 KiB of float32: worth handing over
    const large = new Float32Array(rows * 4).fill(1);
    const outputs = await session.run({
      x: new ort.Tensor("float32", large, [rows, 4]),
      k: new ort.Tensor("int64", new BigInt64Array(rows), [rows, 1]),
    });
    expect(large.length).toBe(0); // detached: it now belongs to the device thread
    expect(outputs.y!.dims).toEqual([rows, 4]);
    expect((outputs.y!.data as Float32Array).every((value) => value === 3)).toBe(true);

    const small = Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8);
    await session.run(feeds(small));
    expect([...small]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("fail with onnxruntime's own error, so out-of-memory and input errors read the same", async () => {
    const here = await sessionFactory("cpu", 1)(modelPath);
    const there = await deviceThread().sessionFactory("cpu", 1)(modelPath);
    const wrong = { x: new ort.Tensor("float32", Float32Array.of(1, 2, 3), [1, 3]) };
    const expected = await here.run(wrong).catch((error: Error) => error);
    const actual = await there.run(wrong).catch((error: Error) => error);
    expect(expected).toBeInstanceOf(Error);
    expect(actual).toBeInstanceOf(Error);
    expect((actual as Error).message).toBe((expected as Error).message);
  });

  it("refuse a run on a released session", async () => {
    const session = await deviceThread().sessionFactory("cpu", 1)(modelPath);
    await session.release();
    await expect(session.run(feeds())).rejects.toThrow(/no session/);
  });

  it("fail a missing model file at creation, with the path in the error", async () => {
    const create = deviceThread().sessionFactory("cpu", 1);
    await expect(create(join(dirname(modelPath), "missing.onnx"))).rejects.toThrow(/missing\.onnx/);
  });
});

describe("a device thread", () => {
  it("that dies fails the calls in flight and every later one, and says so once", async () => {
    const script = new TextEncoder().encode("setTimeout(() => process.exit(3), 50);\n");
    const entry = pathToFileURL(folder.write("dies.mjs", script));
    const lost: Error[] = [];
    const thread = deviceThread({ entry, onLost: (error) => lost.push(error) });

    const creating = thread.sessionFactory("cpu", 1)(modelPath);
    await expect(creating).rejects.toThrow("the device thread exited (code 3)");
    await expect(thread.sessionFactory("cpu", 1)(modelPath)).rejects.toThrow("exited (code 3)");
    expect(lost.map((error) => error.message)).toEqual(["the device thread exited (code 3)"]);
  });

  it("that is stopped fails the calls waiting on it instead of leaving them hanging", async () => {
    const script = new TextEncoder().encode("// answers nothing\nsetInterval(() => {}, 1000);\n");
    const thread = deviceThread({ entry: pathToFileURL(folder.write("mute.mjs", script)) });
    const waiting = thread
      .sessionFactory(
        "cpu",
        1,
      )(modelPath)
      .catch((error: Error) => error);
    await thread.stop();
    expect(await waiting).toMatchObject({ message: "the device thread was stopped" });
  });

  it("refuses an input that cannot cross threads, and keeps working", async () => {
    const thread = deviceThread();
    const session = await thread.sessionFactory("cpu", 1)(modelPath);
    const unsendable = {
      x: { type: "float32", data: () => {}, dims: [1] } as unknown as ort.Tensor,
    };
    await expect(session.run(unsendable)).rejects.toThrow();
    expect(Object.keys(await session.run(feeds()))).toEqual(["y", "next"]);
  });

  it("that was stopped refuses calls plainly", async () => {
    const thread = deviceThread();
    await thread.stop();
    await expect(thread.sessionFactory("cpu", 1)(modelPath)).rejects.toThrow(
      "the device thread was stopped",
    );
  });
});
