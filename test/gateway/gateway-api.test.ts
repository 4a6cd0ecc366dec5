import { describeGatewayApi } from "../helpers/gateway-api-suite.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

describeGatewayApi("SQLite", () => startTestGateway());
