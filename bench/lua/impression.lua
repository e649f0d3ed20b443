-- Fire the impression pixel on real ad requests, rotating through the uuid file: the first pass over the
-- list counts, every later pass is a duplicate (as player retries are).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   for _, uuid in ipairs(load_uuids()) do
      table.insert(reqs, impression(uuid))
   end
end
