-- What the wrk scripts of bench/load-test share: the JSON POST to a namespace route with the
-- load key, and the one result line load-test parses.

-- Every request of this thread POSTs JSON to `route` of the namespace EVICORTEX_LOAD_NS.
function post_to_namespace(route)
  wrk.method = "POST"
  wrk.path = "/v1/namespaces/" .. os.getenv("EVICORTEX_LOAD_NS") .. "/" .. route
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("EVICORTEX_LOAD_KEY")
end

done = function(summary, latency, requests)
  io.write(string.format("WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout))
end
