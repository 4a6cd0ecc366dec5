import type { AgentCall } from "../agents/calls.ts";
import { agentCalls } from "./agent.ts";
import { agentBatchCalls } from "./agent-batch.ts";
import { agentQueueCalls } from "./agent-queue.ts";

/** Where the internal agent API is mounted. */
export const AGENT_API_PREFIX = "/internal/v1";

/** Every call of the internal agent API but enrollment: what an agent session may call. */
export const sessionCalls: AgentCall[] = [...agentCalls, ...agentBatchCalls, ...agentQueueCalls];
