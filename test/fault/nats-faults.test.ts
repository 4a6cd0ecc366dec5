import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { NatsNames } from "../../shared/queue/nats/names.ts";
import { describeStreamBrokerFaults } from "../helpers/fault-stream-suite.ts";

/** nats-server with JetStream file storage on its own port and directory. */
describeStreamBrokerFaults("nats", async (broker, prefix, jobs) => {
  const nc = await connect({ servers: `127.0.0.1:${broker.port}` });
  try {
    const jsm = await jetstreamManager(nc);
    const names = new NatsNames(prefix);
    let purged = 0;
    for (const job of jobs) {
      for (const lane of ["high", "normal"] as const) {
        const filter = names.subject("noop", lane, job.id);
        purged += (await jsm.streams.purge(names.stream, { filter })).purged;
      }
    }
    return purged;
  } finally {
    await nc.close();
  }
});
