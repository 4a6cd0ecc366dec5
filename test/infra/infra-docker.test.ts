/**
 * infra/docker: parses the Dockerfiles (no Docker engine needed) and checks what the
 * images promise: the CUDA runtime base and the deliberate CUDA provider install for the
 * agent, Node 20, a non-root USER, STOPSIGNAL SIGTERM (the agent's drain) and the
 * entrypoints; and that every COPY source exists and survives .dockerignore.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { all, envOf, execForm, last, parseDockerfile, type Stage } from "../helpers/dockerfile.ts";
import { isWithin, modelCacheDirOf } from "../helpers/model-cache-dir.ts";

const ROOT = join(import.meta.dirname, "../..");

/** The user a stage runs as must not be root, by name or by uid. */
function checkNonRoot(stage: Stage) {
  const user = last(stage, "USER");
  expect(user, "the final stage sets USER").toBeDefined();
  expect(user!.split(":")[0]).not.toMatch(/^(root|0)$/);
}

/** Every COPY from the build context names something that exists and is not ignored. */
function checkCopySources(stages: Stage[]) {
  const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
  for (const copy of all(stages, "COPY")) {
    if (copy.startsWith("--from")) continue;
    const parts = copy.split(/\s+/);
    for (const source of parts.slice(0, -1)) {
      expect(existsSync(join(ROOT, source)), `COPY ${source} exists`).toBe(true);
      expect(ignored, `COPY ${source} is not in .dockerignore`).not.toContain(source);
    }
  }
}

describe("infra/docker/agent.Dockerfile", () => {
  const stages = parseDockerfile("infra/docker/agent.Dockerfile");
  const final = stages.at(-1)!;

  it("runs on the CUDA 12 runtime with cuDNN and Node 20", () => {
    expect(final.base).toMatch(/^nvidia\/cuda:12\.\d+(\.\d+)?-cudnn\d*-runtime-ubuntu22\.04$/);
    expect(stages.some((s) => /^node:20[.-]/.test(s.base))).toBe(true);
  });

  it("installs production dependencies, then the CUDA provider libraries on purpose", () => {
    const runs = all(stages, "RUN").join("\n");
    // No lifecycle script: the checkout's `prepare` needs devDependencies and sources
    // (scripts/, console/) this stage has not, and failed the build.
    expect(runs).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(runs).toMatch(/npm rebuild better-sqlite3 esbuild/);
    expect(runs).toContain(
      "ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install",
    );
    // The build fails rather than ship an image that silently runs on CPU.
    expect(runs).toMatch(/libonnxruntime_providers_cuda\.so/);
  });

  it("runs as a non-root user, stops with SIGTERM and starts `gantry-agent run`", () => {
    checkNonRoot(final);
    expect(last(final, "STOPSIGNAL")).toBe("SIGTERM");
    const command = [...execForm(last(final, "ENTRYPOINT")), ...execForm(last(final, "CMD"))];
    expect(command.slice(-2)).toEqual(["gantry-agent", "run"]);
    expect(all([final], "RUN").join("\n")).toMatch(
      /ln -s \/opt\/gantry\/bin\/gantry-agent\.js \/usr\/local\/bin\/gantry-agent/,
    );
    checkCopySources(stages);
  });

  it("keeps the model cache in a folder the agent's user owns", () => {
    // /opt/gantry is root's: a cache at the default ./model-cache could not be made there.
    const cache = modelCacheDirOf(envOf(final), last(final, "WORKDIR") ?? "/");
    const owned = all([final], "RUN").flatMap((run) =>
      [...run.matchAll(/install -d -o gantry\b[^&]*?(\/[\w/.-]+)/g)].map((m) => m[1]!),
    );
    expect(
      owned.some((dir) => isWithin(cache, dir)),
      `${cache} in ${owned.join(", ")}`,
    ).toBe(true);
  });
});

describe("infra/docker/gateway.Dockerfile", () => {
  const stages = parseDockerfile("infra/docker/gateway.Dockerfile");
  const final = stages.at(-1)!;

  it("runs `gantry gateway` on node:20-slim as a non-root user", () => {
    expect(final.base).toBe("node:20-slim");
    checkNonRoot(final);
    expect(last(final, "STOPSIGNAL")).toBe("SIGTERM");
    const command = [...execForm(last(final, "ENTRYPOINT")), ...execForm(last(final, "CMD"))];
    expect(command.slice(-2)).toEqual(["gantry", "gateway"]);
    // The gateway runs no inference and must not fetch CUDA libraries.
    expect(all(stages, "RUN").join("\n")).not.toMatch(/ONNXRUNTIME_NODE_INSTALL=cuda/);
    checkCopySources(stages);
  });

  it("builds dist/ (console, SDK) with devDependencies in a build stage; the image gets only production dependencies and dist/", () => {
    const named = new Map(stages.filter((s) => s.name).map((s) => [s.name!, s]));
    const stageOf = (copy: string) => named.get(/^--from=(\S+)/.exec(copy)?.[1] ?? "");
    const fromCopies = final.instructions
      .filter((i) => i.op === "COPY" && i.args.startsWith("--from="))
      .map((i) => i.args);
    for (const copy of fromCopies) expect(stageOf(copy), copy).toBeDefined();

    // dist/ comes from a stage whose full `npm ci` ran `prepare` after the sources it builds.
    const dist = fromCopies.find((copy) => /\/dist\s+\.\/dist$/.test(copy));
    expect(dist, "the image copies dist/ from a build stage").toBeDefined();
    const build = stageOf(dist!)!;
    const ci = build.instructions.findIndex((i) => i.op === "RUN" && /npm ci\b/.test(i.args));
    expect(ci).toBeGreaterThan(-1);
    expect(build.instructions[ci]!.args).not.toMatch(/--omit=dev|--ignore-scripts/);
    const copiedBefore = build.instructions
      .slice(0, ci)
      .filter((i) => i.op === "COPY")
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    const prepare = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts
      .prepare as string;
    expect(prepare).toMatch(/build:console/);
    for (const source of ["package-lock.json", "scripts", "client", "console", "shared"])
      expect(copiedBefore, `${source} is there when prepare runs`).toContain(source);

    // node_modules from a production install that ran no lifecycle script (no `prepare`).
    const modules = fromCopies.find((copy) => /\/node_modules\s+\.\/node_modules$/.test(copy));
    expect(modules).toBeDefined();
    const deps = all([stageOf(modules!)!], "RUN").join("\n");
    expect(deps).toMatch(/npm ci --omit=dev --ignore-scripts/);
    // The final stage installs nothing itself and carries no compiler.
    expect(all([final], "RUN").join("\n")).not.toMatch(/npm (ci|install)|g\+\+/);
    expect(final.base).toBe("node:20-slim");
  });
});

describe(".dockerignore", () => {
  it("keeps dependencies, local state and git history out of the build context", () => {
    const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n");
    for (const entry of ["node_modules", ".gantry", ".git"]) expect(ignored).toContain(entry);
  });
});
