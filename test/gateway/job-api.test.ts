import { describeJobApi, type JobApiSetting } from "../helpers/job-api-suite.ts";
import { describeJobBatches } from "../helpers/job-batch-suite.ts";
import { describeJobRetry } from "../helpers/job-retry-suite.ts";
import { describeJobStanding } from "../helpers/job-standing-suite.ts";
import { describeModelSwitches } from "../helpers/job-switch-suite.ts";

const setting: JobApiSetting = { label: "SQLite, sql queue", database: "sqlite", queue: "sql" };
describeJobApi(setting);
describeJobBatches(setting);
describeJobRetry(setting);
describeJobStanding(setting);
describeModelSwitches(setting);
