import { createHash } from "node:crypto";

/**
 * The Lua scripts of the `redis` queue. Each runs on the keys of one model (KEYS, in the
 * order of `RedisKeys.of`), which share a hash tag, so every script stays inside one slot.
 * Scripts make each step atomic: a settle checks the lease and acts in one go, so a late
 * settle cannot touch a redelivery, and a crash never leaves a message half-moved.
 *
 * Stream entry fields: `m` the message JSON, `a` attempts made before this entry was added
 * (a retried message comes back as a new entry), `j` the job id; dead letters add `e`, the
 * error JSON, and `a` is then the attempts made. The `live` hash maps a job id to where
 * its newest message is (`<lane> <entry id>` or `z <delayed member>`), so `absent` can tell
 * a message that vanished (a crash of a Redis without fsync) from one still waiting.
 * Times come from the server's clock (TIME), never the client's.
 */
const PRELUDE = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lane_key(lane)
  if lane == 'high' then return KEYS[1] end
  return KEYS[2]
end
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end
local function forget(job, where)
  if redis.call('HGET', KEYS[5], job) == where then redis.call('HDEL', KEYS[5], job) end
end
local function move(job, from, to)
  if redis.call('HGET', KEYS[5], job) == from then redis.call('HSET', KEYS[5], job, to) end
end
`;

/** ARGV: lane, body, job id, delay ms, a unique tag (for a delayed member). */
const PUBLISH = `${PRELUDE}
local lane, body, job, delay, tag = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
if delay > 0 then
  local member = cjson.encode({u = tag, l = lane, a = 0, j = job, m = body})
  redis.call('ZADD', KEYS[3], now_ms() + delay, member)
  redis.call('HSET', KEYS[5], job, 'z ' .. member)
  return 1
end
local id = redis.call('XADD', lane_key(lane), '*', 'm', body, 'a', '0', 'j', job)
redis.call('HSET', KEYS[5], job, lane .. ' ' .. id)
return 1
`;

/**
 * Hands out up to `want` deliveries, high lane first: due delayed messages go back to
 * their lane, then per lane expired leases are reclaimed (XAUTOCLAIM; one whose attempts
 * are spent goes to the dead-letter stream instead), then new entries are read
 * (XREADGROUP). ARGV: group, consumer, want, maxAttempts, leaseMs, the exhausted error.
 * Returns: server time, the next due time (-1: none), the newest entry id of each lane (for
 * the blocking wait), then lane, id, body, attempt, delivery count per delivery.
 */
const TAKE = `${PRELUDE}
local group, consumer = ARGV[1], ARGV[2]
local want, max_attempts, lease = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 100)
for _, member in ipairs(due) do
  local d = cjson.decode(member)
  local id = redis.call('XADD', lane_key(d.l), '*', 'm', d.m, 'a', tostring(d.a), 'j', d.j)
  redis.call('ZREM', KEYS[3], member)
  move(d.j, 'z ' .. member, d.l .. ' ' .. id)
end
local out = {}
for _, lane in ipairs({'high', 'normal'}) do
  local key = lane_key(lane)
  redis.pcall('XGROUP', 'CREATE', key, group, '0', 'MKSTREAM')
  if want > 0 then
    local claimed = redis.call('XAUTOCLAIM', key, group, consumer, lease, '0-0', 'COUNT', want)
    for _, entry in ipairs(claimed[2]) do
      local id, fields = entry[1], entry[2]
      if fields then
        local info = redis.call('XPENDING', key, group, id, id, 1)[1]
        local count = tonumber(info[4])
        local a = tonumber(field(fields, 'a') or '0')
        local job = field(fields, 'j') or ''
        if a + count > max_attempts then
          redis.call('XADD', KEYS[4], '*', 'm', field(fields, 'm') or '', 'a', tostring(a + count - 1),
            'j', job, 'e', ARGV[6])
          redis.call('XACK', key, group, id)
          redis.call('XDEL', key, id)
          forget(job, lane .. ' ' .. id)
        else
          for _, v in ipairs({lane, id, field(fields, 'm') or '', a + count, count}) do table.insert(out, v) end
          want = want - 1
        end
      end
    end
  end
  if want > 0 then
    local fresh = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want, 'STREAMS', key, '>')
    if fresh then
      for _, entry in ipairs(fresh[1][2]) do
        local a = tonumber(field(entry[2], 'a') or '0')
        for _, v in ipairs({lane, entry[1], field(entry[2], 'm') or '', a + 1, 1}) do table.insert(out, v) end
        want = want - 1
      end
    end
  end
end
local next_due = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2] or '-1'
local head = {now, next_due}
for i = 1, 2 do
  local last = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)[1]
  table.insert(head, last and last[1] or '0-0')
end
for _, v in ipairs(out) do table.insert(head, v) end
return head
`;

/**
 * Settles or extends one delivery, only while its lease holds: the entry is still pending
 * for this consumer, with the delivery count it was handed out with, and not idle past the
 * lease. ARGV: op (ack|retry|dead|extend), lane, id, group, consumer, delivery count,
 * leaseMs, op argument (retry delay, error JSON, or extension ms), job id, body, attempt.
 * Returns 1, or 0 when the lease was lost.
 */
const SETTLE = `${PRELUDE}
local op, lane, id, group, consumer = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local count, lease, job, body, attempt = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[9], ARGV[10], tonumber(ARGV[11])
local key = lane_key(lane)
local p = redis.pcall('XPENDING', key, group, id, id, 1)
if type(p) ~= 'table' or p.err or #p == 0 then return 0 end
local e = p[1]
if e[2] ~= consumer or tonumber(e[4]) ~= count or tonumber(e[3]) >= lease then return 0 end
if op == 'extend' then
  -- JUSTID: re-claiming for itself does not count as a delivery.
  redis.call('XCLAIM', key, group, consumer, 0, id, 'IDLE', math.max(0, lease - tonumber(ARGV[8])), 'JUSTID')
  return 1
end
local here = lane .. ' ' .. id
redis.call('XACK', key, group, id)
redis.call('XDEL', key, id)
if op == 'ack' then
  forget(job, here)
elseif op == 'retry' then
  local member = cjson.encode({u = here, l = lane, a = attempt, j = job, m = body})
  redis.call('ZADD', KEYS[3], now_ms() + tonumber(ARGV[8]), member)
  move(job, here, 'z ' .. member)
elseif op == 'dead' then
  redis.call('XADD', KEYS[4], '*', 'm', body, 'a', tostring(attempt), 'j', job, 'e', ARGV[8])
  forget(job, here)
end
return 1
`;

/** ARGV: group. Returns ready, in flight, delayed, dead. */
const DEPTH = `
local ready, inflight = 0, 0
for i = 1, 2 do
  local len = redis.call('XLEN', KEYS[i])
  local p = redis.pcall('XPENDING', KEYS[i], ARGV[1])
  local n = 0
  if type(p) == 'table' and not p.err then n = tonumber(p[1]) end
  ready = ready + math.max(0, len - n)
  inflight = inflight + n
end
return {ready, inflight, redis.call('ZCARD', KEYS[3]), redis.call('XLEN', KEYS[4])}
`;

/** ARGV: job ids. Returns those whose newest message is nowhere to be found. */
const ABSENT = `${PRELUDE}
local gone = {}
for i = 1, #ARGV do
  local job = ARGV[i]
  local where = redis.call('HGET', KEYS[5], job)
  local found = false
  if where then
    local kind, rest = string.match(where, '^(%S+) (.*)$')
    if kind == 'z' then
      found = redis.call('ZSCORE', KEYS[3], rest) ~= false
    elseif kind then
      found = #redis.call('XRANGE', lane_key(kind), rest, rest) > 0
    end
  end
  if not found then table.insert(gone, job) end
end
return gone
`;

/**
 * Removes a stopping consumer's name from the group, on each lane, only where it holds no
 * pending entry (DELCONSUMER would drop those from the pending list: lost, never redelivered).
 * ARGV: group, consumer.
 */
const FORGET_CONSUMER = `
for i = 1, 2 do
  local p = redis.pcall('XPENDING', KEYS[i], ARGV[1], '-', '+', 1, ARGV[2])
  if type(p) == 'table' and not p.err and #p == 0 then
    redis.pcall('XGROUP', 'DELCONSUMER', KEYS[i], ARGV[1], ARGV[2])
  end
end
return 1
`;

export interface Script {
  readonly source: string;
  readonly sha: string;
}

const script = (source: string): Script => ({
  source,
  sha: createHash("sha1").update(source).digest("hex"),
});

export const SCRIPTS = {
  publish: script(PUBLISH),
  take: script(TAKE),
  settle: script(SETTLE),
  depth: script(DEPTH),
  absent: script(ABSENT),
  forgetConsumer: script(FORGET_CONSUMER),
} as const;
