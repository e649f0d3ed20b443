-- Make real ad requests as fast as the server answers them and keep their uuids: the pixel scenarios fire
-- on them. args: key, venue, screen, out (the file the uuids go to, one per line). Not a measured run: the
-- response() callback, which makes wrk parse every answer, costs client CPU.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

minted = {}

function init(args)
   bench_init(args)
   reqs = { ad_request("json") }
   prebuilt()
end

function response(status, headers, body)
   if status == 200 then
      local uuid = body:match('"ad_request_uuid":"([%x%-]+)"')
      if uuid then table.insert(minted, uuid) end
   end
end

function done(summary, latency, requests)
   -- done() runs in wrk's main Lua state, where no init() ran: the arguments are read from a thread's.
   local out = assert(io.open(bench_threads[1]:get("opt").out, "w"))
   for _, thread in ipairs(bench_threads) do
      for _, uuid in ipairs(thread:get("minted") or {}) do
         out:write(uuid, "\n")
      end
   end
   out:close()
   bench_done(summary, latency, requests)
end
