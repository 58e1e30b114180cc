-- wrk script: every request appends one new turn (unique session per thread, increasing index),
-- so each request is a real durable append, never an idempotent no-op.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")
local threads = {}
local counter = 0

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  run_id = args[1] or "run"
  post_to_namespace("turns")
end

local topics = { "hiking in the Alps", "a new job in Lisbon", "learning the cello", "the cat's vet visit",
  "planning a trip to Kyoto", "a sourdough recipe", "moving apartments", "marathon training" }

function request()
  counter = counter + 1
  local topic = topics[(counter % #topics) + 1]
  local body = string.format(
    '{"turns":[{"session":"load-%s-%d","turn":%d,"role":"user","text":"Turn %d of thread %d: notes about %s.","time":"2024-05-%02dT10:%02d:00+01:00"}]}',
    run_id, thread_id, counter, counter, thread_id, topic, (counter % 28) + 1, counter % 60)
  return wrk.format(nil, nil, nil, body)
end
