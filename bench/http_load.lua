-- http_load.lua: wrk script for bench/http_load.sh: POST one small inline job (1024 float32,
-- Prefer: wait=5; JSON, or raw with GPURED_BENCH_FORM=binary) per request and print the summary
-- as one JSON line at the end.
local vals = {}
for i = 1, 1024 do vals[i] = string.format("%.3f", (i * 7919 % 1000) / 10.0) end
wrk.method = "POST"
wrk.path = "/v1/jobs"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Prefer"] = "wait=5"
if os.getenv("GPURED_BENCH_TOKEN") then -- a server with --tokens-file: every request carries the token
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("GPURED_BENCH_TOKEN")
end
local device = os.getenv("GPURED_DEVICE") or "auto"
-- GPURED_BENCH_BODY: another job instead (bench/replicas_gpu.py: one on a dataset)
wrk.body = os.getenv("GPURED_BENCH_BODY") or
           ('{"op":"sum","dtype":"float32","device":"' .. device .. '","data":[' .. table.concat(vals, ",") .. ']}')
-- GPURED_BENCH_FORM=binary: the same values as a one-shot raw body (4096 bytes, little-endian)
if os.getenv("GPURED_BENCH_FORM") == "binary" then
  local ffi = require("ffi")
  local raw = ffi.new("float[1024]")
  for i = 1, 1024 do raw[i - 1] = tonumber(vals[i]) end
  wrk.path = "/v1/jobs?op=sum&dtype=float32&device=" .. device
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.body = ffi.string(raw, 4096)
end

local non200 = 0
response = function(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
end

done = function(summary, latency, requests)
  io.write(string.format(
    'JSON {"requests":%d,"duration_s":%.3f,"jobs_per_s":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"socket_errors":%d,"non_2xx":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
