/** What `gantry start` prints once everything is up: where, which key, how to try it. */
export function startBanner(options: {
  url: string;
  apiKey: string;
  apiKeyFrom: "GANTRY_API_KEY" | "generated" | "kept";
  dataDir: string;
  examplePath: string;
  models: string[];
  /** What the gateway runs on, in words: "SQLite queue and store, blobs on disk, one agent". */
  stack: string;
  /** Which webhook receivers this process allows, in words (cli/webhook-note.ts). */
  webhooks: string;
  /** How to start an agent, when none runs in this process (`gantry gateway`). */
  agents?: string;
}): string {
  const { url, apiKey } = options;
  const keyNote = {
    GANTRY_API_KEY: "from GANTRY_API_KEY",
    generated: `generated, kept in ${options.dataDir}/secrets.json`,
    kept: `from ${options.dataDir}/secrets.json`,
  }[options.apiKeyFrom];
  // The examples run a model this gateway serves: ocr (which reads the example's text) when
  // it does, else the first, whose output is printed whole.
  const model = options.models.includes("ocr") ? "ocr" : (options.models[0] ?? "ocr");
  const sdkRun =
    model === "ocr"
      ? `const { text } = await gantry.run("ocr", { image: "${options.examplePath}" });
    console.log(text);`
      : `const output = await gantry.run("${model}", { image: "${options.examplePath}" });
    console.log(output);`;
  return `
  Gantry is running: gateway, ${options.stack}

    API        ${url}
    Console    ${url}/console   (sign in with the API key below)
    Docs       ${url}/docs
    API key    ${apiKey}   (${keyNote})
    Models     ${options.models.join(", ")}
    Data       ${options.dataDir}
    Webhooks   ${options.webhooks}
${options.agents ? `\n${options.agents}\n` : ""}
  Try it (an example image with text is at ${options.examplePath}):

    export GANTRY_URL=${url} GANTRY_KEY=${apiKey}
    npx gantry run ${model} ${options.examplePath}
    npx gantry submit ${model} ./photos --out ./results     # a whole folder, resumable

  From TypeScript (the SDK, gantry/client; it reads GANTRY_URL and GANTRY_KEY):

    import { Gantry } from "gantry/client";
    const gantry = new Gantry();
    ${sdkRun}
    for await (const job of gantry.jobs.list({ status: "failed" })) console.log(job.id, job.error?.code);

  Or with curl:

    IMG=${options.examplePath}
    UPLOAD=$(curl -s -X POST $GANTRY_URL/v1/uploads -H "authorization: Bearer $GANTRY_KEY" \\
      -H "content-type: application/json" -d "{\\"content_type\\":\\"image/png\\",\\"size_bytes\\":$(wc -c < $IMG)}")
    curl -s -X PUT "$(echo $UPLOAD | sed -E 's/.*"url":"([^"]+)".*/\\1/')" -H "content-type: image/png" --data-binary @$IMG
    JOB=$(curl -s -X POST $GANTRY_URL/v1/jobs -H "authorization: Bearer $GANTRY_KEY" -H "content-type: application/json" \\
      -d "{\\"model\\":\\"${model}\\",\\"input\\":{\\"image\\":\\"$(echo $UPLOAD | sed -E 's/.*"id":"([^"]+)".*/\\1/')\\"}}")
    curl -s -N $GANTRY_URL/v1/jobs/$(echo $JOB | sed -E 's/.*"id":"([^"]+)".*/\\1/')/events -H "authorization: Bearer $GANTRY_KEY"

  Ctrl-C stops everything; jobs are kept for the next start.
`;
}

/**
 * For `gantry gateway`, which runs no agent: jobs wait ("No live agent serves model ocr")
 * until one is started, so say how. The enrollment token is named, not printed: it lets any
 * host join the fleet, and this banner often ends up in a service's log.
 */
export function agentsNote(options: {
  url: string;
  tokenFrom: "GANTRY_AGENT_TOKEN" | "secrets";
  dataDir: string;
  /** The broker agents read (its description), or null when the gateway serves its sql queue. */
  broker: string | null;
}): string {
  const token =
    options.tokenFrom === "GANTRY_AGENT_TOKEN"
      ? "the gateway's GANTRY_AGENT_TOKEN"
      : `"agentToken" in ${options.dataDir}/secrets.json`;
  const queue = options.broker ? ` --queue <the gateway's GANTRY_QUEUE_URL>` : "";
  const where = options.broker
    ? `they read ${options.broker} themselves`
    : "they take their jobs from this gateway and need no queue URL";
  return `  Agents     none runs in this process; jobs wait until one does. On each GPU host:
               GANTRY_AGENT_TOKEN=… npx gantry-agent run --gateway ${options.url}${queue}
             with ${token}, or an id and secret of its own
             from \`gantry agents create\`; ${where}.`;
}
