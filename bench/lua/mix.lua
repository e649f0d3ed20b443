-- What players send, per ad slot: 1 ad request, 1 inline VAST fetch, 6 pixels (impression + 5 quartiles).
-- The request counter picks the kind (8 in a cycle); VAST and pixels use the real ad requests of the uuid
-- file, so the mix's pixels are duplicates once the pixel scenarios (or an earlier pass) fired them.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   local ad = ad_request(opt.format or "json")
   for _, uuid in ipairs(load_uuids()) do
      table.insert(reqs, ad)
      table.insert(reqs, vast(uuid))
      table.insert(reqs, impression(uuid))
      for _, event in ipairs(QUARTILES) do
         table.insert(reqs, tracking(uuid, event))
      end
   end
end
