-- Shared by every scenario script (loaded with dofile): arguments, the uuid list, the optional status
-- tally and per-connection delay, and the result line that bench/wrk.py parses.
--
-- Arguments come after `--` on the wrk command line as key=value pairs; each scenario's init() calls
-- bench_init(args), then sets `size` (how many distinct requests it has) and `build(i)` (the i-th, 1-based):
-- a prebuilt string (prebuilt()), or, for the long uuid lists of the pixel scenarios, one concatenation of
-- a template's two halves around a uuid (a prebuilt string per request would cost hundreds of MB).

bench_threads = {}
opt = {}
statuses = {}
results = {}
reqs = {}
seq = 0
local stride = 1

function setup(thread)
   table.insert(bench_threads, thread)
   thread:set("thread_index", #bench_threads - 1)
end

function bench_init(args)
   for _, arg in ipairs(args) do
      local k, v = arg:match("^([%w_]+)=(.*)$")
      if k then opt[k] = v end
   end
   stride = tonumber(opt.threads or "1")
   -- `offset`: where this run starts in the request list, so that a run goes on where the last one of the
   -- same scenario stopped and fires pixels that are still unfired.
   seq = (thread_index or 0) + tonumber(opt.offset or "0")
   math.randomseed(os.time() * 1000 + seq)
   if opt.tally == "1" then
      -- Tally every status and pixel result. Off by default: it makes wrk parse each answer into Lua,
      -- ~6 us of client CPU per request that the servers would otherwise have on a small machine.
      response = tally
   end
   local delay_ms = tonumber(opt.delay_ms or "0")
   if delay_ms > 0 then
      -- Uniform on [d/2, 3d/2] (mean d), rounded up or down at random so the mean stays d in whole
      -- milliseconds; the jitter keeps the connections from firing in lockstep bursts.
      function delay()
         local x = delay_ms * (0.5 + math.random())
         local f = math.floor(x)
         if math.random() < x - f then f = f + 1 end
         return f
      end
   end
end

-- The uuid file (one per line, every line as wide) as one string, and its count and i-th uuid (1-based).
-- Not a table of strings: wrk runs each thread's init on its main thread after starting the threads before
-- it, so a list loaded line by line (2 million strings, ~1.2 s of CPU per thread) would load while the first
-- thread already fires, sharing the CPUs with the measured server, and its large heap would make each
-- request dearer to build (wrk at ~20 us of CPU per request instead of ~12 on the bare app).
function load_uuids()
   local file = assert(io.open(opt.uuids, "rb"))
   local text = file:read("*a")
   file:close()
   local width = text:find("\n", 1, true)
   assert(width and width > 1, "no uuids in " .. tostring(opt.uuids))
   for stop = width, #text, width do
      assert(text:byte(stop) == 10, "the lines of " .. opt.uuids .. " are not all as wide as the first")
   end
   assert(#text % width == 0, "the last line of " .. opt.uuids .. " is not as wide as the first")
   local function at(i)
      local start = (i - 1) * width + 1
      return text:sub(start, start + width - 2)
   end
   return #text / width, at
end

-- Use the prebuilt strings in `reqs` as the request list.
function prebuilt()
   size = #reqs
   function build(i) return reqs[i] end
end

-- The request string `make(MARK)` builds, split around MARK: its halves, to put a uuid between.
local MARK = "@uuid@"
function halves(make)
   local whole = make(MARK)
   local at = whole:find(MARK, 1, true)
   return whole:sub(1, at - 1), whole:sub(at + #MARK)
end

function prefix()
   return opt.prefix or ""
end

function get(path)
   return wrk.format("GET", prefix() .. path)
end

-- The request is prebuilt, so its play_time is fixed for the whole run: `lead` seconds (default 60) after
-- wrk starts. A run longer than adslot's play_time skew (the mint) asks for a longer lead, or its last
-- requests would name a slot already past and be refused.
function ad_request(fmt)
   local body = string.format('{"venue_id":"%s","screen_id":"%s","play_time":%d}',
      opt.venue, opt.screen, os.time() + tonumber(opt.lead or "60"))
   local headers = { ["Content-Type"] = "application/json", ["Ssp-Key"] = opt.key }
   return wrk.format("POST", prefix() .. "/api/v1/ad/request?format=" .. fmt, headers, body)
end

function vast(uuid)
   return get("/api/v1/ad/vast/" .. uuid)
end

function impression(uuid)
   return get("/api/v1/ad/callback/?ad_request_uuid=" .. uuid)
end

QUARTILES = { "start", "firstQuartile", "midpoint", "thirdQuartile", "complete" }

function tracking(uuid, event)
   return get("/api/v1/ad/tracking/video/?ad_request_uuid=" .. uuid .. "&event=" .. event)
end

-- The threads walk one sequence together (thread i takes i, i+T, i+2T, ...), so a list is covered once
-- before anything repeats, whatever the thread count.
function request()
   local r = build((seq % size) + 1)
   seq = seq + stride
   return r
end

-- Pixel answers say whether the fire counted or was a duplicate (or an echo).
function tally(status, headers, body)
   local key = tostring(status)
   statuses[key] = (statuses[key] or 0) + 1
   local result = body:match('"result":"(%a+)"')
   if result then results[result] = (results[result] or 0) + 1 end
end

local function sum_tables(name)
   local total = {}
   for _, t in ipairs(bench_threads) do
      for k, v in pairs(t:get(name) or {}) do
         total[k] = (total[k] or 0) + v
      end
   end
   return total
end

local function json_counts(counts)
   local parts = {}
   for k, v in pairs(counts) do
      table.insert(parts, string.format('"%s":%d', k, v))
   end
   table.sort(parts)
   return "{" .. table.concat(parts, ",") .. "}"
end

function bench_done(summary, latency, requests)
   local e = summary.errors
   local counts = sum_tables("statuses")
   -- Without the tally, wrk's own count of answers with a status above 399 stands in for non-2xx.
   local non2xx = e.status
   if next(counts) then
      non2xx = 0
      for k, v in pairs(counts) do
         local s = tonumber(k)
         if s < 200 or s > 299 then non2xx = non2xx + v end
      end
   end
   local seconds = summary.duration / 1e6
   -- Where a next run should start in the request list: past every request a thread has sent (answered
   -- or still in flight), so that it repeats none of them.
   local next_offset = 0
   for _, t in ipairs(bench_threads) do
      next_offset = math.max(next_offset, t:get("seq") or 0)
   end
   io.write(string.format(
      'BENCH_RESULT {"requests":%d,"duration_s":%.6f,"rps":%.2f,"bytes":%d,"next_offset":%d,' ..
      '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f,' ..
      '"non2xx":%d,"statuses":%s,"results":%s,' ..
      '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d}}\n',
      summary.requests, seconds, summary.requests / seconds, summary.bytes, next_offset,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      latency.max, latency.mean, non2xx, json_counts(counts), json_counts(sum_tables("results")),
      e.connect, e.read, e.write, e.timeout))
end

done = bench_done
