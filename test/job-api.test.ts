import { describeJobApi, type JobApiSetting } from "./helpers/job-api-suite.ts";
import { describeJobRetry } from "./helpers/job-retry-suite.ts";

const setting: JobApiSetting = { label: "SQLite, sql queue", database: "sqlite", queue: "sql" };
describeJobApi(setting);
describeJobRetry(setting);
