-- wrk script: every request appends one new turn (unique session per thread, increasing index),
-- so each request is a real durable append, never an idempotent no-op.
local threads = {}
local counter = 0

function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

function init(args)
  run_id = args[1] or "run"
  wrk.method = "POST"
  wrk.path = "/v1/namespaces/" .. os.getenv("EVICORTEX_LOAD_NS") .. "/turns"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("EVICORTEX_LOAD_KEY")
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

done = function(summary, latency, requests)
  io.write(string.format("WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout))
end
