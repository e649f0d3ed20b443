-- What players send, per ad slot: 1 ad request, 1 inline VAST fetch, 6 pixels (impression + 5 quartiles).
-- The request counter picks the kind (8 in a cycle); VAST and pixels use the real ad requests of the uuid
-- file in order from `offset`, so each pixel is a first fire until the list runs out.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   local count, uuid_at = load_uuids()
   local ad = ad_request(opt.format or "json")
   local kinds = {
      vast,
      impression,
      function(uuid) return tracking(uuid, "start") end,
      function(uuid) return tracking(uuid, "firstQuartile") end,
      function(uuid) return tracking(uuid, "midpoint") end,
      function(uuid) return tracking(uuid, "thirdQuartile") end,
      function(uuid) return tracking(uuid, "complete") end,
   }
   local before, after = {}, {}
   for k, make in ipairs(kinds) do
      before[k], after[k] = halves(make)
   end
   local n = #kinds + 1
   size = count * n
   function build(i)
      local k = (i - 1) % n
      if k == 0 then return ad end
      return before[k] .. uuid_at((i - 1 - k) / n + 1) .. after[k]
   end
end
