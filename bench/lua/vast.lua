-- GET the inline VAST of real ad requests, rotating through the uuid file.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   bench_init(args)
   for _, uuid in ipairs(load_uuids()) do
      table.insert(reqs, vast(uuid))
   end
   prebuilt()
end
