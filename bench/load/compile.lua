-- wrk script: every request compiles context for one of a fixed set of questions.
local counter = 0

function init(args)
  wrk.method = "POST"
  wrk.path = "/v1/namespaces/" .. os.getenv("EVICORTEX_LOAD_NS") .. "/compile"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("EVICORTEX_LOAD_KEY")
end

local questions = { "Where did I move for my new job?", "What instrument am I learning?",
  "When is the trip to Kyoto?", "How is the marathon training going?", "What did the vet say about the cat?" }

function request()
  counter = counter + 1
  local q = questions[(counter % #questions) + 1]
  local body = string.format('{"query":"%s","budget":512,"reader_tokenizer":"o200k_base"}', q)
  return wrk.format(nil, nil, nil, body)
end

done = function(summary, latency, requests)
  io.write(string.format("WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout))
end
