-- wrk script: the anchor, GET /healthz (HTTP and routing overhead only, no store access).
done = function(summary, latency, requests)
  io.write(string.format("WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout))
end
