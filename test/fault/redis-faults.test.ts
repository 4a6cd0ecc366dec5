import { createClient } from "redis";
import { RedisKeys } from "../../shared/queue/redis/client.ts";
import { describeStreamBrokerFaults } from "../helpers/fault-stream-suite.ts";

/** Redis with AOF on its own port: killed and restarted, agents killed, poison, lost messages. */
describeStreamBrokerFaults("redis", async (broker, prefix, jobs) => {
  const client = createClient({ url: `redis://127.0.0.1:${broker.port}` });
  await client.connect();
  try {
    const ids = new Set(jobs.map((job) => job.id));
    let deleted = 0;
    for (const lane of ["high", "normal"] as const) {
      const stream = new RedisKeys(prefix).lane("noop", lane);
      const entries = await client.xRange(stream, "-", "+");
      for (const entry of entries.filter((e) => ids.has(e.message.j ?? ""))) {
        deleted += await client.xDel(stream, entry.id);
      }
    }
    return deleted;
  } finally {
    await client.close();
  }
});
