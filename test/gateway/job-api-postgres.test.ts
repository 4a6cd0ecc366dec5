import { describeJobApi, type JobApiSetting } from "../helpers/job-api-suite.ts";
import { describeJobBatches } from "../helpers/job-batch-suite.ts";
import { describeJobRetry } from "../helpers/job-retry-suite.ts";
import { describeJobStanding } from "../helpers/job-standing-suite.ts";
import { describeModelSwitches } from "../helpers/job-switch-suite.ts";

// The same scenarios on Postgres, with RabbitMQ carrying the jobs to the agents.
const setting: JobApiSetting = { label: "Postgres, RabbitMQ", database: "postgres", queue: "amqp" };
describeJobApi(setting);
describeJobBatches(setting);
describeJobRetry(setting);
describeJobStanding(setting);
describeModelSwitches(setting);
