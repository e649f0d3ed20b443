-- Fire the five quartile pixels, in the order a player does, on each real ad request of the uuid file,
-- starting at `offset`: each uuid x event once (a first fire) until the list runs out, then duplicates.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   local count, uuid_at = load_uuids()
   local before, after = {}, {}
   for e, event in ipairs(QUARTILES) do
      before[e], after[e] = halves(function(uuid) return tracking(uuid, event) end)
   end
   local n = #QUARTILES
   size = count * n
   function build(i)
      local e = (i - 1) % n + 1
      return before[e] .. uuid_at((i - e) / n + 1) .. after[e]
   end
end
