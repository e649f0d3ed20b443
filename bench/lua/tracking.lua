-- Fire the five quartile pixels, in the order a player does, on each real ad request of the uuid file:
-- the first pass over the uuid x event list counts, every later pass is a duplicate.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   for _, uuid in ipairs(load_uuids()) do
      for _, event in ipairs(QUARTILES) do
         table.insert(reqs, tracking(uuid, event))
      end
   end
end
