// Bundles the SDK (client/) into dist/client.js, what `gantry/client` resolves to in an
// installed package: one ES module with its two small dependencies inside, for every runtime.
import { builtinModules } from "node:module";
import { fileURLToPath } from "node:url";
import { build, type Metafile, type Plugin } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

export interface ClientBundle {
  code: string;
  /** Every module the bundle was made of: a test checks that none is a Node built-in. */
  inputs: string[];
  /** Imports left outside the bundle (built-ins would show here). */
  externals: string[];
  /** Every Node built-in some module imports statically ("file imports node:x"). */
  nodeImports: string[];
}

/** Records the Node built-ins the graph imports and keeps them out, instead of failing. */
function flagNodeBuiltins(found: string[]): Plugin {
  const builtins = new Set(builtinModules);
  return {
    name: "flag-node-builtins",
    setup(bundler) {
      bundler.onResolve({ filter: /.*/ }, (args) => {
        if (!args.path.startsWith("node:") && !builtins.has(args.path)) return undefined;
        found.push(`${args.importer} imports ${args.path}`);
        return { path: args.path, external: true };
      });
    },
  };
}

/** The browser platform: the "browser"/"module" entry points, no Node built-ins allowed. */
export async function bundleClient(
  options: { outfile?: string; minify?: boolean } = {},
): Promise<ClientBundle> {
  const nodeImports: string[] = [];
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ["client/index.ts"],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    metafile: true,
    minify: options.minify ?? false,
    write: options.outfile !== undefined,
    logLevel: "silent",
    plugins: [flagNodeBuiltins(nodeImports)],
    ...(options.outfile ? { outfile: options.outfile } : { outdir: "dist" }),
  });
  const meta: Metafile = result.metafile;
  const externals = Object.values(meta.inputs).flatMap((input) =>
    input.imports.filter((i) => i.external).map((i) => i.path),
  );
  const code = options.outfile ? "" : (result.outputFiles?.[0]?.text ?? "");
  return { code, inputs: Object.keys(meta.inputs), externals, nodeImports };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const bundle = await bundleClient({ outfile: "dist/client.js" });
  process.stdout.write(`dist/client.js: ${bundle.inputs.length} modules\n`);
}
