import { describeGatewayApi } from "../helpers/gateway-api-suite.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

// The same scenarios on Postgres: its own schema, dropped when the gateway closes.
describeGatewayApi("Postgres", () => startTestGateway({ database: "postgres" }));
