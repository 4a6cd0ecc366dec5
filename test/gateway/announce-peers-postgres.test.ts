/**
 * A gateway announces its changes on Postgres only while another session listens (issue 29,
 * migration 0029): with one gateway every announcement came back to the gateway that made
 * the change, a notification and a wake of the listening backend per job event for nothing.
 * Two gateways hearing each other's changes are held by change-feed.test.ts.
 */
import type { Kysely } from "kysely";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { keepPeersAnnounced, mustAnnounce } from "../../gateway/feed/announce-peers.ts";
import { ANNOUNCE_SETTING } from "../../shared/db/migrations/0029-quiet-announcements.ts";
import { CHANNEL_QUERY, listenForChanges, listenStatement } from "../../shared/db/pg-listen.ts";
import { dropPostgresSchema, openPostgres } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { SessionSettings } from "../../shared/db/session-settings.ts";
import { freshPostgresUrl, TEST_POSTGRES_URL } from "../helpers/test-gateway.ts";

const fresh = freshPostgresUrl("gantry_announce");
const settings = new SessionSettings();
let db: Kysely<Database>;
let channel: string;
const quietLog = { warn: () => {} };

/** A session of the test's own on the schema, hearing the channel. */
async function listener() {
  const client = new pg.Client({
    connectionString: TEST_POSTGRES_URL,
    options: `-c search_path=${fresh.schema}`,
  });
  await client.connect();
  const heard: string[] = [];
  client.on("notification", (message) => heard.push(message.payload ?? ""));
  await client.query(listenStatement(channel));
  return { client, heard };
}

let nextJob = 0;
/** Inserts a job through `on`; returns its id. Its insert is an event, announced or not. */
async function insertJob(on: Kysely<Database> | pg.Client): Promise<string> {
  const id = `job_announce_${nextJob++}`;
  const insert = sql`INSERT INTO jobs (id, tenant_id, model, status, priority, input, attempt,
    created_at, updated_at, expires_at, last_seq) VALUES (${id}, 'ten_a', 'noop', 'queued', 0,
    '{}', 0, 1, 1, 9999999999999, 1)`;
  if (on instanceof pg.Client) {
    const { sql: text, parameters } = insert.compile(db);
    await on.query(text, [...parameters]);
  } else await insert.execute(on);
  return id;
}

const about = (heard: readonly string[], id: string) => heard.some((p) => p.includes(` ${id} `));

beforeAll(async () => {
  db = await openPostgres(fresh.url, { settings });
  const { rows } = await sql<{ channel: string }>`${sql.raw(CHANNEL_QUERY)}`.execute(db);
  channel = rows[0]?.channel ?? "";
});

afterAll(async () => {
  await db?.destroy();
  await dropPostgresSchema(fresh.url, fresh.schema);
});

describe("announcements on Postgres", () => {
  it("a session that turned them off changes jobs unannounced; any other session announces", async () => {
    const ear = await listener();
    const quiet = new pg.Client({
      connectionString: TEST_POSTGRES_URL,
      options: `-c search_path=${fresh.schema}`,
    });
    await quiet.connect();
    try {
      await quiet.query("SELECT set_config($1, 'off', false)", [ANNOUNCE_SETTING]);
      const unannounced = await insertJob(quiet);
      await quiet.query("SELECT set_config($1, 'on', false)", [ANNOUNCE_SETTING]);
      const announced = await insertJob(quiet);
      const unset = await insertJob(db);
      // Notifications arrive in commit order: once the last is heard, the first would be too.
      await vi.waitFor(() => expect(about(ear.heard, unset)).toBe(true), { timeout: 10_000 });
      expect(about(ear.heard, announced)).toBe(true);
      expect(about(ear.heard, unannounced)).toBe(false);
    } finally {
      await quiet.end();
      await ear.client.end();
    }
  });

  it("a gateway alone turns them off, and on again while another session listens", async () => {
    const peers = keepPeersAnnounced({ db, settings, listening: () => null, log: quietLog });
    const setting = async () => {
      const { rows } = await sql<{ value: string | null }>`
        SELECT current_setting(${ANNOUNCE_SETTING}, true) AS value`.execute(db);
      return rows[0]?.value;
    };
    try {
      await vi.waitFor(() => expect(settings.get(ANNOUNCE_SETTING)).toBe("off"), {
        timeout: 10_000,
      });
      // The pool's connections take it before their next statement.
      expect(await setting()).toBe("off");

      const ear = await listener();
      try {
        await vi.waitFor(() => expect(settings.get(ANNOUNCE_SETTING)).toBe("on"), {
          timeout: 10_000,
        });
        expect(await setting()).toBe("on");
        const id = await insertJob(db);
        await vi.waitFor(() => expect(about(ear.heard, id)).toBe(true), { timeout: 10_000 });
      } finally {
        await ear.client.end();
      }
      await vi.waitFor(() => expect(settings.get(ANNOUNCE_SETTING)).toBe("off"), {
        timeout: 10_000,
      });
    } finally {
      peers.close();
    }
  });

  it("its own listener does not count as another, and a newcomer's hello reaches it", async () => {
    let hellos = 0;
    const own = listenForChanges(fresh.url, {
      onChange: () => {},
      onLive: () => {},
      onHello: () => {
        hellos++;
        peers.hello();
      },
    });
    const peers = keepPeersAnnounced({ db, settings, listening: own.listening, log: quietLog });
    try {
      await vi.waitFor(() => expect(own.listening()).not.toBeNull(), { timeout: 10_000 });
      await vi.waitFor(() => expect(settings.get(ANNOUNCE_SETTING)).toBe("off"), {
        timeout: 10_000,
      });
      const newcomer = listenForChanges(fresh.url, { onChange: () => {}, onLive: () => {} });
      try {
        await vi.waitFor(() => expect(hellos).toBe(1), { timeout: 10_000 });
        expect(settings.get(ANNOUNCE_SETTING)).toBe("on");
      } finally {
        await newcomer.close();
      }
    } finally {
      peers.close();
      await own.close();
    }
  });

  it("announces whenever it cannot tell that nobody else listens", () => {
    expect(mustAnnounce({ others: 0, hidden: 0, visible: true })).toBe(false);
    expect(mustAnnounce({ others: 1, hidden: 0, visible: true })).toBe(true);
    // Another role's sessions show no statement: any of them may be listening.
    expect(mustAnnounce({ others: 0, hidden: 2, visible: true })).toBe(true);
    // Statements not tracked at all (track_activities = off): nothing can be told.
    expect(mustAnnounce({ others: 0, hidden: 0, visible: false })).toBe(true);
  });
});
